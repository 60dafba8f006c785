"""Half-sent requests cannot take the HTTP server away from its real clients, nor fill its log.

Loopback only, bounded counts, and every socket is closed by the test itself. The server runs
under a 1,024 open-file limit so that 1,500 half-sent requests are more than it could ever hold.
"""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import pytest

from tests.http_server import Served, git_repo, serve_http

FLOOD = 1500
SERVER_OPEN_FILES = 1024
HALF_A_REQUEST = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@contextmanager
def half_sent_requests(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that each send the start of a request and then nothing; closed on exit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = count + 256
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"needs {needed} open files, the limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))
    with ExitStack() as stack:
        opened: list[socket.socket] = []
        for _ in range(count):
            s = stack.enter_context(socket.socket())
            s.settimeout(2)
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(HALF_A_REQUEST)
            except OSError:
                continue  # the server may already be shedding them; that is the point
            opened.append(s)
        try:
            yield opened
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def served_within(served: Served, seconds: float) -> float:
    started = time.monotonic()
    status, _ = served.post(timeout=seconds)
    assert status == 200
    return time.monotonic() - started


@pytest.mark.slow
def test_a_flood_of_half_sent_requests_leaves_real_clients_served_and_the_log_small(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    with serve_http(home, repo, open_files=SERVER_OPEN_FILES) as served:
        served_within(served, 5)
        logged = served.log.stat().st_size
        with half_sent_requests(served.port, FLOOD):
            assert served_within(served, 5) < 5
            time.sleep(1)  # what the server logs while the flood is held open
            assert served_within(served, 5) < 5
        assert served_within(served, 5) < 5
        growth = served.log.stat().st_size - logged
    assert growth < 4096, served.log.read_text()[-2000:]


def test_a_request_whose_headers_never_finish_is_closed(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    with serve_http(home, repo, THREADLOOM_HTTP_HEADER_TIMEOUT="1") as served, socket.socket() as slow:
        slow.settimeout(10)
        slow.connect(("127.0.0.1", served.port))
        started = time.monotonic()
        for piece in (b"POST /mcp HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n", b"X-Slow: 1\r\n"):
            slow.sendall(piece)
            time.sleep(0.3)  # a byte now and then must not keep the connection
        with suppress(ConnectionResetError):
            assert slow.recv(1024) == b""
        assert time.monotonic() - started < 5
        assert served.post()[0] == 200
