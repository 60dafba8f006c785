"""A simulated year: how big the store gets with and without retention, and what compaction costs writers.

The generator (tests/retention_world.py) writes, per simulated day: `--sessions` Claude Code transcripts of
`--messages` turns (JSONL files ingested by the real ingester, search documents included), `--memories`
memories through `MemoryService.store`, and dated rows as the services write them: signals with deliveries,
tool-call journal events and replay records, spawned tasks with their log files, pruned memories' archive
rows, self-test results. Three stores get the same days:

- `none`: no retention;
- `default`: the daemon's daily pass (retention with the default windows, then compaction), each day at the
  simulated day's end;
- `short`: the same with transcripts kept 90 days (THREADLOOM_RETENTION_TRANSCRIPTS_DAYS=90).

Rows scale with sessions, so `--scale` simulates that fraction of each day's sessions, calls and signals and
multiplies sizes back (the fixed part, an empty store's ~0.6 MB, is small beside them: said beside the figure).

Then, on a copy of the `none` store (a year that never had retention), a second process writes one row a
transaction without pause (tests/compaction_writer.py) while, in turn: nothing runs (the baseline), the first
retention pass and the step-wise compaction run, and a plain VACUUM runs. Its per-write latency (p50, p99,
max) in each phase is the writer's wait.

    .venv/bin/python bench/year.py [--days 365] [--sessions 8] [--messages 40] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import apsw

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from measure import pct

from tests import retention_world as rw
from threadloom.clock import now_ms
from threadloom.hygiene.compaction import Compaction
from threadloom.hygiene.retention import Retention, Windows
from threadloom.identity import Provenance
from threadloom.memory.model import NewMemory
from threadloom.memory.service import MemoryService
from threadloom.search.engine import SearchEngine
from threadloom.store.base import Writer
from threadloom.store.compaction import SqliteCompactor
from threadloom.store.sqlite import open_store

DAY = rw.DAY
ROOT = Path(__file__).parent.parent
PROV = Provenance(session_id="bench", vendor="claude", project="/repo/shop", user="ana")


def day_rows(w: Writer, day: int, at: int, logs: Path, a: argparse.Namespace) -> None:
    """One simulated day's dated rows (what the services journal and send), spread over its hours."""
    session = f"s-{day}"
    rw.session(w, session, "ana", at)
    for i in range(a.signal_count):
        rw.signal(w, session, f"s-{day}-peer", at + i * 60_000, rw.text(day * 31 + i, 25))
    for i in range(a.call_count):
        rw.event(w, session, at + i * 1_000, detail={"tool": "memory_recall", "ok": True, "ms": 10 + i % 40,
                                                       "args": rw.text(i, 8)})  # fmt: skip
        if i % 8 == 0:
            rw.replay(w, "ana", f"{day}-{i}", at + i * 1_000)
    for i in range(a.tasks):
        rw.task(w, logs, f"t_{day:04x}{i:02x}", "ana", at + i * 3_600_000, log_bytes=a.task_log_bytes)
    for i in range(a.pruned):
        rw.archived(w, f"m-{day}-{i}", "ana", at + i)
    for _ in range(4):
        rw.probe(w, at)


def simulate(folder: Path, a: argparse.Namespace, windows: Windows | None) -> dict[str, Any]:
    folder.mkdir(parents=True)
    store = open_store(folder / "threadloom.db")
    memory = MemoryService(store, SearchEngine(store))
    retention = Retention(store, folder / "tasks", windows) if windows else None
    start = now_ms() - a.days * DAY
    took = {"ingest": 0.0, "rows": 0.0, "memories": 0.0, "retention": 0.0, "compaction": 0.0}
    longest_hold = 0.0
    for day in range(a.days):
        at = start + day * DAY
        clock = time.perf_counter()
        for s in range(a.session_count):
            rw.transcript(folder / "user", f"d{day}s{s}", at + s * 3_600_000, a.messages, a.words)
        rw.ingest(store, "ana", folder / "user")
        took["ingest"] += time.perf_counter() - clock
        clock = time.perf_counter()
        store.write(lambda w, d=day, t=at: day_rows(w, d, t, folder / "tasks", a))
        took["rows"] += time.perf_counter() - clock
        clock = time.perf_counter()
        for m in range(a.memories):
            memory.store(NewMemory(content=rw.text(day * 100 + m, 30)), PROV)
        took["memories"] += time.perf_counter() - clock
        if retention is not None:  # the daemon's daily pass, at the day's end
            clock = time.perf_counter()
            retention.run(None, now=at + DAY)
            took["retention"] += time.perf_counter() - clock
            clock = time.perf_counter()
            longest_hold = max(longest_hold, float(Compaction(store).run()["longest_hold_ms"]))
            took["compaction"] += time.perf_counter() - clock
    store.close()
    return describe(folder) | {"seconds": {k: round(v, 1) for k, v in took.items()}, "longest_hold_ms": longest_hold}


