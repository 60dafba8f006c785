"""`threadloom serve` refuses options that do nothing where they were given, rather than ignoring them.

`serve --accounts` without --http ran the stdio bridge, serving the home's user with no accounts at all;
`--resource-url` without --oauth-issuer started a server that took no OAuth tokens; `--remote` beside --http
served stdio and dropped the HTTP server. Each now stops with exit code 2 and says what goes with what.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli

URL = "http://x/mcp"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--accounts"], "--accounts goes with --http"),
        (["--oauth-issuer", "http://127.0.0.1:9/", "--resource-url", URL], "--oauth-issuer goes with --http"),
        (["--in-process", "--accounts"], "--accounts goes with --http"),
        (["--http", "127.0.0.1:0", "--accounts", "--resource-url", URL], "--resource-url needs --oauth-issuer"),
        (["--http", "127.0.0.1:0", "--oauth-user-claim", "email"], "--oauth-user-claim needs --oauth-issuer"),
        (["--remote", "http://127.0.0.1:9/mcp", "--http", "127.0.0.1:0"], "--remote serves stdio: drop --http"),
        (["--remote", "http://127.0.0.1:9/mcp", "--in-process"], "--remote serves stdio: drop --in-process"),
    ],
)
def test_serve_refuses_an_option_that_would_do_nothing_there(home: Path, args: list[str], words: str) -> None:
    done = cli(home, "serve", *args, timeout=30)
    assert done.returncode == 2 and words in done.stderr, (done.returncode, done.stderr)
