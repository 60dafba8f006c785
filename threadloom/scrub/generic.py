"""Credentials known by where they stand rather than by their shape: a value assigned to a secret-like
name (`API_KEY=...`, `password: ...`, `"client_secret": "..."`, `--token ...`), a password in a URL
(`scheme://user:pass@host`), and an Authorization header's credentials.

A value is kept when it is a placeholder (`YOUR_API_KEY`, `<token>`, `${GITHUB_TOKEN}`, `xxxx`), a
reference to one (`os.environ["X"]`, `process.env.X`, a call), a path, a URL, a number or a type name.
Beside a token or key name, it must also look random (long enough, mixed characters, high entropy):
`max_tokens: 4096`, `tokenizer: cl100k_base` and `primary_key: id` stay as they are.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

PASSWORD_WORDS: Final = frozenset({"pass", "pwd", "passwd", "password", "passphrase"})
PASSWORD_ENDINGS: Final = ("password", "passwd", "passphrase")
TOKEN_ENDINGS: Final = ("token", "secret", "apikey", "accesskey", "secretkey", "privatekey")
SECRET_WORDS: Final = frozenset({"secret", "secrets", "auth", "creds", "credential", "credentials", "bearer", "key"})
# A name ending in one of these describes a secret, it does not hold one (token_url, secret_name, key_id).
METADATA_WORDS: Final = frozenset(
    [
        "id",
        "ids",
        "name",
        "names",
        "path",
        "file",
        "dir",
        "folder",
        "url",
        "uri",
        "endpoint",
        "host",
        "type",
        "types",
        "count",
        "counts",
        "len",
        "length",
        "size",
        "limit",
        "limits",
        "ttl",
        "expiry",
        "expires",
        "expiration",
        "header",
        "env",
        "var",
        "field",
        "prefix",
        "suffix",
        "hint",
        "label",
        "format",
        "policy",
        "mode",
        "required",
        "enabled",
        "min",
        "max",
        "version",
        "manager",
        "store",
        "kind",
        "source",
        "provider",
        "rotation",
        "hash",
        "algorithm",
        "algo",
        "method",
        "scheme",
        "scope",
        "scopes",
        "usage",
        "used",
        "index",
        "column",
        "table",
        "regex",
        "pattern",
    ]
)
# Never secret, whatever follows: public keys, publishable keys, counters of tokens.
HARMLESS_WORDS: Final = frozenset({"public", "publishable", "pub", "tokens", "tokenizer", "author", "keys"})

_WORDS: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# Words (capitalised, lower or upper case, of 2+ letters), numbers and separators, and nothing else.
# Possessive, so that a failed match never tries the ways of splitting a run of letters (exponential).
_MADE_OF_WORDS: Final = re.compile(r"(?:[A-Z]?+[a-z]{2,}+|[A-Z]{2,}+|[A-Za-z]?+\d++|[:/._@-])++")
_ANNOTATION: Final = re.compile(r"[ \t]*=(?!=)")
_PROSE_WORDS: Final = frozenset({"pass", "pwd", "auth", "key", "token", "secret", "credentials", "bearer"})
_NAME_END: Final = re.compile(r"[\"'\s=:?]")
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")

# Tried where a secret-like word begins: the rest of the name, an optional closing quote, an operator, the value.
ASSIGNMENT: Final = re.compile(
    r"[A-Za-z0-9_.-]{3,46}"
    r"[\"']?[ \t]*(?:=|:=|:|=>|\?=)[ \t]*"
    r"(?P<v>\"[^\"\n]{1,400}\"|'[^'\n]{1,400}'|`[^`\n]{1,400}`|[^\s\"'`,;)}\]>]{1,400})"
)
CLI_FLAG: Final = re.compile(
    r"--(?P<n>password|passwd|pass|token|api-key|apikey|secret|client-secret|auth-token|access-token)[= ]"
    r"(?P<v>\"[^\"\n]{1,400}\"|'[^'\n]{1,400}'|[^\s\"'`]{1,400})"
)
URL_PASSWORD: Final = re.compile(r"://[^\s:/@\"'<>\[\]]{0,200}:(?P<v>[^\s@/\"'<>]{1,200})@(?=[A-Za-z0-9\[])")
# In prose: "the secret key is <value>", "token <value>" (a value that looks random, a word or two later).
NEAR_NAME: Final = re.compile(
    r"(?i:secret|token|password|passwd|key|credentials?)"
    r"(?:[ \t]+(?i:key|id|is|was|of|for|=|:|to|the|my|our|your|new|old)){0,3}[ \t]+"
    r"(?P<v>[A-Za-z0-9+/_.~-]{20,400}={0,2})(?![A-Za-z0-9+/_.~=-])"
)
AUTH_HEADER: Final = re.compile(
    r"(?i:authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:bearer|basic|token|digest)|bearer)[ \t]+"
    r"(?P<v>[A-Za-z0-9._~+/-]{8,}=*)"
)

# Placeholder words count only as whole words, so a random value that happens to contain one stays a secret.
_PLACEHOLDER: Final = re.compile(
    r"(?i)(?:^|[^a-z0-9])(?:your|example|sample|placeholder|redacted|dummy|changeme|change_me|replace|insert|"
    r"todo|xxx+)(?:$|[^a-z0-9])|\*\*\*|\.\.\.|^<.*>$|^\[.*\]$|^\{.*\}$|^\$|^%.*%$|\{\{|\$\{|"
    r"^(?:password|passwd|pass|secret|token|key|test|none|null|nil|true|false|undefined|required|optional|str|"
    r"string|int|bool|bytes|any|object|empty|hidden|masked|unset|default|fake|foo|bar|baz|abc|secret_key|"
    r"api_key|apikey|my_?password|my_?secret)$"
)
_REFERENCE: Final = re.compile(
    r"^(?:os\.|process\.|env\.|secrets\.|settings\.|config\.|self\.|this\.|vars\.|inputs\.|params\.|args\.|"
    r"request\.|ctx\.|context\.)|[()]|^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$|^[A-Z][A-Za-z]*\[|"
    r"^[a-z][a-z0-9+.-]*://|^-?\d+(?:\.\d+)?[a-z%]{0,3}$"
)


@dataclass(frozen=True)
class Found:
    """A value to replace: its span in the text and its kind."""

    start: int
    end: int
    kind: str


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def looks_random(value: str) -> bool:
    """A token's body: 16+ characters without spaces, at least two of lower/upper/digits, ~3 bits a
    character, and not made of words (`getUserProfile`, `user:42:profile`, `uploads/2026/IMG_1.JPG`),
    which a random string almost never is."""
    if len(value) < 16 or any(ch.isspace() for ch in value) or _MADE_OF_WORDS.fullmatch(value):
        return False
    classes = any(c.islower() for c in value) + any(c.isupper() for c in value) + any(c.isdigit() for c in value)
    return classes >= 2 and entropy(value) >= 3.0


def is_placeholder(value: str) -> bool:
    if value.startswith("[secret:") or len(set(value)) <= 2:
        return True
    if value.startswith(("/", "./", "../", "~/")) and not looks_random(value):
        return True  # a path (base64 may begin with a slash too)
    return bool(_PLACEHOLDER.search(value) or _REFERENCE.search(value))


@lru_cache(maxsize=4096)
def name_kind(name: str) -> str | None:
    """What a secret-like name holds (password, token, api-key, secret), or None for a name that only
    looks secret-like (max_tokens, tokenizer, author, public_key, token_url, key_id)."""
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words or words[-1] in METADATA_WORDS or HARMLESS_WORDS.intersection(words):
        return None
    if any(w in PASSWORD_WORDS or w.endswith(PASSWORD_ENDINGS) for w in words):
        return "password"
    if any(w.endswith(TOKEN_ENDINGS) for w in words):
        return "token" if any(w.endswith("token") for w in words) else "secret"
    if "key" in words:
        return "api-key"
    if SECRET_WORDS.intersection(words):
        return "secret"
    return None


def _value_span(m: re.Match[str]) -> tuple[int, int, str]:
    start, end = m.span("v")
    value = m.group("v")
    if len(value) >= 2 and value[0] in "\"'`" and value[-1] == value[0]:
        return start + 1, end - 1, value[1:-1]
    return start, end, value


def _name_before(text: str, start: int) -> str:
    """The whole name a match begins inside: `OPENAI_API_KEY` for a match that begins at `KEY`."""
    begin = start
    while begin > 0 and start - begin < 60 and text[begin - 1] in _NAME_CHARS:
        begin -= 1
    return text[begin:start]


def _worth_scrubbing(kind: str, value: str) -> bool:
    value = value.strip()
    if not value or is_placeholder(value):
        return False
    if kind == "password":
        return len(value) >= 4
    if kind == "secret" and len(value) >= 8 and not value.isalpha() and " " not in value:
        return True  # a secret may be chosen by a person (MyAppSecret2026), not only generated
    return looks_random(value)


def assignments(text: str, at: list[int]) -> list[Found]:
    found, end = [], 0
    for pos in at:
        m = ASSIGNMENT.match(text, pos) if pos >= end else None
        if m is None:
            continue
        end = m.end()
        name = _name_before(text, pos) + _NAME_END.split(m.group(), maxsplit=1)[0]
        kind = name_kind(name)
        if kind is None or _ANNOTATION.match(text, m.end()):  # `PASS_BYTES: Final = 64`: a type, not a value
            continue
        start, stop, value = _value_span(m)
        if name.lower() in _PROSE_WORDS and value.isalpha():
            continue  # "the maintenance pass: rescore", "a multi-batch pass: KEEP": prose, not a setting
        if _worth_scrubbing(kind, value):
            found.append(Found(start, stop, kind))
    return found


def cli_flags(text: str) -> list[Found]:
    found = []
    for m in CLI_FLAG.finditer(text):
        kind = "password" if m.group("n").startswith("pass") else "token"
        start, end, value = _value_span(m)
        if _worth_scrubbing(kind, value):
            found.append(Found(start, end, kind))
    return found


def url_passwords(text: str) -> list[Found]:
    return [
        Found(*m.span("v"), "url-password") for m in URL_PASSWORD.finditer(text) if not is_placeholder(m.group("v"))
    ]


def near_names(text: str, at: list[int]) -> list[Found]:
    found, end = [], 0
    for pos in at:
        m = NEAR_NAME.match(text, pos) if pos >= end else None
        if m is not None and looks_random(m.group("v")) and not is_placeholder(m.group("v")):
            found.append(Found(*m.span("v"), "secret"))
            end = m.end()
    return found


def auth_headers(text: str, at: list[int]) -> list[Found]:
    found = []
    for pos in at:
        m = AUTH_HEADER.match(text, pos)
        if m is None:
            continue
        value = m.group("v")
        bare = m.group(0)[:6].lower() == "bearer"  # without the header name: only a random-looking value
        if not is_placeholder(value) and (looks_random(value) or (not bare and len(value) >= 8)):
            found.append(Found(*m.span("v"), "authorization"))
    return found


# Where a secret-like word begins, in the lower-case text: the finders below try their pattern only there
# (a substring search per word is far cheaper than a case-insensitive pattern tried at every position).
KEYWORDS: Final = ("pass", "pwd", "secret", "token", "key", "auth", "cred", "bearer")
_NEAR: Final = ("secret", "token", "pass", "key", "cred")


def _keyword_hits(lower: str) -> list[tuple[int, str]]:
    hits = []
    for word in KEYWORDS:
        at = lower.find(word)
        while at != -1:
            hits.append((at, word))
            at = lower.find(word, at + 1)
    hits.sort()
    return hits


def find(text: str, lower: str) -> list[Found]:
    """Every credential known by where it stands. `lower`: `text` in lower case, of the same length."""
    found = url_passwords(text) if "://" in text else []
    if "--" in text:
        found += cli_flags(text)
    hits = [(p, k) for p, k in _keyword_hits(lower) if not text.startswith("[secret:", p - 1)]  # a placeholder
    if hits:
        found += auth_headers(text, [p for p, k in hits if k in ("auth", "bearer")])
        found += near_names(text, [p for p, k in hits if k in _NEAR])
        found += assignments(text, [p for p, _ in hits])
    return found
