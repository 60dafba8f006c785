"""A stand-in agent CLI for spawn tests: reads its prompt on stdin and acts on its lines.

    sleep N        sleep N seconds
    await PATH     wait until PATH exists (a test holds the agent running until it says)
    stubborn       ignore SIGTERM from now on (the watchdog must SIGKILL)
    signal TEXT    whisper TEXT to the parent session through a real threadloom server (with the tools
                   THREADLOOM_TOOLSET gives it, as an agent's own threadloom server would)
    fail           exit 3
    usage N USD    print a usage report as Claude Code's JSON result does
    leave N        leave a grandchild sleeping N seconds in its process group
    detach N       leave a grandchild sleeping N seconds in a session of its own
    hog MB         leave a grandchild holding MB of resident memory (prints `hogging` once it does)
    say JSON       print the JSON string's lines to stdout, each flushed on its own, 5 ms apart
    warn JSON      the same to stderr
    as ROLE: LINE  act on LINE only when the prompt makes it that role ("You are the ROLE.")
    tools          print the names of the tools its threadloom server offers it (`tools=a,b`)
    tool NAME JSON call one tool with JSON arguments; prints `tool NAME ok: ...` or `tool NAME error: ...`
Anything else is ignored. It prints its pid, lineage, toolset and the prompt's size first.
FAKE_AGENT_SCRIPT (environment): more lines to act on after the prompt's, as a test's own script;
FAKE_AGENT_PROMPT: a file to save the prompt in, as the test's record of what the agent was given.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

HOG = "import sys, time; b = b'x' * (int(sys.argv[1]) << 20); print('hogging', flush=True); time.sleep(600)"


def whisper(text: str) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    async def send() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "threadloom", "serve", "--in-process"],
                                       env=dict(os.environ))  # fmt: skip
        async with Client(params, mode="legacy") as client:
            parent = os.environ["THREADLOOM_PARENT_SESSION"]
            args = {"to": parent, "text": text, "task_id": os.environ["THREADLOOM_TASK"]}
            try:
                result = await client.call_tool("signal_send", args)
            except Exception as exc:  # an agent carries on, as a real one would
                print(f"signal_send failed: {exc}", flush=True)
                return
            if result.is_error:
                print(f"signal_send failed: {result.content}", flush=True)

    anyio.run(send)


def mcp(action: str, name: str = "", args: dict[str, object] | None = None) -> None:
    """List the tools (`tools`) or call one (`tool`) through a real threadloom server, as `whisper` does."""
    import anyio
    from mcp import Client, StdioServerParameters

    async def run() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "threadloom", "serve", "--in-process"],
                                       env=dict(os.environ))  # fmt: skip
        async with Client(params, mode="legacy") as client:
            if action == "tools":
                listed = await client.list_tools()
                print("tools=" + ",".join(sorted(t.name for t in listed.tools)), flush=True)
                return
            try:
                result = await client.call_tool(name, args or {})
            except Exception as exc:
                print(f"tool {name} error: {exc}", flush=True)
                return
            text = " ".join(getattr(c, "text", "") for c in result.content)
            print(f"tool {name} {'error' if result.is_error else 'ok'}: {text[:300]}", flush=True)

    anyio.run(run)


def leave(argv: list[str], own_session: bool = False) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, start_new_session=own_session, stdin=subprocess.DEVNULL)


def main() -> int:
    prompt = sys.stdin.read()
    print(f"pid={os.getpid()} parent={os.environ.get('THREADLOOM_PARENT_SESSION')} "
          f"task={os.environ.get('THREADLOOM_TASK')} toolset={os.environ.get('THREADLOOM_TOOLSET')} "
          f"chars={len(prompt)} continued={prompt.startswith('You were stopped')}", flush=True)  # fmt: skip
    role = m.group(1) if (m := re.search(r"You are the (\S+)\.", prompt)) else None
    if os.environ.get("FAKE_AGENT_PROMPT"):
        with open(os.environ["FAKE_AGENT_PROMPT"], "w", encoding="utf-8") as f:
            f.write(prompt)
    for line in [*prompt.splitlines(), *os.environ.get("FAKE_AGENT_SCRIPT", "").splitlines()]:
        line = line.strip()
        if line.startswith("as ") and ":" in line:
            who, _, line = line[3:].partition(":")
            if who.strip() != role:
                continue
        word, _, rest = line.strip().partition(" ")
        if word == "sleep":
            time.sleep(float(rest))
        elif word == "await":
            while not os.path.exists(rest):
                time.sleep(0.02)
        elif word == "stubborn":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif word == "signal":
            whisper(rest)
        elif word in ("leave", "detach"):
            print(f"{word}={leave(['sleep', rest], own_session=word == 'detach').pid}", flush=True)
        elif word == "hog":
            print(f"hog={leave([sys.executable, '-c', HOG, rest]).pid}", flush=True)
        elif word in ("say", "warn"):
            out = sys.stdout if word == "say" else sys.stderr
            for said in json.loads(rest).splitlines():
                print(said, file=out, flush=True)
                time.sleep(0.005)
        elif word == "fail":
            return 3
        elif word == "tools":
            mcp("tools")
        elif word == "tool":
            name, _, args = rest.partition(" ")
            mcp("tool", name, json.loads(args or "{}"))
        elif word == "usage":  # usage TOKENS DOLLARS, as Claude Code's JSON result reports it
            tokens, dollars = rest.split()
            print(json.dumps({"type": "result", "usage": {"input_tokens": int(tokens), "output_tokens": 0},
                              "total_cost_usd": float(dollars)}), flush=True)  # fmt: skip
    print("finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
