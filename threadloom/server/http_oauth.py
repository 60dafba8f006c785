"""The team server as an OAuth 2.1 protected resource (the MCP authorization spec): JWT access tokens from
one external issuer, checked here, never issued here.

References: MCP Authorization, https://modelcontextprotocol.io/specification/2025-06-18/basic/authorization
(a server publishes RFC 9728 protected-resource metadata and answers 401 with a WWW-Authenticate header
naming it; it MUST refuse a token not issued for itself: RFC 8707 resource indicators, the `aud` claim);
RFC 9728 section 3.1 (the metadata URL inserts /.well-known/oauth-protected-resource before the resource's
path) and section 5.1 (the `resource_metadata` parameter of the challenge); RFC 6750 section 3 (error codes).

A token's signature is checked with the issuer's JWKS (http_jwks.py: fetched, cached five minutes, fetched
again for a key id it does not hold at most every 30 s; an issuer down is a retryable 503), then `exp`/`nbf`
(30 s leeway), `iss` and `aud` (this server's resource URL). The account is the value of a configured claim
(`sub` by default), which must name an account. It implements the SDK's `TokenVerifier` protocol
(mcp.server.auth.provider), so it fits the SDK's own bearer middleware too; the threadloom gate calls `check`,
which says why a token was refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import jwt
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl

from threadloom.accounts.model import Unauthenticated
from threadloom.errors import ConfigError
from threadloom.server.http_jwks import IssuerKeys, IssuerUnavailable, fetch_json

ALGORITHMS: Final = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"]  # never "none", never HMAC
LEEWAY_S: Final = 30


@dataclass(frozen=True)
class OAuthConfig:
    issuer: str
    resource: str  # this server's public URL of /mcp: the audience every token must carry
    jwks_url: str | None = None  # else discovered from the issuer's metadata
    user_claim: str = "sub"

    def metadata(self) -> ProtectedResourceMetadata:
        return ProtectedResourceMetadata(
            resource=AnyHttpUrl(self.resource),
            authorization_servers=[AnyHttpUrl(self.issuer)],
            resource_name="threadloom",
        )

    def metadata_url(self) -> str:
        return str(build_resource_metadata_url(AnyHttpUrl(self.resource)))


class JwtVerifier:
    """Checks JWT access tokens of `config.issuer` for `config.resource`."""

    def __init__(self, config: OAuthConfig) -> None:
        self.config = config
        self._keys = IssuerKeys(lambda: config.jwks_url or discover_jwks(config.issuer))

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's TokenVerifier protocol: None for any refused token."""
        try:
            return await self.check(token)
        except (Unauthenticated, IssuerUnavailable):
            return None

    async def check(self, token: str) -> AccessToken:
        """The token's access, or Unauthenticated saying why (expired, another audience, bad signature...);
        IssuerUnavailable when the issuer's keys cannot be had now (retryable)."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"the access token is not valid: {exc}") from None
        key = await self._keys.key(header.get("kid"))
        claims = self._decode(token, key.key)
        user = claims.get(self.config.user_claim)
        if not isinstance(user, str) or not user:
            raise Unauthenticated(f"the access token has no {self.config.user_claim!r} claim naming an account")
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or user),
            scopes=str(claims.get("scope") or "").split(),
            expires_at=int(claims["exp"]),
            resource=self.config.resource,
            subject=user,
            claims={"iss": claims["iss"]},
        )

    def _decode(self, token: str, key: Any) -> dict[str, Any]:
        try:
            return jwt.decode(
                token,
                key,
                algorithms=ALGORITHMS,
                audience=self.config.resource,
                issuer=self.config.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("the access token has expired") from None
        except jwt.ImmatureSignatureError:
            raise Unauthenticated("the access token is not valid yet (nbf/iat in the future)") from None
        except jwt.InvalidAudienceError:
            raise Unauthenticated(f"the access token was not issued for this server ({self.config.resource})") from None
        except jwt.InvalidIssuerError:
            raise Unauthenticated(f"the access token was not issued by {self.config.issuer}") from None
        except jwt.MissingRequiredClaimError as exc:
            raise Unauthenticated(f"the access token lacks the {exc.claim!r} claim") from None
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"the access token is not valid: {exc}") from None


def discover_jwks(issuer: str) -> str:
    """`jwks_uri` from the issuer's RFC 8414 metadata, else its OpenID Connect discovery document
    (IssuerUnavailable when neither can be read or names one)."""
    base = issuer.rstrip("/")
    problems = []
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        try:
            found = fetch_json(base + path, "metadata")
        except IssuerUnavailable as exc:
            problems.append(exc.message)
            continue
        if isinstance(found.get("jwks_uri"), str) and found["jwks_uri"].startswith(("https://", "http://")):
            return str(found["jwks_uri"])
        problems.append(f"{base + path} names no http(s) jwks_uri")
    raise IssuerUnavailable(f"the issuer {issuer} publishes no jwks_uri (give --oauth-jwks): {'; '.join(problems)}")


def check_config(issuer: str | None, resource: str | None, jwks: str | None, claim: str) -> OAuthConfig | None:
    """The OAuth settings of `serve --http`, all or none."""
    if issuer is None:
        for given, name in ((jwks is not None, "--oauth-jwks"), (resource is not None, "--resource-url"),
                            (claim != "sub", "--oauth-user-claim")):  # fmt: skip
            if given:
                raise ConfigError(f"{name} needs --oauth-issuer")
        return None
    if resource is None:
        raise ConfigError("--oauth-issuer needs --resource-url: this server's public URL of /mcp, the tokens' audience")
    for name, value in (("--oauth-issuer", issuer), ("--resource-url", resource), ("--oauth-jwks", jwks)):
        if value is not None and not value.startswith(("https://", "http://")):
            raise ConfigError(f"{name} takes an http(s) URL, not {value!r}")
    if not claim.strip():
        raise ConfigError("--oauth-user-claim names a claim, such as sub, email or preferred_username")
    return OAuthConfig(issuer=issuer, resource=resource, jwks_url=jwks, user_claim=claim)
