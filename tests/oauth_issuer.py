"""A local OAuth issuer for the tests: RSA keys made here, its metadata and JWKS served over HTTP, tokens signed."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class Issuer:
    url: str
    key: rsa.RSAPrivateKey
    kid: str = "k1"
    # How /jwks.json answers: "ok"; "slow" (holds the request until `release` is set); "html" (not JSON);
    # "list" (JSON, not an object); "nokeys" ({"keys": []}); "error" (HTTP 500); "rotated" (another key, "k2",
    # and no longer "k1"). `jwks_hits` counts requests.
    jwks: str = "ok"
    jwks_hits: int = 0
    names_jwks: bool = True  # whether its metadata names its JWKS (`jwks_uri`); a server must then be given it
    release: threading.Event = field(default_factory=threading.Event)

    def token(self, key: rsa.RSAPrivateKey | None = None, **claims: Any) -> str:
        """A signed access token: defaults for iss, iat and exp (an hour), any claim overridden or dropped (None)."""
        now = int(time.time())
        body = {"iss": self.url, "iat": now, "exp": now + 3600, **claims}
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": self.kid})


@contextmanager
def local_issuer(port: int) -> Iterator[Issuer]:
    """Serves /.well-known/oauth-authorization-server (RFC 8414) and /jwks.json on 127.0.0.1:`port`."""
    url = f"http://127.0.0.1:{port}"
    issuer = Issuer(url, new_key())
    jwk = json.loads(RSAAlgorithm.to_jwk(issuer.key.public_key())) | {"kid": issuer.kid, "use": "sig", "alg": "RS256"}
    rotated = json.loads(RSAAlgorithm.to_jwk(new_key().public_key())) | {"kid": "k2", "use": "sig", "alg": "RS256"}
    documents = {
        "/.well-known/oauth-authorization-server": {"issuer": url, "jwks_uri": f"{url}/jwks.json"},
        "/jwks.json": {"keys": [jwk]},
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = documents.get(self.path)
            if found is not None and "jwks_uri" in found and not issuer.names_jwks:
                found = {k: v for k, v in found.items() if k != "jwks_uri"}
            body = json.dumps(found).encode() if found is not None else b"{}"
            status = 200 if found is not None else 404
            if self.path == "/jwks.json":
                issuer.jwks_hits += 1
                if issuer.jwks == "slow":
                    issuer.release.wait(120)
                body = {
                    "html": b"<html>maintenance</html>",
                    "list": b"[]",
                    "nokeys": b'{"keys": []}',
                    "rotated": json.dumps({"keys": [rotated]}).encode(),
                }.get(issuer.jwks, body)
                status = 500 if issuer.jwks == "error" else status
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        issuer.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