def describe(folder: Path) -> dict[str, Any]:
    """A year's store as it stands: its log folded in first, as every store is measured."""
    store = open_store(folder / "threadloom.db")
    SqliteCompactor(store).checkpoint()
    found = {"sizes": SqliteCompactor(store).sizes(), "held": Retention(store, folder / "tasks", Windows()).held(None)}
    store.close()
    return found


def writer_phase(database: Path, work: Any, settle_s: float = 0.5) -> tuple[list[float], int, Any]:
    """Run `work` while a second process writes; the writer's per-write ms during it, refusals, the result."""
    stop = database.with_name("stop")
    stop.unlink(missing_ok=True)
    acks = database.with_name("writer.out")  # a file, not a pipe: a full pipe would stop the writer mid-phase
    with acks.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "tests.compaction_writer", str(database), str(stop)],
                                cwd=ROOT, stdout=sink, text=True)  # fmt: skip
        while acks.stat().st_size == 0:  # writing
            time.sleep(0.01)
        time.sleep(settle_s)
        result = work()
        stop.touch()
        proc.wait(timeout=120)
    summary = json.loads(acks.read_text().splitlines()[-1])
    return summary["ms"], int(summary["refused"]), result


def show_writes(name: str, ms: list[float], refused: int, seconds: float) -> None:
    print(f"  {name:<34} {seconds:>7.1f} s  writes {len(ms):>6,}  p50 {pct(ms, 0.5):6.1f} ms  "
          f"p99 {pct(ms, 0.99):7.1f} ms  max {max(ms):8.1f} ms  refused {refused}")  # fmt: skip


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--days", type=int, default=365)
    p.add_argument("--sessions", type=int, default=8, help="agent sessions a day")
    p.add_argument("--messages", type=int, default=40, help="turns a session")
    p.add_argument("--words", type=int, default=60, help="words a turn")
    p.add_argument("--memories", type=int, default=5, help="memories stored a day")
    p.add_argument("--calls", type=int, default=400, help="tool calls journaled a day")
    p.add_argument("--signals", type=int, default=20, help="signals a day")
    p.add_argument("--tasks", type=int, default=1, help="spawned tasks a day")
    p.add_argument("--task-log-bytes", type=int, default=20_000)
    p.add_argument("--pruned", type=int, default=2, help="memories pruned into the archive a day")
    p.add_argument("--scale", type=float, default=1.0, help="fraction of sessions, calls and signals simulated")
    p.add_argument("--variants", default="none,default,short", help="which of none, default, short to simulate")
    p.add_argument("--keep", type=Path, help="copy each simulated store here when done")
    p.add_argument("--year-stores", help="a --keep folder: describe its stores and measure on its `none`")
    p.add_argument("--no-first-pass", action="store_true", help="only the year's sizes")
    a = p.parse_args()
    a.session_count = max(1, round(a.sessions * a.scale))
    a.call_count = max(1, round(a.calls * a.scale))
    a.signal_count = max(1, round(a.signals * a.scale))
    factor = a.sessions / a.session_count
    print(f"simulated year: {a.days} days x {a.session_count} sessions x {a.messages} turns x {a.words} words, "
          f"{a.memories} memories, {a.call_count} tool calls, {a.signal_count} signals, {a.tasks} tasks a day; "
          f"sizes x{factor:g} to {a.sessions} sessions a day; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tl-year-") as tmp:
        base = Path(tmp)
        variants = {"none": None, "default": Windows(), "short": Windows(transcripts=90)}
        for name in a.variants.split(","):
            if a.year_stores:  # stores a run left (--keep): described, not simulated again
                run = describe(Path(a.year_stores) / name) | {"seconds": "-", "longest_hold_ms": 0}
            else:
                run = simulate(base / name, a, variants[name])
                if a.keep:
                    shutil.copytree(base / name, a.keep / name, ignore=shutil.ignore_patterns("user"))
            s, held = run["sizes"], run["held"]
            disk = s["file_bytes"] + s["wal_bytes"]
            print(f"\n{name}: store {mb(disk)} (x{factor:g}: {mb(disk * factor)}), free {mb(s['free_bytes'])}, "
                  f"task files {mb(held['tasks']['file_bytes'])}; time {run['seconds']}")  # fmt: skip
            print("  rows " + ", ".join(f"{k} {v['rows']:,}" for k, v in held.items()))
            print("  largest " + ", ".join(f"{t} {mb(b)}" for t, b in list(s["tables"].items())[:6]))
            if run["longest_hold_ms"]:
                print(f"  daily compaction: longest write-lock hold {run['longest_hold_ms']:.1f} ms")
            sys.stdout.flush()
        if not a.no_first_pass:
            first_pass(Path(a.year_stores) if a.year_stores else base, base, a)
        print(f"\nload after: {os.getloadavg()[0]:.2f}")


