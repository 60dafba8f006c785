"""Token counts in cl100k_base, from the data file shipped in a package (no download)."""

from __future__ import annotations

from threadloom import tokens


def test_counts_known_strings_as_cl100k_does() -> None:
    # Reference counts of cl100k_base: "hello world" is two tokens, and a repeated word merges.
    assert tokens.count("hello world") == 2
    assert tokens.count("") == 0
    assert tokens.count("<|endoftext|>") > 1  # a special token's spelling is plain text here


def test_longer_text_counts_fewer_tokens_than_characters() -> None:
    text = "threadloom keeps memories for agents across sessions. " * 20
    assert len(text) / 6 < tokens.count(text) < len(text) / 3
