"""A team server attacked from outside (issue 21, a clumsy and a hostile client): its OAuth issuer down, silent
or answering garbage, a token whose account name no account could have, and requests HTTP itself refuses.

Each must get `{error, retryable}` with a fitting status, promptly, and hold up no other user: an issuer that
answered HTML gave a bare "Internal Server Error" page, one that was down a 401 saying the token was bad (not
retryable), and a silent one made every OAuth request wait for its own 10 s fetch in turn, each holding a
thread (three were answered after 10, 20 and 30 s; 50 would take minutes, and the threads every other request
needs). A 1 MB header got a reset
connection, a NUL in a header uvicorn's plain-text 400. And a key the issuer withdrew (rotated out,
compromised) stayed trusted until the server restarted: PyJWT's client cached each key it had seen for good.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

import pytest

from tests.helpers import wait_for
from tests.http_server import INIT, free_port
from tests.oauth_issuer import Issuer, local_issuer
from tests.team_server import Team
from threadloom.accounts.model import Unauthenticated
from threadloom.server.http_jwks import JWKS_CACHE_S, REFETCH_EVERY_S, IssuerKeys

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def oauth_options() -> Callable[[str], tuple[str, ...]]:
    """`issued`'s server fetches the issuer's keys from the JWKS URL it is given."""
    return lambda issuer_url: ("--oauth-jwks", f"{issuer_url}/jwks.json")


def bearer(token: str, project: str = "shop") -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-Threadloom-Project": project}


def said(body: str) -> tuple[str, object]:
    answer = json.loads(body)
    return answer["error"], answer["retryable"]


def until(team: Team, token: str, words: str) -> tuple[int, dict[str, str], str]:
    """Ask until the answer holds `words` (a failed fetch is not tried again for a few seconds)."""
    deadline = time.monotonic() + 60
    while True:
        status, headers, body = team.post(bearer(token))
        if words in body or time.monotonic() > deadline:
            return status, headers, body
        time.sleep(0.5)


def test_an_issuer_answering_garbage_or_an_error_is_a_retryable_503_not_a_bad_token(
    issued: tuple[Team, Issuer],
) -> None:
    team, issuer = issued
    token = issuer.token(sub="bob", aud=team.url)
    for answer, words in (
        ("html", "could not be read"),
        ("list", "is not a JSON object"),
        ("nokeys", "not a usable JWK set"),
        ("error", "answered HTTP 500"),
    ):
        issuer.jwks = answer
        status, headers, body = until(team, token, words)
        message, retryable = said(body)
        assert (status, retryable) == (503, True) and words in message, (answer, status, body)
        assert "issuer's signing keys (JWKS)" in message and headers["retry-after"].isdigit()
    issuer.jwks = "ok"
    status, _, body = until(team, token, "result")
    assert status == 200, body


def test_the_jwks_url_given_serves_an_issuer_whose_metadata_names_none(issued: tuple[Team, Issuer]) -> None:
    team, issuer = issued
    issuer.names_jwks = False
    status, _, body = team.post(bearer(issuer.token(sub="bob", aud=team.url)))
    assert status == 200 and issuer.jwks_hits == 1, body


def test_a_silent_issuer_fails_the_waiting_requests_after_one_fetch_and_holds_up_no_other_user(
    issued: tuple[Team, Issuer],
) -> None:
    team, issuer = issued
    issuer.jwks = "slow"  # takes the request and never answers (until released)
    token = issuer.token(sub="bob", aud=team.url)
    answers: list[tuple[int, dict[str, str], str]] = []
    waiting = [threading.Thread(target=lambda: answers.append(team.post(bearer(token)))) for _ in range(50)]
    for thread in waiting:
        thread.start()
    wait_for(lambda: issuer.jwks_hits, what="the server's fetch of the issuer's keys")
    status, _, body = team.post(team.headers("alice", "shop"))  # a per-user token, while 50 OAuth requests wait
    assert status == 200 and not answers, (status, body, len(answers))
    for thread in waiting:
        thread.join(timeout=120)
    assert len(answers) == 50 and issuer.jwks_hits == 1  # one fetch answered them all, none waited for its own
    for status, _, body in answers:
        message, retryable = said(body)
        assert (status, retryable) == (503, True) and "could not be read (timed out" in message, body
    issuer.release.set()
    issuer.jwks = "ok"
    status, _, body = until(team, token, "result")
    assert status == 200, body


def test_an_account_name_no_account_could_have_is_refused_as_one(issued: tuple[Team, Issuer]) -> None:
    team, issuer = issued
    for name in ("bo\ud800b", "b" * 5000, "bob\n"):
        status, _, body = team.post(bearer(issuer.token(sub=name, aud=team.url)))
        message, retryable = said(body)
        assert (status, retryable) == (401, False) and "is no account here" in message, (name[:20], body)
    assert team.post(bearer(issuer.token(sub="bob", aud=team.url)))[0] == 200


def raw_request(port: int, headers: bytes) -> tuple[int, bytes]:
    """Send a whole request (however long) before reading, as urllib and curl do; the status and the body."""
    body = json.dumps(INIT).encode()
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n" % port
    head += b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n" % len(body)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(head + headers + b"\r\n" + body)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines)
    assert int(headers["content-length"]) == len(body), head  # readable before the connection closes
    return int(status_line.split()[1]), body


def test_requests_http_itself_refuses_are_answered_in_json(issued: tuple[Team, Issuer]) -> None:
    team, _ = issued
    project = b"X-Threadloom-Project: shop\r\n"
    bob = b"Authorization: Bearer " + team.tokens["bob"].encode() + b"\r\n"
    for headers, status_wanted, words in (
        (b"Authorization: Bearer " + b"a" * 1_000_000 + b"\r\n" + project, 431, "headers are over 16,384 bytes"),
        (bob + b"X-Threadloom-Project: sh\x00op\r\n", 400, "NUL"),
        (b"Authorization: Bearer tlk\x00" + b"\r\n" + project, 400, "malformed HTTP request"),
    ):
        status, body = raw_request(team.port, headers)
        message, retryable = said(body.decode())
        assert (status, retryable) == (status_wanted, False) and words in message, (status, body[:200])
    assert team.post(team.headers("bob", "shop"))[0] == 200


@pytest.mark.anyio
async def test_made_up_key_ids_cost_the_issuer_nothing_and_a_withdrawn_key_goes_with_the_next_fetch() -> None:
    now = [0.0]
    with local_issuer(free_port()) as issuer:
        keys = IssuerKeys(lambda: f"{issuer.url}/jwks.json", clock=lambda: now[0])
        assert (await keys.key("k1")).key_id == "k1" and issuer.jwks_hits == 1
        for made_up in ("k9", "x" * 500, "k1 "):
            with pytest.raises(Unauthenticated, match="is not one of the issuer's"):
                await keys.key(made_up)
        assert issuer.jwks_hits == 1  # a fresh set is asked, not the issuer
        issuer.jwks = "rotated"
        now[0] = REFETCH_EVERY_S + 1
        assert (await keys.key("k2")).key_id == "k2" and issuer.jwks_hits == 2  # a new key id: fetched once
        with pytest.raises(Unauthenticated, match="'k1' is not one of the issuer's"):
            await keys.key("k1")  # withdrawn by the issuer, refused from that fetch on
        now[0] += JWKS_CACHE_S
        assert (await keys.key("k2")).key_id == "k2" and issuer.jwks_hits == 3  # a stale set is fetched again
