"""A second process writing while a test compacts the store: one journal event a transaction, each numbered;
a number is printed (acknowledged) only once its transaction committed. Stops when the stop file appears, then
prints a JSON summary line: writes, refused (StoreBusy or any other error), and each write's milliseconds.

    python -m tests.compaction_writer <database> <stop file>
"""

from __future__ import annotations

import json
import sys
import time
from functools import partial
from pathlib import Path

from threadloom.errors import ThreadloomError
from threadloom.store.base import Writer
from threadloom.store.sqlite import SqliteStore


def _write(w: Writer, seq: int) -> int:
    return w.execute(
        "INSERT INTO events (at, kind, origin, detail) VALUES (:at, 'test.write', 'writer', :d)",
        {"at": int(time.time() * 1000), "d": json.dumps({"seq": seq, "pad": "x" * 200})},
    )


def main(database: Path, stop: Path) -> None:
    store = SqliteStore(database)  # already made and migrated by the test: no migration here
    seq = refused = 0
    took: list[float] = []
    while not stop.exists():
        seq += 1
        start = time.perf_counter()
        try:
            store.write(partial(_write, seq=seq))
        except ThreadloomError as exc:
            refused += 1
            print(json.dumps({"refused": seq, "error": exc.message}), flush=True)
            continue
        took.append((time.perf_counter() - start) * 1000)
        print(seq, flush=True)
    store.close()
    print(json.dumps({"writes": len(took), "refused": refused, "ms": took}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
