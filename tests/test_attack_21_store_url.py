"""A store URL that is wrong in the ways a hand types it: the error is clear and never shows the password
(issue 21's bad input, tried with `threadloom admin user list`: a URL with an unclosed IPv6 bracket ended
in a ValueError traceback quoting the whole URL, password and all)."""

from __future__ import annotations

import socket

import pytest

from threadloom.errors import StoreError
from threadloom.store.postgres import open_postgres, redact


def test_a_malformed_url_is_a_store_error_without_the_password() -> None:
    with pytest.raises(StoreError) as caught:
        open_postgres("postgresql://ana:hunter2@[::1/team")
    said = str(caught.value)
    assert "cannot open the PostgreSQL store at postgresql://ana:***@[::1/team" in said
    assert "hunter2" not in said


def test_a_password_given_as_a_parameter_is_hidden_too() -> None:
    assert redact("postgresql://ana@db.example/team?sslmode=require&password=hunter2") == (
        "postgresql://ana@db.example/team?sslmode=require&password=***"
    )
    assert redact("postgresql://ana:pw@/team?host=/run/pg") == "postgresql://ana:***@/team?host=/run/pg"
    assert redact("postgresql://db.example/team") == "postgresql://db.example/team"


def test_a_refused_connection_says_it_was_refused() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreError) as caught:
        open_postgres(f"postgresql://ana@127.0.0.1:{port}/team?password=hunter2")
    said = str(caught.value)
    assert "Connection refused" in said and "hunter2" not in said, said
