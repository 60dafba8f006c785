"""A real PostgreSQL with pgvector for the tests: one throwaway cluster a run, a scratch database a test.

The cluster comes from THREADLOOM_TEST_POSTGRES_URL when set (a server of your own; the tests make and drop
databases in it), else from the `pgserver` wheel (PostgreSQL 16 with pgvector, started in a temporary folder;
as root it runs the server as a `pgserver` system user it creates, since postgres refuses to run as root).
When THREADLOOM_TEST_POSTGRES=required (CI) a cluster that cannot be had fails the tests; otherwise they skip
with the reason.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

TEMPLATE = "threadloom_template"
# Read once at import (conftest imports this module): the `home` fixture clears THREADLOOM_* for its test.
REQUIRED = os.environ.get("THREADLOOM_TEST_POSTGRES", "").lower() == "required"
GIVEN_URL = os.environ.get("THREADLOOM_TEST_POSTGRES_URL")
_names = itertools.count()


def _unavailable(reason: str) -> NoReturn:
    if REQUIRED:
        pytest.fail(f"THREADLOOM_TEST_POSTGRES=required but no PostgreSQL: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL for these tests ({reason}); set THREADLOOM_TEST_POSTGRES_URL or install pgserver")


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` (the path part replaced, the query kept)."""
    head, _, query = url.partition("?")
    scheme, _, rest = head.partition("://")
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{name}" + (f"?{query}" if query else "")


def cluster() -> Iterator[str]:
    """The admin URL of a running cluster with a migrated template database; stopped after the run."""
    given = GIVEN_URL
    folder: Path | None = None
    server: Any = None
    if given:
        url = given
    else:
        try:
            with warnings.catch_warnings():  # platformdirs warns once that XDG_RUNTIME_DIR is unset (as in CI)
                warnings.simplefilter("ignore")
                import pgserver
        except ImportError as exc:
            _unavailable(f"pgserver is not installed: {exc}")
        folder = Path(tempfile.mkdtemp(prefix="threadloom-pg-"))
        started = time.monotonic()
        # The server outlives the test that started it: it must not carry that test's THREADLOOM_HOME, or the
        # test's teardown (helpers.stop_everything: every process naming the home) kills it.
        kept = {k: os.environ.pop(k) for k in [k for k in os.environ if k.startswith("THREADLOOM_")]}
        try:
            server = pgserver.get_server(folder / "data", cleanup_mode="stop")
        except Exception as exc:
            shutil.rmtree(folder, ignore_errors=True)
            _unavailable(f"pgserver could not start a cluster: {exc}")
        finally:
            os.environ.update(kept)
        url = server.get_uri()
        # A throwaway cluster: durability buys nothing, and each CREATE/DROP DATABASE would wait on fsync.
        _admin(
            url,
            "ALTER SYSTEM SET fsync = off",
            "ALTER SYSTEM SET synchronous_commit = off",
            "ALTER SYSTEM SET full_page_writes = off",
            "SELECT pg_reload_conf()",
        )
        print(f"\n[postgres] pgserver cluster up in {time.monotonic() - started:.2f} s at {folder}")
    try:
        _make_template(url)
    except Exception as exc:
        _unavailable(f"cannot prepare a database at the test server: {exc}")
    try:
        yield url
    finally:
        if server is not None:
            server.cleanup()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _admin(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement.encode())


def _make_template(url: str) -> None:
    """A database migrated once, copied for every test (CREATE DATABASE ... TEMPLATE: tens of ms)."""
    from threadloom.store.postgres import open_postgres

    _admin(url, f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)", f"CREATE DATABASE {TEMPLATE}")
    open_postgres(with_database(url, TEMPLATE)).close()


def scratch_database(url: str, *, migrated: bool = True) -> Iterator[str]:
    """A new database for one test (a copy of the migrated template, or empty), dropped after it."""
    name = f"t_{os.getpid()}_{next(_names)}"
    template = f" TEMPLATE {TEMPLATE}" if migrated else " TEMPLATE template0"
    _admin(url, f"CREATE DATABASE {name}{template}")
    try:
        yield with_database(url, name)
    finally:
        _admin(url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def lock_waiter(url: str, statement: str = "") -> None:
    """Until one of the database's backends waits for a lock (a node's write, blocked by the test's own), running
    a statement that starts with `statement`."""
    import anyio
    import psycopg

    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
        "AND query LIKE %s"
    )
    with psycopg.connect(url, autocommit=True) as admin:
        with anyio.fail_after(60):
            while not (admin.execute(query, (statement + "%",)).fetchone() or (0,))[0]:
                await anyio.sleep(0.02)
