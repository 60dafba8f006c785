"""A clumsy user at the command line: every refusal is one line on stderr and a non-zero exit, never a traceback,
and nothing it refused is written.

Each case was tried from outside first: a `--last` past 64 bits and an export folder that cannot be made were
tracebacks, a non-UTF-8 argument a traceback from the store, `forget --source bogus` said "would erase 0 rows"
and exited 0, `thread project --create ''` listed the projects and exited 0, `ingest --since garbage` with ingest
off exited 0 without a look at it, `serve --remote 'not a url'` asked for a token for it, a 100,000-character
memory id was echoed whole, a usage error was a five-line box, and a THREADLOOM_HOME that is a file, a link to
nothing or a folder that cannot be made was a traceback from whichever command touched it first.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import PY, cli, env_for, new_home, stop_everything

pytestmark = pytest.mark.slow

NOT_UTF8 = "é".encode() + b"\xed\xa0\x80\xff"
LONG = "x" * 100_000

# (arguments, words the one line says, exit code)
REFUSED: list[tuple[list[str | bytes], str, int]] = [
    (["watch", "--once", "--last", "99999999999999999999999"], "Invalid value for '--last'", 2),
    (["watch", "--once", "--last", "-5"], "greater than or equal to 0", 2),
    (["export", "--out", "/proc/threadloom-nope/out"], "cannot make the folder /proc/threadloom-nope/out", 2),
    (["forget", "--source", "bogus", "--yes"], "source: 'bogus' is not one of claude-code, claude, codex", 2),
    (["consolidate", "--sources", LONG], "is not a memory id", 2),
    (["memory", "store", NOT_UTF8], "argument 3 (b'\\xc3\\xa9\\xed\\xa0\\x80\\xff') is not UTF-8 text", 2),
    (["forget", "--text", NOT_UTF8, "--dry-run"], "is not UTF-8 text", 2),
    (["thread", "project", "--create", ""], "a project title is 1-200 characters", 2),
    (["serve", "--remote", "not a url"], "--remote takes the team server's URL", 2),
    (["serve", "--remote", "http://x:99999/mcp"], "--remote takes the team server's URL", 2),
    (["ingest", "--source", "bogus"], "unknown transcript source 'bogus'", 2),  # with ingest off (env_for)
    (["ingest", "--since", "garbage"], "--since 'garbage' is not a date", 2),
    (["memory", "delete", "bogus"], "'bogus' is not a memory id", 2),  # before asking about it
    (["memory", "core", "k", "--set", "x", "--remove"], "--set and --remove do not go together", 2),
    (["stats", "--days", "0"], "Invalid value for '--days'", 2),
    (["memory", "store"], "Missing argument 'content' (see ", 2),
    (["bogus"], "No such command 'bogus'", 2),
    (["memory", "delete", "m_0123456789abcdef"], "aborted: nothing was done", 1),  # no terminal to answer on
    (["backup", "create", "never.db", "--pg-bin", "/nowhere"], "--pg-bin goes with a PostgreSQL", 2),  # in repo/
]


def run(home: Path, args: list[str | bytes], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    argv = [PY.encode(), b"-m", b"threadloom", *(a if isinstance(a, bytes) else a.encode() for a in args)]
    return subprocess.run(argv, env=env_for(home), cwd=cwd, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def one_line(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert b"Traceback" not in done.stderr + done.stdout, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("threadloom: "), err
    return lines[0]


def contents(home: Path) -> dict[str, object]:
    """The home's files (but the daemon's and SQLite's own) and every table's row count, but the CLI session's
    own and the journal's (a refused call is journaled, as a tool's is: `stats` counts errors)."""
    skip = ("daemon.", "store.lock", "-wal", "-shm", "lock")
    files = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and not p.name.endswith(skip))
    files = [f for f in files if not any(f.startswith(s) or f.endswith(s) for s in skip)]
    with sqlite3.connect(f"file:{home / 'threadloom.db'}?mode=ro", uri=True) as db:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        kept = [t for t in tables if "fts" not in t and t not in ("sessions", "events")]
        counts = {t: db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in kept}
    return {"files": files, "rows": counts}


@pytest.fixture(scope="module")
def seeded() -> Iterator[Path]:
    home = new_home()
    repo = home / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert cli(home, "memory", "store", "retries back off exponentially").returncode == 0
    stop_everything(home)
    yield home


@pytest.mark.parametrize(("args", "said", "code"), REFUSED, ids=lambda v: repr(v)[:50] if isinstance(v, list) else "")
def test_a_refusal_is_one_line_a_non_zero_exit_and_writes_nothing(
    seeded: Path, args: list[str | bytes], said: str, code: int
) -> None:
    line, returncode = refused_in_a_copy(seeded, args)
    assert said in line and len(line) < 400, line
    assert returncode == code, line


def refused_in_a_copy(seeded: Path, args: list[str | bytes], env_line: str | None = None) -> tuple[str, int]:
    """The one line and exit code of `args` run in a copy of the seeded home (with `env_line` in its `.env`),
    which they must leave as it was."""
    home = new_home()
    shutil.copytree(seeded, home, dirs_exist_ok=True)
    if env_line is not None:
        (home / ".env").write_text(env_line + "\n")
    before = contents(home)
    try:
        done = run(home, args, home / "repo")
    finally:
        stop_everything(home)
    assert contents(home) == before
    return one_line(done), done.returncode


def homes(tmp: Path) -> dict[str, tuple[Path, str]]:
    """THREADLOOM_HOMEs that cannot be one, and what the line says of each."""
    (tmp / "a-file").write_text("not a folder\n")
    (tmp / "dangling").symlink_to(tmp / "missing")
    return {
        "a file": (tmp / "a-file", "is not a folder"),
        "under a file": (tmp / "a-file" / "home", f"cannot be made: {tmp / 'a-file'} is not a folder"),
        "a link to nothing": (tmp / "dangling", f"is a symbolic link to {tmp / 'missing'}, which does not exist"),
        "not makeable": (Path("/proc/1/threadloom-home"), "cannot make the"),
    }


COMMANDS = [["memory", "store", "x"], ["stats"], ["doctor"], ["http", "token"], ["serve"], ["check"], ["daemon", "run"]]
# `doctor` reports a home that cannot be made among its checks (below), as it reports everything else.
CASES = [(kind, args) for kind in ("a file", "under a file", "a link to nothing", "not makeable") for args in COMMANDS]


@pytest.mark.parametrize(("kind", "args"), [c for c in CASES if c != ("not makeable", ["doctor"])])
def test_a_home_that_cannot_be_one_is_refused_in_one_line(tmp_path: Path, kind: str, args: list[str]) -> None:
    home, said = homes(tmp_path)[kind]
    listed = sorted(os.listdir(tmp_path))
    done = run(home, list(args), tmp_path)
    line = one_line(done)
    assert said in line and done.returncode != 0, line
    assert sorted(os.listdir(tmp_path)) == listed  # nothing made beside it
    assert run(home, ["version"], tmp_path).returncode == 0  # what needs no home still runs


def test_doctor_says_a_home_cannot_be_made_rather_than_that_it_will_be(tmp_path: Path) -> None:
    home, _ = homes(tmp_path)["not makeable"]
    done = run(home, ["doctor"], tmp_path)
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    report = done.stdout.decode()
    assert f"{home} cannot be made: {home.parent} is not writable" in " ".join(report.split()), report


def test_a_target_named_twice_is_written_once(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    done = run(tmp_path / "home", ["init", "--target", "agents", "--target", "agents"], repo)
    assert done.returncode == 0 and done.stdout.decode().split() == ["created", "AGENTS.md"], done.stdout
    assert (repo / "AGENTS.md").read_text().count("threadloom") > 0


@pytest.mark.parametrize(
    ("line", "setting"),
    [("THREADLOOM_USER=al\0ice", "THREADLOOM_USER"), ("THREADLOOM_ORG=' shop'", "THREADLOOM_ORG"),
     ("THREADLOOM_AUTHOR=a\tb", "THREADLOOM_AUTHOR")],
    ids=["user with a NUL", "org with a space", "author with a tab"],
)  # fmt: skip
@pytest.mark.parametrize("args", [["stats"], ["memory", "store", "x"]], ids=" ".join)
def test_a_name_no_session_could_have_is_refused_by_every_command(
    seeded: Path, line: str, setting: str, args: list[str]
) -> None:
    """`stats` took a THREADLOOM_USER with a NUL in `.env` that `memory store` refused: the settings say it now."""
    said, returncode = refused_in_a_copy(seeded, list(args), line)
    assert f"{setting}: " in said and "1-100 printable characters" in said and returncode == 2, said
