"""Transcript parse throughput: messages per second through `Source.parse`, the path ingest will call.

A generated 100k-message Claude Code session and Codex rollouts (the 2025 envelope vocabulary with
its mirrored turns, and the 2026 item_completed one) are parsed from the start to the end with the
default read budget, as ingest does. The baseline, measured in the same run on the same file: reading
the lines and `json.loads` alone, which no adapter can beat. The target for the whole ingest (store
writes included, embedding deferred) is >= 5,000 messages/s on a 2-core machine.

    python bench/transcripts.py [--messages 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import rss_mb

from threadloom.transcripts import ClaudeCode, Codex, Source

WORDS = ["the", "parser", "keeps", "every", "record", "it", "can", "read", "and", "reports", "what", "it", "skips"]
SESSION = {"sessionId": "b0b0b0b0-0000-4000-8000-000000000001", "cwd": "/home/ada/src/loom", "version": "2.1.227"}
CODEX_META = {"id": "019b0000-0000-7000-8000-000000000001", "cwd": "/home/ada/src/atlas", "cli_version": "0.148.0"}


def prose(n: int, length: int) -> str:
    out = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(length // 6))
    return f"{n} {out}"[:length]


def stamp(ms: int) -> str:
    seconds = ms // 1000
    day, hour, minute = 1 + seconds // 86_400 % 28, seconds // 3600 % 24, seconds // 60 % 60
    return f"2026-11-{day:02d}T{hour:02d}:{minute:02d}:{seconds % 60:02d}.{ms % 1000:03d}Z"


def claude(kind: str, n: int, content: object, model: str | None = None) -> dict[str, object]:
    message: dict[str, object] = {"role": kind, "content": content} | ({"model": model} if model else {})
    return SESSION | {"type": kind, "uuid": f"u{n}", "timestamp": stamp(n * 1000), "message": message}


def claude_lines(turns: int) -> Iterator[dict[str, object]]:
    """4 messages a turn: a question, an answer with a tool call, the tool result, a conclusion."""
    model = "claude-opus-4-5"
    for t in range(turns):
        n = t * 4
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": f"pytest -q t{n}.py"}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": prose(n + 2, 1500)}
        yield claude("user", n, prose(n, 200))
        yield claude("assistant", n + 1, [{"type": "text", "text": prose(n + 1, 300)}, call], model)
        yield claude("user", n + 2, [result])
        yield claude("assistant", n + 3, [{"type": "text", "text": prose(n + 3, 400)}], model)


def turn_event(items: bool, kind: str, text: str, item_id: str) -> dict[str, object]:
    if items:
        item = {"type": kind, "id": item_id, "content": [{"type": "text", "text": text}]}
        return {"type": "item_completed", "item": item}
    return {"type": "user_message" if kind == "UserMessage" else "agent_message", "message": text}


def codex_lines(turns: int, items: bool) -> Iterator[dict[str, object]]:
    """4 messages a turn from 7 records: each turn is written twice (response_item and event)."""
    yield {"timestamp": stamp(0), "type": "session_meta", "payload": CODEX_META}
    yield {"timestamp": stamp(0), "type": "turn_context", "payload": {"model": "gpt-5.5-codex"}}
    for t in range(turns):
        n = t * 4
        ask, answer = prose(n, 200), prose(n + 3, 400)
        arguments = json.dumps({"cmd": f"rg -n 'def f{n}' src", "workdir": "/home/ada/src/atlas"})
        payloads = [
            ("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ask}]}),
            ("event_msg", turn_event(items, "UserMessage", ask, f"iu{n}")),
            (
                "response_item",
                {"type": "function_call", "name": "exec_command", "arguments": arguments, "call_id": f"c{n}"},
            ),
            ("response_item", {"type": "function_call_output", "call_id": f"c{n}", "output": prose(n + 2, 1500)}),
            (
                "response_item",
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]},
            ),
            ("event_msg", turn_event(items, "AgentMessage", answer, f"ia{n}")),
            ("event_msg", {"type": "token_count", "info": None}),
        ]
        for at, (kind, payload) in enumerate(payloads):
            yield {"timestamp": stamp(n * 1000 + at), "type": kind, "payload": payload}


def write(path: Path, lines: Iterator[dict[str, object]]) -> int:
    with path.open("w") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")
    return path.stat().st_size


def json_only(path: Path) -> int:
    """The floor: each line decoded and parsed the fastest way the standard library offers."""
    decoder, count = json.JSONDecoder(), 0
    with path.open("rb") as handle:
        for line in handle:
            decoder.raw_decode(line.decode("utf-8"))
            count += 1
    return count


def parse(source: Source, path: Path) -> int:
    cursor, count = None, 0
    while True:
        result = source.parse(path, cursor)
        count += len(result.messages)
        cursor = result.cursor
        if not result.more:
            return count


def best(rounds: int, run: Callable[[], int]) -> tuple[float, float, int]:
    """The fastest of `rounds` runs, in wall seconds and in this process's CPU seconds (the machine is
    shared, so CPU time is the steadier figure)."""
    walls, cpus, count = [], [], 0
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        count = run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    turns = args.messages // 4
    cases: list[tuple[str, Source, Callable[[], Iterator[dict[str, object]]]]] = [
        ("claude-code", ClaudeCode(), lambda: claude_lines(turns)),
        ("codex envelope-2025", Codex(), lambda: codex_lines(turns, items=False)),
        ("codex items-2026", Codex(), lambda: codex_lines(turns, items=True)),
    ]
    with tempfile.TemporaryDirectory() as folder:
        for name, source, lines in cases:
            path = Path(folder) / f"{name.replace(' ', '-')}.jsonl"
            size = write(path, lines())
            base_wall, base_cpu, records = best(args.rounds, partial(json_only, path))
            wall, cpu, messages = best(args.rounds, partial(parse, source, path))
            figures = {
                "transcript": name,
                "mb": round(size / 1e6, 1),
                "records": records,
                "messages": messages,
                "parse_messages_per_s": round(messages / wall),
                "parse_messages_per_cpu_s": round(messages / cpu),
                "baseline_json_only_messages_per_s": round(messages / base_wall),
                "baseline_json_only_messages_per_cpu_s": round(messages / base_cpu),
                "parse_cpu_over_json_only_cpu": round(cpu / base_cpu, 2),
                "rss_mb": round(rss_mb()),
            }
            print(json.dumps(figures))


if __name__ == "__main__":
    main()
