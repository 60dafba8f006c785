"""The shape of a per-user access token and how it is checked.

A token is `tlk_<id>_<secret>`: `id` (12 hex digits) finds its row, `secret` is 32 random bytes. Only the
SHA-256 of the whole token is stored. A slow password hash (scrypt, argon2) protects guessable secrets; a
256-bit random one cannot be guessed, so a fast hash loses nothing, and it lets every request be checked
against the store (a revoked token fails at its next call) at the cost of a microsecond, not 50 ms. The
stored digest is compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Final

PREFIX: Final = "tlk_"
_SHAPE: Final = re.compile(r"^tlk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")


def make_token() -> tuple[str, str]:
    """(id, token): a new token and the id its row is stored under."""
    token_id = secrets.token_hex(6)
    return token_id, f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"


def token_id(token: str) -> str | None:
    """The id inside a token of the right shape, else None."""
    found = _SHAPE.match(token)
    return found[1] if found else None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def matches(token: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(token).encode("ascii"), stored_digest.encode("ascii"))


def looks_like_ours(token: str) -> bool:
    return token.startswith(PREFIX)
