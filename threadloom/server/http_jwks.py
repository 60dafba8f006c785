"""The OAuth issuer's signing keys (its JWKS) for a team server: fetched by one request at a time, kept five
minutes, and never waited on twice in a row when the issuer is down.

An issuer that is down, slow or answers garbage is the server's problem, not the caller's: the request gets 503
with `{"error": ..., "retryable": true}` (`IssuerUnavailable`), within FETCH_TIMEOUT_S for the one request that
fetches; requests that arrive meanwhile wait for that same fetch without holding a thread (an async lock), and
for RETRY_AFTER_S after a failed fetch every request is told at once instead of trying again. Requests with
per-user `tlk_` tokens never wait on the issuer. A key id the fresh set does not hold is refused (401) without
a fetch, except once every REFETCH_EVERY_S (a rotated key): a stream of tokens with made-up key ids cannot
make the server hammer the issuer. Keys leave with the set: a key the issuer withdrew is refused at the next
fetch, at most JWKS_CACHE_S later (PyJWT's own client kept every key it had seen until the server restarted).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, Final

import anyio
import jwt

from threadloom.accounts.model import Unauthenticated
from threadloom.errors import ThreadloomError

JWKS_CACHE_S: Final = 300
FETCH_TIMEOUT_S: Final = 5  # the whole fetch, connect to last byte
RETRY_AFTER_S: Final = 5
REFETCH_EVERY_S: Final = 30
MAX_DOCUMENT_BYTES: Final = 1 << 20


class IssuerUnavailable(ThreadloomError):
    """The issuer's keys could not be had (unreachable, slow, not a key set): retry shortly."""

    retryable = True
    retry_after_s = RETRY_AFTER_S


class IssuerKeys:
    """The signing keys of one issuer; `url` finds its JWKS URL (given, or discovered) and runs in a thread."""

    def __init__(self, url: Callable[[], str], clock: Callable[[], float] = time.monotonic) -> None:
        self._find_url = url
        self._clock = clock
        self._url: str | None = None
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._failed: tuple[float, str] | None = None
        self._lock = anyio.Lock()

    async def key(self, kid: object) -> jwt.PyJWK:
        """The issuer's key `kid`: Unauthenticated when the issuer has no such key, IssuerUnavailable when its
        keys cannot be had now."""
        if not isinstance(kid, str) or not kid:
            raise Unauthenticated("the access token names no signing key (its header has no 'kid')")
        found = self._known(kid)
        if found is not None:
            return found
        async with self._lock:  # one fetch at a time; the rest wait here, holding no thread
            found = self._known(kid)
            if found is not None:
                return found
            now = self._clock()
            if self._failed is not None and now - self._failed[0] < RETRY_AFTER_S:
                raise IssuerUnavailable(self._failed[1])
            try:
                self._keys = await anyio.to_thread.run_sync(self._fetch)
            except IssuerUnavailable as exc:
                self._failed = (self._clock(), exc.message)
                raise
            self._fetched_at, self._failed = self._clock(), None
        if kid not in self._keys:
            raise Unauthenticated(f"the access token's signing key {kid[:80]!r} is not one of the issuer's")
        return self._keys[kid]

    def _known(self, kid: str) -> jwt.PyJWK | None:
        """The key from a fresh set; None when the set must be fetched (stale, or `kid` new and a refetch due)."""
        if self._fetched_at is None:
            return None
        age = self._clock() - self._fetched_at
        if age < JWKS_CACHE_S and kid in self._keys:
            return self._keys[kid]
        if age < REFETCH_EVERY_S:
            raise Unauthenticated(f"the access token's signing key {kid[:80]!r} is not one of the issuer's")
        return None

    def _fetch(self) -> dict[str, jwt.PyJWK]:
        if self._url is None:
            self._url = self._find_url()
        document = fetch_json(self._url, "signing keys (JWKS)")
        try:
            found = jwt.PyJWKSet.from_dict(document).keys
        except (jwt.PyJWTError, TypeError, ValueError, AttributeError) as exc:
            problem = f"the issuer's signing keys (JWKS) at {self._url} are not a usable JWK set ({exc})"
            raise IssuerUnavailable(problem) from None
        keys = {k.key_id: k for k in found if isinstance(k.key_id, str) and k.public_key_use in ("sig", None)}
        if not keys:
            raise IssuerUnavailable(f"the issuer's signing keys (JWKS) at {self._url} hold no signing key with an id")
        return keys


def fetch_json(url: str, what: str) -> dict[str, Any]:
    """The JSON object at `url`, within FETCH_TIMEOUT_S in all (a server that trickles bytes is cut off too);
    IssuerUnavailable saying why not. Redirects are not followed."""
    deadline = time.monotonic() + FETCH_TIMEOUT_S
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=FETCH_TIMEOUT_S) as resp:
            body = b""
            while len(body) <= MAX_DOCUMENT_BYTES:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no whole answer in {FETCH_TIMEOUT_S} s")
                chunk = resp.read1(65536)
                if not chunk:
                    break
                body += chunk
        if len(body) > MAX_DOCUMENT_BYTES:
            raise ValueError(f"over {MAX_DOCUMENT_BYTES:,} bytes")
        document = json.loads(body)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise IssuerUnavailable(f"the issuer's {what} at {url} answered HTTP {exc.code}; try again shortly") from None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # refused, timed out, cut short; not JSON
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        problem = f"the issuer's {what} at {url} could not be read ({reason}); try again shortly"
        raise IssuerUnavailable(problem) from None
    if not isinstance(document, dict):
        raise IssuerUnavailable(f"the issuer's {what} at {url} is not a JSON object")
    return document


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None
