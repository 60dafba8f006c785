"""The HTTP server's bounds on connections and log volume, tested directly (the flood is in test_http_flood)."""

from __future__ import annotations

import logging
import resource
from pathlib import Path

from threadloom.config import Settings
from threadloom.server.http_guard import Limits, LogRateLimit


def record(msg: str, name: str = "uvicorn.error") -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, None, None)


def test_a_repeated_log_message_passes_a_few_times_a_minute_then_is_summed_up() -> None:
    now = [0.0]
    limit = LogRateLimit(per_minute=3, clock=lambda: now[0])
    passed = [limit.filter(record("Invalid HTTP request received.")) for _ in range(1000)]
    assert passed.count(True) == 3
    assert limit.filter(record("another message"))
    now[0] = 61.0
    summary = record("Invalid HTTP request received.")
    assert limit.filter(summary)
    assert "997 more like this" in summary.getMessage()


def test_connections_and_backlog_stay_within_the_open_files(home: Path) -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limits = Limits.of(Settings(home=home))
    if soft != resource.RLIM_INFINITY:
        assert limits.max_connections + 3 * limits.backlog < soft
    assert limits.backlog <= limits.max_connections // 4
    assert limits.max_connections <= 1024
