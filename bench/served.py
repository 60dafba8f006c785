"""Thread calls as a session makes them, through a real in-process server over stdio, for this
checkout and for older code side by side (bench/threads.py's served table).

The code before is this checkout's package copied with one commit taken out (its files as they were
before it), put first on PYTHONPATH of the measuring process and of the server it starts; each side
gets a home of its own, so each store is made by its own code, and both use the same thread files.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from measure import pct

ROOT = Path(__file__).resolve().parent.parent
SESSION = "bench"
RACY_WAIT_S = 2.1  # files written in the last 2 s are never kept parsed (threads/file_cache.py)


def served_comparison(repo: Path, tmp: Path, deepest: str, change: str, runs: int) -> list[str]:
    """The table's lines: each call's first and warm times, before and now, and thread_context's
    reply in cl100k tokens."""
    from threadloom.tokens import count

    old = tmp / "before"
    _without(change, old)
    time.sleep(RACY_WAIT_S)  # files as a session meets them: written earlier, not this instant
    sides = {}
    for name, code in (("before", old), ("now", ROOT)):
        home = tmp / f"home-{name}"
        home.mkdir()
        env = _env(home, repo, code)
        done = subprocess.run(
            [sys.executable, __file__, str(repo), deepest, str(runs)], env=env, capture_output=True, text=True, cwd=repo
        )
        if done.returncode != 0:
            raise SystemExit(f"the {name} side failed:\n{done.stderr[-3000:]}")
        sides[name] = json.loads(done.stdout)
    lines = [
        f"\nserved at {_count(repo):,} threads, {runs} calls each (in-process server over stdio; "
        f"before = without {change}):",
        f"  {'call':<34}{'before: first / p50 / p95 ms':>30}{'now: first / p50 / p95 ms':>30}",
    ]
    for call in ("status", "thread_context", "thread_summary (a write)"):
        row = [_cell(sides[side][call]) for side in ("before", "now")]
        lines.append(f"  {call:<34}{row[0]:>30}{row[1]:>30}")
    tokens = [count(sides[side]["reply"]) for side in ("before", "now")]
    lines.append(f"  {'thread_context reply, tokens':<34}{tokens[0]:>30,}{tokens[1]:>30,}")
    return lines


def _without(change: str, old: Path) -> None:
    """This checkout's package with the commit `change` taken out of it: its files as they were before
    it, the files it added removed. The rest (other work since) is the same on both sides."""
    shutil.copytree(ROOT / "threadloom", old / "threadloom", ignore=shutil.ignore_patterns("__pycache__"))
    listing = subprocess.run(
        ["git", "-C", str(ROOT), "diff-tree", "--no-commit-id", "--name-status", "-r", change, "--", "threadloom"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for line in listing.splitlines():
        status, path = line.split("\t", 1)
        if status == "A":
            (old / path).unlink()
        else:
            text = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{change}^:{path}"], capture_output=True, check=True
            )
            (old / path).write_bytes(text.stdout)


def _cell(times: list[float]) -> str:
    warm = times[1:]
    return f"{times[0] * 1000:.1f} / {statistics.median(warm) * 1000:.1f} / {pct(warm, 0.95) * 1000:.1f}"


def _env(home: Path, repo: Path, code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADLOOM_")}
    env.update(
        PYTHONPATH=os.pathsep.join([str(code), str(Path(__file__).parent)]),
        THREADLOOM_HOME=str(home),
        THREADLOOM_ROOT=str(repo),
        THREADLOOM_SESSION_ID=SESSION,
        THREADLOOM_EMBEDDER="none",
        THREADLOOM_TOOLSET="full",
    )
    return env


def _count(repo: Path) -> int:
    return len(list((repo / ".threadloom/threads/bench").glob("*.md")))


async def _measure(repo: Path, deepest: str, runs: int) -> dict[str, Any]:
    """In the measuring process: the session on `deepest`'s chain, then each call `runs` times."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    import threadloom
    from threadloom.identity import Provenance
    from threadloom.search.engine import SearchEngine
    from threadloom.store.sqlite import open_store
    from threadloom.threads.service import ThreadService

    assert Path(threadloom.__file__).is_relative_to(Path(os.environ["PYTHONPATH"].split(os.pathsep)[0]))
    store = open_store(Path(os.environ["THREADLOOM_HOME"]) / "threadloom.db")
    prov = Provenance(session_id=SESSION, vendor="other", project=str(repo))
    ThreadService(store, SearchEngine(store)).switch(prov, deepest)
    store.close()
    # Not started in a checkout: `python -m` puts the working directory first on the path.
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "threadloom", "serve", "--in-process"], cwd=str(repo)
    )
    params.env = dict(os.environ)
    calls: dict[str, Any] = {}
    async with Client(params, mode="legacy") as client:
        for name, tool, args in (
            ("status", "status", {}),
            ("thread_context", "thread_context", {}),
            ("thread_summary (a write)", "thread_summary", {"text": "- step", "section": "State", "replace": True}),
        ):
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                result = await client.call_tool(tool, args)
                times.append(time.perf_counter() - started)
                assert not result.is_error, result
            calls[name] = times
            if tool == "thread_context":
                calls["reply"] = result.content[0].text  # type: ignore[union-attr]
    return calls


if __name__ == "__main__":
    import anyio

    print(json.dumps(anyio.run(_measure, Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))))
