"""Export and import throughput (issue 20), items per second, each beside a baseline from the same run.

A generated export (N memories, N/2 edges between them, N/10 notes) is imported into an empty store, then:
- `export_to` of that store, beside reading the same rows alone (`SELECT *` over the user's memories);
- `import_from` into another empty store, beside reading and parsing the files alone (JSON lines);
- the same import again (everything already there: the idempotent path), and a dry run of it.

    .venv/bin/python bench/portable.py [--memories 20000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from threadloom.config import Settings
from threadloom.portable import format as f
from threadloom.portable.export import export_to
from threadloom.portable.importer import import_from
from threadloom.runtime import open_runtime
from threadloom.scrub import Scrubber

WORDS = [
    "build",
    "deploy",
    "cache",
    "schema",
    "index",
    "query",
    "merge",
    "branch",
    "token",
    "review",
    "release",
    "rollback",
]


def generate(folder: Path, n: int) -> int:
    folder.mkdir()
    start = 1_700_000_000_000
    with (folder / "memories.jsonl").open("w") as fh:
        fh.write(f.dump(f.header("memories")))
        for i in range(n):
            words = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7, 11))
            fh.write(
                f.dump(
                    {
                        "type": "memory",
                        "id": f"m_{i:016x}",
                        "content": f"memory {i}: {words} in module {i % 97}",
                        "summary": None,
                        "category": None,
                        "kind": "fact",
                        "entities": [WORDS[i % len(WORDS)]],
                        "project": f"/repo/p{i % 5}",
                        "visibility": "private",
                        "status": "active",
                        "pinned": False,
                        "core_key": None,
                        "core_priority": None,
                        "session_id": f"s{i // 50}",
                        "vendor": "claude",
                        "origin": "foreground",
                        "created_at": start + i,
                        "valid_from": start + i,
                        "valid_to": None,
                        "superseded_by": None,
                    }
                )
            )
        for i in range(0, n - 1, 2):
            fh.write(
                f.dump(
                    {
                        "type": "edge",
                        "source": f"m_{i:016x}",
                        "target": f"m_{i + 1:016x}",
                        "edge_type": "related_to",
                        "weight": 0.5,
                        "made_by": "explicit",
                        "reason": None,
                        "session_id": None,
                        "created_at": start + i,
                    }
                )
            )
    with (folder / "notes.jsonl").open("w") as fh:
        fh.write(f.dump(f.header("notes")))
        for i in range(n // 10):
            record = {
                "kind": "insight",
                "repo": "/repo",
                "project": "p",
                "thread": f"t-{i % 20}",
                "text": f"note {i} about {WORDS[i % len(WORDS)]}",
                "session_id": None,
                "vendor": "claude",
                "created_at": start + i,
            }
            fh.write(f.dump(record))
    return n + n // 2 + n // 10


def timed(fn: object) -> float:
    started = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - started


def row(name: str, items: int, seconds: float, base_name: str, base: float) -> None:
    print(
        f"{name:<34} {items / seconds:>10,.0f} items/s ({seconds:6.2f} s)   "
        f"baseline {base_name}: {items / base:>10,.0f} items/s ({base:6.2f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=20_000)
    args = parser.parse_args()
    scrub = Scrubber(True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        items = generate(tmp / "gen", args.memories)
        a = open_runtime(Settings(home=tmp / "a", embedder="none", ingest=False, user="bench"), "cli")
        b = open_runtime(Settings(home=tmp / "b", embedder="none", ingest=False, user="bench"), "cli")
        try:
            first = timed(lambda: import_from(a.store, "bench", "", scrub, tmp / "gen"))
            exported = timed(lambda: export_to(a.store, "bench", tmp / "out"))

            def read_rows() -> None:
                a.store.read(lambda r: sum(1 for _ in r.rows("SELECT * FROM memories WHERE owner = 'bench'")))

            rows_alone = timed(read_rows)

            def parse_alone() -> None:
                for name in ("memories", "notes"):
                    with (tmp / "out" / f"{name}.jsonl").open("rb") as fh:
                        for raw in fh:
                            json.loads(raw)

            parsed = timed(parse_alone)
            into_fresh = timed(lambda: import_from(b.store, "bench", "", scrub, tmp / "out"))
            again = timed(lambda: import_from(b.store, "bench", "", scrub, tmp / "out"))
            dry = timed(lambda: import_from(b.store, "bench", "", scrub, tmp / "out", dry_run=True))
            size = sum(p.stat().st_size for p in (tmp / "out").iterdir())
        finally:
            a.close()
            b.close()
    print(f"{args.memories:,} memories, {items:,} items, export {size / 1e6:.1f} MB (JSONL + Markdown)")
    row("export", items, exported, "reading the memory rows", rows_alone)
    row("import into an empty store", items, into_fresh, "parsing the JSON lines", parsed)
    row("import of the generated files", items, first, "parsing the JSON lines", parsed)
    row("import again (all merged)", items, again, "parsing the JSON lines", parsed)
    row("dry run (all merged)", items, dry, "parsing the JSON lines", parsed)


if __name__ == "__main__":
    main()
