"""A stand-in agent CLI for spawn tests: reads its prompt on stdin and acts on its lines.

    sleep N        sleep N seconds
    stubborn       ignore SIGTERM from now on (the watchdog must SIGKILL)
    signal TEXT    whisper TEXT to the parent session through a real threadloom server
    fail           exit 3
    usage N USD    print a usage report as Claude Code's JSON result does
Anything else is ignored. It prints its lineage and the prompt's size first.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def whisper(text: str) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    async def send() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "threadloom", "serve", "--in-process"],
                                       env=dict(os.environ) | {"THREADLOOM_TOOLSET": "full"})  # fmt: skip
        async with Client(params, mode="legacy") as client:
            parent = os.environ["THREADLOOM_PARENT_SESSION"]
            await client.call_tool("signal_send", {"to": parent, "text": text, "task": os.environ["THREADLOOM_TASK"]})

    anyio.run(send)


def main() -> int:
    prompt = sys.stdin.read()
    print(f"parent={os.environ.get('THREADLOOM_PARENT_SESSION')} task={os.environ.get('THREADLOOM_TASK')} "
          f"chars={len(prompt)} continued={prompt.startswith('You were stopped')}", flush=True)  # fmt: skip
    for line in prompt.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "sleep":
            time.sleep(float(rest))
        elif word == "stubborn":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif word == "signal":
            whisper(rest)
        elif word == "fail":
            return 3
        elif word == "usage":  # usage TOKENS DOLLARS, as Claude Code's JSON result reports it
            tokens, dollars = rest.split()
            print(json.dumps({"type": "result", "usage": {"input_tokens": int(tokens), "output_tokens": 0},
                              "total_cost_usd": float(dollars)}), flush=True)  # fmt: skip
    print("finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
