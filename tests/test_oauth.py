"""The team server as an OAuth 2.1 protected resource (MCP authorization spec, RFC 9728, RFC 8707): JWT access
tokens of a local issuer run here, each checked for signature, expiry, issuer and audience (issue 21)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable

import jwt
import pytest

from tests.oauth_issuer import Issuer, new_key
from tests.team_server import Team, admin, call
from threadloom.errors import ConfigError
from threadloom.server.http_oauth import check_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def oauth_options() -> Callable[[str], tuple[str, ...]]:
    """`issued`'s server names accounts by the token's preferred_username."""
    return lambda issuer_url: ("--oauth-user-claim", "preferred_username")


def bearer(token: str, project: str = "shop") -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-Threadloom-Project": project}


def test_the_metadata_and_the_challenge_point_clients_to_the_issuer(issued: tuple[Team, Issuer]) -> None:
    team, issuer = issued
    metadata_url = f"http://127.0.0.1:{team.port}/.well-known/oauth-protected-resource/mcp"
    with urllib.request.urlopen(metadata_url, timeout=10) as resp:
        metadata = json.loads(resp.read())
    assert metadata["resource"] == team.url
    assert [s.rstrip("/") for s in metadata["authorization_servers"]] == [issuer.url]
    status, headers, _ = team.post({"X-Threadloom-Project": "shop"})
    assert status == 401 and headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'


async def test_a_token_of_the_issuer_for_this_server_acts_for_its_account(issued: tuple[Team, Issuer]) -> None:
    team, issuer = issued
    token = issuer.token(sub="u-1", preferred_username="bob", aud=team.url)
    assert team.post(bearer(token))[0] == 200
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers=bearer(token))
    async with http, Client(streamable_http_client(team.url, http_client=http), mode="legacy") as c:
        me = await call(c, "status", {})
    assert (me["session"]["user"], me["session"]["project"]) == ("bob", "shop")
    assert team.post(bearer(token, "garden"))[0] == 403  # a valid token still needs the organisation
    assert team.post(bearer(team.tokens["carol"], "garden"))[0] == 200  # threadloom's own tokens still work


def test_an_issuer_whose_metadata_names_no_jwks_asks_for_the_option(issued: tuple[Team, Issuer]) -> None:
    team, issuer = issued
    issuer.names_jwks = False
    status, _, body = team.post(bearer(issuer.token(sub="u-1", preferred_username="bob", aud=team.url)))
    answer = json.loads(body)
    assert (status, answer["retryable"]) == (503, True), body
    assert "publishes no jwks_uri (give --oauth-jwks)" in answer["error"] and issuer.jwks_hits == 0


def test_every_bad_token_is_refused_with_why(issued: tuple[Team, Issuer]) -> None:
    team, issuer = issued
    now = int(time.time())
    good = {"sub": "u-1", "preferred_username": "bob", "aud": team.url}
    hs256 = jwt.encode(
        good | {"iss": issuer.url, "exp": now + 600},
        "secret-of-32-bytes-or-more-here!!",
        algorithm="HS256",
        headers={"kid": issuer.kid},
    )
    unsigned = jwt.encode(
        good | {"iss": issuer.url, "exp": now + 600}, None, algorithm="none", headers={"kid": issuer.kid}
    )
    for token, words in (
        (issuer.token(**good | {"aud": "http://127.0.0.1:1/mcp"}), "not issued for this server"),
        (issuer.token(**good | {"aud": [f"{team.url}/other"]}), "not issued for this server"),
        (issuer.token(**good | {"aud": None}), "lacks the 'aud' claim"),
        (issuer.token(**good | {"exp": now - 3600}), "has expired"),
        (issuer.token(**good | {"nbf": now + 3600}), "not valid yet"),
        (issuer.token(**good | {"iss": "http://127.0.0.1:2"}), f"not issued by {issuer.url}"),
        (issuer.token(new_key(), **good), "not valid"),  # signed by another key under the issuer's key id
        (issuer.token(**good | {"preferred_username": None}), "no 'preferred_username' claim"),
        (issuer.token(**good | {"preferred_username": "mallory"}), "'mallory' is no account here"),
        (hs256, "alg value is not allowed"),  # the public key as an HMAC secret: refused by algorithm
        (unsigned, "alg value is not allowed"),
        (issuer.token(**good) + "x", "not valid"),
        ("not.a.jwt", "not valid"),
    ):
        status, headers, body = team.post(bearer(token))
        said = json.loads(body)["error"]
        assert status == 401 and words in said, (words, status, said)
        assert (
            'error="invalid_token"' in headers["www-authenticate"]
            and "resource_metadata=" in headers["www-authenticate"]
        )


def test_a_removed_account_loses_its_oauth_access(issued: tuple[Team, Issuer]) -> None:
    team, issuer = issued
    token = issuer.token(sub="u-3", preferred_username="carol", aud=team.url)
    assert team.post(bearer(token, "garden"))[0] == 200
    admin(team.home, "org", "member", "add", "globex", "alice", "--role", "owner")
    admin(team.home, "user", "remove", "carol")
    status, _, body = team.post(bearer(token, "garden"))
    assert status == 401 and "'carol' is no account here" in json.loads(body)["error"]


def test_oauth_settings_are_all_or_nothing() -> None:
    assert check_config(None, None, None, "sub") is None
    for args, words in (
        ((None, None, "http://x/jwks", "sub"), "needs --oauth-issuer"),
        (("http://issuer", None, None, "sub"), "needs --resource-url"),
        (("issuer.example", "http://r/mcp", None, "sub"), r"http\(s\) URL"),
        (("http://issuer", "http://r/mcp", None, " "), "names a claim"),
    ):
        with pytest.raises(ConfigError, match=words):
            check_config(*args)
