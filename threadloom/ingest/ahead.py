"""Reading ahead: the next batch is parsed and scrubbed in a thread while the current one is written.

SQLite (apsw) releases the GIL while it works, so on two cores the parse of batch n+1 runs beside the
full-text indexing of batch n. Order is kept, at most `depth` batches wait, an exception reaches the
consumer in its place, and a consumer that stops early (an error, a lost lease) stops the producer.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")
_POLL_S = 0.1


def ahead(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    waiting: queue.Queue[tuple[bool, object]] = queue.Queue(depth)
    stop = threading.Event()
    done = object()

    def put(item: tuple[bool, object]) -> bool:
        while not stop.is_set():
            try:
                waiting.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            put((False, exc))
            return
        put((True, done))

    context = contextvars.copy_context()  # the scrub report of a tool call, if one collects
    worker = threading.Thread(target=context.run, args=(produce,), name="threadloom-ingest-read", daemon=True)
    worker.start()
    try:
        while True:
            ok, item = waiting.get()
            if not ok:
                assert isinstance(item, BaseException)
                raise item
            if item is done:
                return
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        worker.join()
