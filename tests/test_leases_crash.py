"""A background pass killed with -9 mid-way (a real process, after its lease was committed and before the pass
ended) leaves a lease the next pass takes at once, long before its expiry, and that pass then completes: one
test per loop family that names its holder by `jobs.holder_id()` (style, learning curator and extractor,
user-model miner, memory maintenance; ingest and the hygiene passes have theirs beside them).

Run as a script, this file is the pass that gets killed: `python tests/test_leases_crash.py FAMILY HOME`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from tests.test_style_gate import add_message  # noqa: E402
from threadloom.clock import now_ms  # noqa: E402
from threadloom.config import Settings  # noqa: E402
from threadloom.learning.curator import Curator, job_name  # noqa: E402
from threadloom.learning.harvest import JOB as EXTRACT  # noqa: E402
from threadloom.learning.harvest import Extractor  # noqa: E402
from threadloom.learning.library import Library  # noqa: E402
from threadloom.memory.maintenance import JOB as MAINTENANCE  # noqa: E402
from threadloom.memory.maintenance import Maintenance  # noqa: E402
from threadloom.memory.scoring import ScoringConfig  # noqa: E402
from threadloom.runtime import Runtime, open_runtime  # noqa: E402
from threadloom.store import jobs  # noqa: E402
from threadloom.style import Learner  # noqa: E402
from threadloom.style.learn import JOB as STYLE  # noqa: E402
from threadloom.usermodel.miner import Miner  # noqa: E402

USER = "ana"


def open_home(home: Path) -> Runtime:
    return open_runtime(Settings(home=home, embedder="none"), "cli")


def a_pass(rt: Runtime, family: str) -> Callable[[], dict[str, Any]]:
    """The family's real pass over the home's store: what it reports, and the job name its lease goes by."""
    if family == "style":

        def style() -> dict[str, Any]:
            report = Learner(rt.store).run(jobs.holder_id())
            return report.as_dict() | {"busy": report.busy}

        return style
    if family == "curator":
        library = Library(rt, client_home=rt.settings.layout.home.parent / "user")
        return lambda: Curator(library, rt.settings.layout.home / "curator").run(USER)
    if family == "extract":

        def extract() -> dict[str, Any]:
            report = Extractor(rt.store).run()
            return {"busy": report.busy, "messages": report.messages}

        return extract
    if family == "miner":
        return lambda: {"busy": Miner(rt.store, USER).run().busy}
    if family == "maintenance":
        return lambda: {"busy": not Maintenance(rt.store, ScoringConfig()).run().ran}
    raise SystemExit(f"no family {family}")


JOBS = {
    "style": STYLE,
    "curator": job_name(USER),
    "extract": EXTRACT,
    "miner": f"usermodel.mine:{USER}",
    "maintenance": MAINTENANCE,
}


def pause_once_leased() -> None:
    """In the pass to be killed: at its first store call after it took its lease (that transaction committed),
    say which lease it holds and wait there to be killed."""
    from threadloom.store import sqlite

    real_acquire, held = jobs.acquire, []

    def acquire(w: Any, name: str, holder: str, now: int, ttl_ms: int) -> bool:
        took = real_acquire(w, name, holder, now, ttl_ms)
        if took:
            held.append(f"{name} {holder}")
        return took

    def paused(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, fn: Any) -> Any:
            if held:
                print(held[0], flush=True)
                sys.stdin.read()  # killed here
            return method(self, fn)

        return call

    jobs.acquire = acquire
    sqlite.SqliteStore.read = paused(sqlite.SqliteStore.read)  # type: ignore[method-assign]
    sqlite.SqliteStore.write = paused(sqlite.SqliteStore.write)  # type: ignore[method-assign]


def lease(rt: Runtime, name: str) -> tuple[str, int] | None:
    row = rt.store.read(lambda r: r.one("SELECT holder, expires_at FROM job_leases WHERE name = :n", {"n": name}))
    return None if row is None else (str(row["holder"]), int(row["expires_at"]))


@pytest.mark.slow  # a real process per family, killed mid-pass
@pytest.mark.parametrize("family", sorted(JOBS))
def test_a_pass_killed_midway_leaves_a_lease_the_next_pass_takes_at_once(tmp_path: Path, family: str) -> None:
    home = tmp_path / "home"
    (tmp_path / "user" / ".claude").mkdir(parents=True)
    rt = open_home(home)
    try:
        at = now_ms() - 1000
        for i in range(5):  # something for the style learner to read, so it takes its lease
            add_message(rt.store, USER, "codex", "t1", f"k{i}", f"lgtm, message {i}", at + i)
        child = subprocess.Popen(
            [sys.executable, __file__, family, str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert child.stdin is not None and child.stdout is not None
        try:
            said = child.stdout.readline().split()
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            child.stdin.close()
            child.stdout.close()
        assert child.returncode == -signal.SIGKILL
        assert said[0] == JOBS[family], said  # the pass held its lease when it was killed
        left = lease(rt, JOBS[family])
        assert left is not None and left[0] == said[1] and left[1] > now_ms()  # still there, unexpired
        assert said[1].startswith(f"{child.pid}.") and jobs.holder_gone(said[1])

        report = a_pass(rt, family)()
        assert not report.get("busy"), report  # taken at once, not after the lease's expiry
        assert lease(rt, JOBS[family]) is None  # the pass completed and released it
        if family in ("style", "extract"):
            assert report["messages"] == 5  # it read every message the killed pass left unread
        else:  # the others record each completed pass
            assert rt.store.read(lambda r: jobs.last_run(r, JOBS[family])) is not None
    finally:
        rt.close()


HOLDER = "from threadloom.store import jobs; print(jobs.holder_id(), flush=True); import sys; sys.stdin.read()"


def test_a_holder_of_another_pid_namespace_is_never_judged_by_our_pids(tmp_path: Path) -> None:
    """Another node sharing the database, played by a real process in a pid namespace of its own: its pid (1)
    names our init here, at another start time, so a local pid check would call it dead. It keeps its lease,
    alive or not, until its expiry."""
    unshare = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", HOLDER]
    probe = subprocess.run([*unshare[:4], "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no pid namespace here: {probe.stderr!r}")
    rt = open_home(tmp_path / "home")
    child = subprocess.Popen(unshare, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        theirs = child.stdout.readline().strip()
        assert theirs.startswith("1.") and theirs.split("@")[1][:8] != jobs.holder_id().split("@")[1][:8]

        def take(holder: str) -> bool:
            return rt.store.write(lambda w: jobs.acquire(w, "job", holder, now_ms(), 120_000))

        assert take(theirs)
        assert not jobs.holder_gone(theirs) and not take(jobs.holder_id())
        child.stdin.close()
        child.wait()
        assert not jobs.holder_gone(theirs) and not take(jobs.holder_id())  # its end is not ours to see
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
        rt.close()


if __name__ == "__main__":
    family, home = sys.argv[1], Path(sys.argv[2])
    pause_once_leased()
    if family == "style":  # through the CLI's call site (`threadloom style learn`), which names the holder
        os.environ.update(THREADLOOM_HOME=str(home), THREADLOOM_EMBEDDER="none")
        from threadloom.cli.style import learn

        learn()
    else:
        print(a_pass(open_home(home), family)(), flush=True)
    raise SystemExit("never reached: the pass is killed at its pause")