def first_pass(source: Path, base: Path, a: argparse.Namespace) -> None:
    """A year that never had retention: its first pass and compaction beside a writer, then VACUUM beside one
    (on a copy of the store as that pass left it)."""
    del a
    print("\nthe first retention pass over the `none` year (transcripts kept 90 days), then compaction, a second "
          "process writing throughout:")  # fmt: skip
    folder, copy = base / "first-steps", base / "first-vacuum"
    folder.mkdir(exist_ok=True)
    copy.mkdir(exist_ok=True)
    for suffix in ("", "-wal"):
        src = source / "none" / f"threadloom.db{suffix}"
        if src.exists():
            shutil.copy(src, folder / f"threadloom.db{suffix}")
    store = open_store(folder / "threadloom.db")
    database = store.path
    clock = time.perf_counter()
    ms, refused, _ = writer_phase(database, lambda: time.sleep(3.0))
    show_writes("baseline (nothing else)", ms, refused, time.perf_counter() - clock)
    retention = Retention(store, folder / "tasks", Windows(transcripts=90))
    clock = time.perf_counter()
    ms, refused, kept = writer_phase(database, lambda: retention.run(None))
    show_writes(f"retention ({sum(kept['deleted'].values()):,} rows)", ms, refused, time.perf_counter() - clock)
    SqliteCompactor(store).checkpoint()
    shutil.copy(database, copy / "threadloom.db")
    clock = time.perf_counter()
    ms, refused, done = writer_phase(database, lambda: Compaction(store).run())
    show_writes("compaction in steps", ms, refused, time.perf_counter() - clock)
    print(f"    {done['steps']} steps, lock held {done['longest_hold_ms']} ms at most; file "
          f"{mb(done['before']['file_bytes'])} -> {mb(done['after']['file_bytes'])}")  # fmt: skip
    store.close()

    def vacuum(path: Path = copy / "threadloom.db") -> float:
        conn = apsw.Connection(str(path))
        conn.set_busy_timeout(60_000)
        clock = time.perf_counter()
        conn.execute("VACUUM")
        conn.close()
        return time.perf_counter() - clock

    clock = time.perf_counter()
    ms, refused, held = writer_phase(copy / "threadloom.db", vacuum)
    show_writes(f"plain VACUUM ({held:.1f} s)", ms, refused, time.perf_counter() - clock)
    print(f"    file {mb((copy / 'threadloom.db').stat().st_size)} after VACUUM")


if __name__ == "__main__":
    main()
