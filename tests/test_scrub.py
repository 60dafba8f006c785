"""The scrubber on its corpus: every synthetic secret shape scrubbed, every look-alike kept."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest

from threadloom.scrub import SCRUB, Scrubber, collecting, scrub

CORPUS = Path(__file__).parent / "data" / "secrets"


def _load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (CORPUS / name).read_text(encoding="utf-8").splitlines() if line]


SECRETS = _load("secrets.jsonl")
LOOKALIKES = _load("lookalikes.jsonl")


def test_the_corpus_holds_at_least_40_secret_shapes_and_40_lookalikes() -> None:
    assert len({s["name"] for s in SECRETS}) >= 40
    assert len({s["name"] for s in LOOKALIKES}) >= 40


@pytest.mark.parametrize("case", SECRETS, ids=lambda c: c["name"])
def test_every_secret_shape_is_scrubbed_to_a_typed_placeholder(case: dict[str, Any]) -> None:
    result = scrub(case["text"])
    for secret in case["secrets"]:
        assert secret not in result.text
    assert result.kinds
    for kind in result.kinds:
        assert f"[secret:{kind}]" in result.text


@pytest.mark.parametrize("case", LOOKALIKES, ids=lambda c: c["name"])
def test_every_lookalike_survives_unchanged(case: dict[str, Any]) -> None:
    assert scrub(case["text"]) == scrub(case["text"]).__class__(case["text"], ())


@pytest.mark.parametrize("case", SECRETS, ids=lambda c: c["name"])
def test_a_scrubbed_text_scrubs_to_itself(case: dict[str, Any]) -> None:
    once = scrub(case["text"]).text
    assert scrub(once).text == once
    assert scrub(once).kinds == ()


def test_the_surrounding_text_the_name_and_the_url_without_its_password_stay() -> None:
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4"
    assert scrub(f"export GITHUB_TOKEN={token} # for CI").text == "export GITHUB_TOKEN=[secret:github-token] # for CI"
    url = scrub("connect to postgres://app:Zq8vR2mK9wX4pL7n@db.internal:5432/app now").text
    assert url == "connect to postgres://app:[secret:url-password]@db.internal:5432/app now"
    assert scrub('{"password": "s3cr3t-Hunter"}').text == '{"password": "[secret:password]"}'


def test_offsets_hold_in_text_whose_lower_case_is_longer() -> None:
    # 'İ'.lower() is two characters: positions found in a lower-cased copy must still fit the original.
    text = "İİİİ password: Zq8vR2mK9wX4 İİ and key ghp_" + "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4"
    assert scrub(text).text == "İİİİ password: [secret:password] İİ and key [secret:github-token]"


def test_a_token_inside_a_longer_word_is_not_taken_for_one() -> None:
    word = "xghp_" + "aB3dE5fG7hJ9kL1mN2pQ4rS6tU8vW0xY2zA4"
    assert scrub(word).text == word


def test_an_unterminated_private_key_is_scrubbed_as_far_as_it_runs() -> None:
    text = (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n"
        "4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u\n"
    )
    assert scrub(text + "\nthe rest").text == "[secret:private-key]\n\nthe rest"


def test_the_scrubber_reports_what_it_replaced_to_the_collecting_call() -> None:
    with collecting() as kinds:
        SCRUB.text("AWS key AKIAIOSFODNN7EXAMPLF and password: Zq8vR2mK9wX4")
        SCRUB.text("password: Zq8vR2mK9wX5")
    assert kinds == ["aws-access-key-id", "password"]


def test_scrubbing_off_keeps_the_text_verbatim_and_reports_nothing() -> None:
    text = "password: Zq8vR2mK9wX4"
    with collecting() as kinds:
        assert Scrubber(enabled=False).text(text) == text
    assert kinds == []


def test_a_tree_is_scrubbed_in_every_string_keys_included() -> None:
    token = "npm_" + "A" * 4 + "b7C9d1E3f5G7h9J1k3L5m7N9p1Q3r5S7"
    tree = {"result": [{"note": f"token {token}"}, 3, None], token: True}
    assert SCRUB.tree(tree) == {"result": [{"note": "token [secret:npm-token]"}, 3, None], "[secret:npm-token]": True}


def test_huge_empty_and_hostile_inputs_are_scrubbed() -> None:
    assert scrub("").text == ""
    line = "a=" + "x" * 5_000_000
    assert scrub(line).text == line
    opened = "-----BEGIN PRIVATE KEY-----\n" * 20_000  # openings without an end, each looking ahead
    assert scrub(opened).text == "[secret:private-key]\n" * 20_000
    # A run of a token's prefix: tried once per run, not once per position (each try scans the run).
    for run in ("eyJ" * 30_000, "ghp_" * 30_000, "sk-" * 30_000, "AKIA" * 30_000, "xoxb-" * 30_000):
        assert scrub(run).text == run
    # A long run of letters that is not words after all: the word check must not try every split of it.
    assert scrub("api_key=Zq8vR2" + string.ascii_lowercase * 3 + "!").text == "api_key=[secret:api-key]"
