"""Signal wake-up latency and the idle cost of waiting agents.

Wake-up: one session waits in `signal_inbox(wait_s=...)` while another whispers to it; the time
from the whisper's send to the waiter's answer, p50/p95, for sessions on one daemon (the normal
case: bridges to the user's daemon) and for two separate `--in-process` servers (woken by the
store poller). Idle cost: the daemon's CPU seconds over a quiet stretch with 10 agents waiting,
against the same stretch with none waiting (the baseline, in the same run).

    python bench/signals.py [--rounds 30] [--idle-s 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import pct

from threadloom.daemon import control
from threadloom.home import HomeLayout


def params(home: Path, sid: str, *extra: str) -> StdioServerParameters:
    env = os.environ | {"THREADLOOM_HOME": str(home), "THREADLOOM_EMBEDDER": "none", "THREADLOOM_SESSION_ID": sid,
                        "THREADLOOM_TOOLSET": "full", "THREADLOOM_ROOT": "/bench"}  # fmt: skip
    return StdioServerParameters(command=sys.executable, args=["-m", "threadloom", "serve", *extra], env=env)


async def wakeups(home: Path, rounds: int, *extra: str) -> list[float]:
    times: list[float] = []
    async with (
        Client(params(home, "waiter", *extra), mode="legacy") as waiter,
        Client(params(home, "sender", *extra), mode="legacy") as sender,
    ):
        await waiter.call_tool("peers", {})
        await sender.call_tool("peers", {})
        for n in range(rounds):
            sent_at: list[float] = []

            async def wait(sent_at: list[float] = sent_at) -> None:
                await waiter.call_tool("signal_inbox", {"wait_s": 30})
                times.append(time.perf_counter() - sent_at[0])

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.sleep(0.3)  # the waiter is parked
                sent_at.append(time.perf_counter())
                await sender.call_tool("signal_send", {"to": "waiter", "text": f"ping {n}"})
    return times


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle_cost(home: Path, agents: int, seconds: float) -> tuple[float, float]:
    """Daemon CPU seconds over `seconds` with nobody waiting, then with `agents` waiting."""
    async with Client(params(home, "idle-probe"), mode="legacy") as probe:
        await probe.call_tool("peers", {})
        status = control.request(HomeLayout(home).socket, "status") or {}
        pid = int(status["pid"])
        before = cpu_s(pid)
        await anyio.sleep(seconds)
        baseline = cpu_s(pid) - before
        async with anyio.create_task_group() as tg:
            for n in range(agents):
                tg.start_soon(_wait_once, home, f"idle-{n}", seconds + 5)
            await anyio.sleep(3)  # all parked
            before = cpu_s(pid)
            await anyio.sleep(seconds)
            waiting = cpu_s(pid) - before
            tg.cancel_scope.cancel()
    return baseline, waiting


async def _wait_once(home: Path, sid: str, wait_s: float) -> None:
    async with Client(params(home, sid), mode="legacy") as client:
        await client.call_tool("signal_inbox", {"wait_s": wait_s})


async def main_async(rounds: int, idle_s: float) -> None:
    with tempfile.TemporaryDirectory(prefix="tlsig") as tmp:
        home = Path(tmp)
        try:
            daemon = await wakeups(home, rounds)
            separate = await wakeups(home, rounds, "--in-process")
            baseline, waiting = await idle_cost(home, 10, idle_s)
        finally:
            control.stop(HomeLayout(home).socket)
    print(f"wake-up, whisper sent -> waiting inbox answered ({rounds} rounds each):")
    for label, times in (("sessions on one daemon", daemon), ("two --in-process servers", separate)):
        p50, p95 = statistics.median(times) * 1000, pct(times, 0.95) * 1000
        print(f"  {label:28} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    print(f"idle daemon CPU over {idle_s:g} s: {baseline:.3f} s with nobody waiting, {waiting:.3f} s with 10 waiting")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--idle-s", type=float, default=10.0)
    args = parser.parse_args()
    anyio.run(main_async, args.rounds, args.idle_s)


if __name__ == "__main__":
    main()
