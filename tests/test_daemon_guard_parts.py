"""The guard's parts, each against the real thing: leases held by real processes (alive, killed, a pid reused,
another machine's), the log rotated under a real process writing to it, its settings refused when they would
hurt, and the rule that the daemon's own modules signal no process at all."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.sqlite_template import fresh_store
from threadloom.clock import now_ms
from threadloom.config import Settings
from threadloom.store import jobs
from threadloom.store.sqlite import SqliteStore, open_store

PACKAGE = Path(__file__).parent.parent / "threadloom"
HOLDER = "from threadloom.store import jobs; print(jobs.holder_id(), flush=True); import sys; sys.stdin.read()"
TTL = 120_000


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    return open_store(fresh_store(tmp_path / "threadloom.db"))


def holder_process() -> tuple[subprocess.Popen[str], str]:
    """Another process and the lease holder name it makes for itself; it runs until its stdin closes."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def end(proc: subprocess.Popen[str], *, kill: bool = False) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    if kill:
        os.kill(proc.pid, signal.SIGKILL)
    proc.stdin.close()
    proc.wait()
    proc.stdout.close()


def take(store: SqliteStore, holder: str) -> bool:
    return store.write(lambda w: jobs.acquire(w, "job", holder, now_ms(), TTL))


def test_a_live_holder_keeps_its_lease_and_a_killed_one_loses_it_at_once(store: SqliteStore) -> None:
    proc, theirs = holder_process()
    try:
        assert take(store, theirs)
        assert not take(store, jobs.holder_id())  # alive and unexpired: ours must wait
    finally:
        end(proc, kill=True)
    assert jobs.holder_gone(theirs)
    assert take(store, jobs.holder_id())  # killed with -9: free long before its expiry


def test_a_recycled_pid_does_not_keep_a_dead_holders_lease(store: SqliteStore) -> None:
    """A pid now naming another process (same number, another start time) is not the holder."""
    pid, start, rest = jobs.holder_id().split(".", 2)
    dead = f"{pid}.{int(start) - 1}.{rest}"
    assert take(store, dead)
    assert take(store, jobs.holder_id())


def test_a_lease_of_this_process_before_it_execd_itself_is_free(store: SqliteStore) -> None:
    """The guard's restart execs a fresh daemon in the same process: same pid, same start time, another
    program image. What the old image held is free; what this image holds is not."""
    pid, start, rest = jobs.holder_id().split(".", 2)
    _, _, machine = rest.partition("@")
    before = f"{pid}.{start}.000000@{machine}"
    assert jobs.holder_gone(before) and not jobs.holder_gone(jobs.holder_id())
    mine = jobs.holder_id()
    assert take(store, before)
    assert take(store, mine)
    assert not take(store, jobs.holder_id())  # another holder of this same image: alive


@pytest.mark.parametrize(
    "holder",
    [
        "12345:0a1b2c3d",  # the old form: no start time, never judged
        "daemon:1",
        f"1.1@{'0' * 8}:abcd",  # another machine (or pid namespace): its pids are not ours to look up
        "",
        "x.y@z:w",
    ],
)
def test_a_holder_it_cannot_judge_keeps_its_lease_until_expiry(store: SqliteStore, holder: str) -> None:
    sql = "INSERT INTO job_leases (name, holder, expires_at) VALUES ('job', :h, :e)"
    store.write(lambda w: w.execute(sql, {"h": holder, "e": now_ms() + TTL}))
    assert not jobs.holder_gone(holder)
    assert not take(store, jobs.holder_id())


ROTATING = """
import os, sys
from pathlib import Path
from threadloom.daemon import logs
path, keep = Path(sys.argv[1]), int(sys.argv[2])
for n in range(40):
    os.write(2, (f"line {n} " + "x" * 200 + "\\n").encode())
    logs.rotate_if_due(path, 1024, keep)
os.write(2, b"last line\\n")
"""


def test_rotation_keeps_n_files_and_the_writer_follows(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    with open(log, "ab") as fh:
        subprocess.run([sys.executable, "-c", ROTATING, str(log), "3"], stderr=fh, check=True, timeout=60)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("daemon.log")) == [
        "daemon.log",
        "daemon.log.1",
        "daemon.log.2",
        "daemon.log.3",
    ]
    assert log.read_text().endswith("last line\n")  # the writer's descriptors moved to the new file
    newest, oldest = log.with_name("daemon.log.1").read_text(), log.with_name("daemon.log.3").read_text()
    first = lambda text: int(text.split()[1])  # noqa: E731
    assert first(oldest) < first(newest)
    assert all(p.stat().st_size < 2048 for p in tmp_path.iterdir() if p.name.startswith("daemon.log."))


