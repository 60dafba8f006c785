"""`threadloom doctor`: is this installation healthy? Exit code 0 when it is."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from typing import Annotated

import apsw
import typer
from rich.markup import escape
from rich.table import Table

from threadloom.cli.app import out, settings
from threadloom.cli.check import MODEL_WAIT_S, search_lines
from threadloom.config import Settings
from threadloom.daemon import control
from threadloom.ingest import transcript_status
from threadloom.runtime import open_settings_store
from threadloom.search.embedders import LazyEmbedder, search_plan, search_report
from threadloom.status import versions
from threadloom.store.migrations import MIGRATIONS
from threadloom.store.sqlite import SqliteStore

MIN_FREE_BYTES = 200 * 1024 * 1024


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True


def _mode(path_mode: int) -> str:
    return oct(stat.S_IMODE(path_mode))


def check_home(s: Settings) -> list[Check]:
    home = s.home
    if not home.exists():
        ancestor = home.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not os.access(ancestor, os.W_OK | os.X_OK):
            return [Check("home", False, f"{home} cannot be made: {ancestor} is not writable")]
        return [Check("home", True, f"{home} will be created on first use")]
    mode = home.stat().st_mode
    return [Check("home permissions", not mode & 0o077, f"{home} is {_mode(mode)} (want 0o700)")]


def check_postgres(s: Settings) -> list[Check]:
    """A PostgreSQL store (THREADLOOM_STORE_URL): reachable, pgvector and its indexes sound, migrations known."""
    try:
        store = open_settings_store(s)  # refuses a newer schema, a server without pgvector, a bad URL
    except Exception as exc:  # noqa: BLE001 - any failure to open the store is the finding
        return [Check("store readable", False, str(exc))]
    try:
        problems = store.integrity_check()
        engine = ", ".join(f"{k} {v}" for k, v in store.engine().items())
        applied = store.schema_version()
    finally:
        store.close()
    return [
        Check("store", True, f"{store.location} ({engine})"),
        Check("store integrity", not problems, "ok" if not problems else "; ".join(problems[:3])),
        Check("migrations", True, f"{applied}/{len(MIGRATIONS)} applied"),
    ]


def check_store(s: Settings) -> list[Check]:
    if s.store_url is not None:
        return check_postgres(s)
    db = s.layout.database
    if not db.exists():
        return [Check("store", True, f"{db} will be created on first use")]
    checks = [Check("store permissions", not db.stat().st_mode & 0o077, f"{db} is {_mode(db.stat().st_mode)}")]
    store = SqliteStore(db, busy_timeout_ms=s.busy_timeout_ms)
    try:
        problems = store.integrity_check()
        checks.append(Check("store integrity", not problems, "ok" if not problems else "; ".join(problems[:3])))
        applied = {r["name"] for r in store.read(lambda r: r.rows("SELECT name FROM schema_migrations"))}
        journal = store.read(lambda r: r.scalar("PRAGMA journal_mode"))
    except Exception as exc:  # noqa: BLE001 - any failure to read the store is the finding
        return [*checks, Check("store readable", False, str(exc))]
    finally:
        store.close()
    known = [m.name for m in MIGRATIONS]
    unknown = sorted(applied - set(known))
    pending = [n for n in known if n not in applied]
    if unknown:
        checks.append(Check("migrations", False, f"store is from a newer threadloom: {', '.join(unknown)}"))
    else:
        detail = f"{len(applied)}/{len(known)} applied" + (f"; pending: {', '.join(pending)}" if pending else "")
        checks.append(Check("migrations", True, detail))
    checks.append(
        Check(
            "WAL mode",
            journal == "wal",
            f"journal_mode={journal}; recent writes live in {s.layout.database.name}-wal until checkpointed, "
            "so a plain cp of the file is not a backup: use `threadloom backup create`",
        )
    )
    return checks


def check_sqlite() -> list[Check]:
    conn = apsw.Connection(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        fts5 = True
    except apsw.Error:
        fts5 = False
    finally:
        conn.close()
    return [Check("FTS5", fts5, f"SQLite {apsw.sqlite_lib_version()}, apsw {apsw.apsw_version()}")]


def check_search(s: Settings) -> list[Check]:
    """Load the configured embedder here, as a server would, and measure what it costs.

    Full-text only by choice (THREADLOOM_EMBEDDER=none) is healthy; with `auto` and the model's packages
    missing it is a warning; an embedder asked for by name that does not load is a failure.
    """
    plan = search_plan(s)
    lazy = LazyEmbedder(s)
    if plan.mode == "hybrid":
        lazy.start()
        lazy.get(wait_s=MODEL_WAIT_S)
    report = search_report(s, lazy)
    first, why = search_lines(report)
    detail = f"{first}\n{why}"
    if lazy.started and lazy.loading:
        return [Check("search", False, f"the embedder did not load within {MODEL_WAIT_S:.0f} s; {why}", required=False)]
    if report["mode"] == "hybrid" or s.embedder == "none":
        return [Check("search", True, detail)]
    return [Check("search", False, detail, required=s.embedder in ("local", "openai"))]


def check_disk(s: Settings) -> list[Check]:
    target = s.home if s.home.exists() else s.home.parent
    free = shutil.disk_usage(target).free
    return [Check("free disk", free >= MIN_FREE_BYTES, f"{free / 2**30:.1f} GiB free at {target}")]


def check_transcripts(s: Settings) -> list[Check]:
    """The transcript alarms (a source whose files yield no message: its format may have changed)."""
    if not s.ingest:
        return [Check("transcripts", True, "ingest is off (THREADLOOM_INGEST=false)", required=False)]
    if s.store_url is None and not s.layout.database.exists():
        return [Check("transcripts", True, "none ingested yet", required=False)]
    try:
        store = (
            open_settings_store(s)
            if s.store_url is not None
            else SqliteStore(s.layout.database, busy_timeout_ms=s.busy_timeout_ms)
        )
    except Exception as exc:  # noqa: BLE001 - the store checks say why
        return [Check("transcripts", False, f"not readable: {exc}", required=False)]
    try:
        found = transcript_status(store, s.user)
    except Exception as exc:  # noqa: BLE001 - an older store without the tables: the store checks say why
        return [Check("transcripts", False, f"not readable: {exc}", required=False)]
    finally:
        store.close()
    if found["alarms"]:
        return [Check("transcripts", False, "\n".join(found["alarms"]), required=False)]
    held = ", ".join(f"{row['source']} {row['messages']:,}" for row in found["sources"]) or "none ingested yet"
    return [Check("transcripts", True, held, required=False)]


def check_daemon(s: Settings) -> list[Check]:
    reply = control.request(s.layout.socket, "status", timeout=2.0)
    if reply is None:
        return [Check("daemon", True, "not running (starts with the first session)", required=False)]
    return [
        Check(
            "daemon",
            True,
            f"pid {reply['pid']}, version {reply['version']}, {reply['open_connections']} connection(s)",
            required=False,
        )
    ]


def doctor(
    probe: Annotated[
        bool, typer.Option("--probe", help="Also run the self-test through the real tools in a scratch store.")
    ] = False,
) -> None:
    """Check the store, migrations, permissions, free disk, the daemon and search; print paths and versions.

    Search: loads the configured model here, as a server would (a few seconds), and says which search you
    have (hybrid with the local model or an endpoint, or full-text only, and why) and what the model costs.
    Exits 0 when healthy, 1 when a required check fails (an embedder named in THREADLOOM_EMBEDDER that does
    not load is one; full-text by default, when the model's packages are missing, is a warning). With --probe,
    a self-test in a scratch store (store and recall, amend, signal, thread context) whose failures are failures.
    """
    s = settings()
    checks = [*check_home(s), *check_store(s), *check_sqlite(), *check_disk(s), *check_daemon(s), *check_transcripts(s)]
    checks += check_search(s)
    if probe:  # recorded in the store, so `threadloom stats` shows reliability over time
        from threadloom.cli.stats import run_and_record

        ran = run_and_record(s, "doctor").outcomes
        checks += [Check(f"probe {o.category}", o.ok, f"{o.ms:.0f} ms" if o.ok else str(o.error)) for o in ran]
    table = Table("check", "", "detail")
    for c in checks:
        mark = "[green]ok[/green]" if c.ok else ("[red]FAIL[/red]" if c.required else "[yellow]-[/yellow]")
        table.add_row(c.name, mark, escape(c.detail))
    out.print(table)
    where = s.layout.database if s.store_url is None else "PostgreSQL (THREADLOOM_STORE_URL; see the store check)"
    out.print(f"home {s.home}\nstore {where}\nsocket {s.layout.socket}\nlog {s.layout.daemon_log}")
    if s.store_url is None:  # PostgreSQL's versions are in its store check
        out.print("versions " + ", ".join(f"{k} {v}" for k, v in versions(SqliteStore(s.layout.database)).items()))
    healthy = all(c.ok for c in checks if c.required)
    out.print("[green]healthy[/green]" if healthy else "[red]not healthy[/red]")
    raise typer.Exit(0 if healthy else 1)