def test_rotation_leaves_a_log_it_does_not_write_alone(tmp_path: Path) -> None:
    """A process whose stderr is not the log (a daemon run by hand, a retiring one whose file was renamed)
    renames nothing."""
    from threadloom.daemon import logs

    log = tmp_path / "daemon.log"
    log.write_text("x" * 4096)
    assert not logs.rotate_if_due(log, 1024, 2)
    assert [p.name for p in tmp_path.iterdir()] == ["daemon.log"]


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("daemon_memory_mb", 5, "under 32 MB"),
        ("daemon_memory_mb", -1, "greater than or equal to 0"),
        ("daemon_client_stall_s", 0, "greater than or equal to 1"),
        ("daemon_log_max_kb", 1, "greater than or equal to 16"),
        ("daemon_log_keep", 0, "greater than or equal to 1"),
        ("daemon_log_keep", "many", "valid integer"),
    ],
)
def test_guard_settings_that_would_hurt_are_refused(field: str, value: object, why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        Settings(**{field: value})  # type: ignore[arg-type]
    assert Settings(daemon_memory_mb=0).daemon_memory_mb == 0  # the cap off


SIGNALLING = {"kill", "killpg", "pidfd_send_signal", "send_signal", "terminate", "pthread_kill"}


@pytest.mark.parametrize("name", ["guard.py", "logs.py", "outbound.py", "process.py", "control.py"])
def test_the_daemon_signals_no_process(name: str) -> None:
    """The daemon's guard, log, sessions and process code never send a signal: the only process the guard
    acts on is its own, by exec. (`control.py` asks with signal 0 whether a pid runs, which sends nothing.)"""
    tree = ast.parse((PACKAGE / "daemon" / name).read_text())
    calls = [n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    sent = [c for c in calls if c in SIGNALLING]
    if name == "control.py":
        assert "os.kill(pid, 0)" in (PACKAGE / "daemon" / name).read_text() and sent == ["kill"]
    else:
        assert sent == []


def test_a_broken_or_forged_restart_record_holds_no_restart_back(tmp_path: Path) -> None:
    from threadloom.daemon import guard

    path = guard.restarts_file(tmp_path)
    for text in ("{not json", "[]", '{"restarts": "many"}', '{"restarts": [{"at": "soon"}, 5]}'):
        path.write_text(text)
        assert guard.read_restarts(tmp_path) == []
    future = now_ms() + 10**9
    path.write_text(json.dumps({"restarts": [{"at": future}] * 5 + [{"at": now_ms() - 1, "rss_mb": 90}]}))
    assert [r["rss_mb"] for r in guard.read_restarts(tmp_path)] == [90]


BEFORE_EXEC = """
import json, os, subprocess, sys
from threadloom.coordination import processes
child = subprocess.Popen([sys.executable, "-c", "pass"])
children = [[child.pid, processes.start_time(child.pid)], [int(sys.argv[1]), int(sys.argv[2])]]
os.execv(sys.executable, [sys.executable, "-c", sys.argv[3], json.dumps(children)])
"""
AFTER_EXEC = """
import json, os, sys, time
from threadloom.coordination import processes
from threadloom.daemon.guard import reap_inherited
children = [tuple(c) for c in json.loads(sys.argv[1])]
child = children[0][0]
while (proc := processes.read(child)) is not None and proc.live:
    time.sleep(0.01)
assert proc is not None and proc.state == "Z", "the exited child is ours to reap"
assert reap_inherited([(child, children[0][1] + 1)]) == [] and processes.read(child) is not None  # not it
print(json.dumps({"left": reap_inherited(children), "zombie": processes.read(child) is not None}))
"""


@pytest.mark.slow  # real processes, one of them exec'd
def test_children_of_the_image_before_an_exec_are_reaped_and_nothing_else_is_touched() -> None:
    """The guard's restart execs a fresh daemon: the supervisors the old image started are still this
    process's children, and are reaped once they exit; a process named in the list that is not this one's
    child (a bystander) is dropped from it, untouched."""
    bystander = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        from threadloom.coordination import processes

        start = processes.start_time(bystander.pid)
        done = subprocess.run(
            [sys.executable, "-c", BEFORE_EXEC, str(bystander.pid), str(start), AFTER_EXEC],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        assert json.loads(done.stdout) == {"left": [], "zombie": False}
        assert processes.running(bystander.pid, start)
    finally:
        assert bystander.stdin is not None
        bystander.stdin.close()
        bystander.wait()
