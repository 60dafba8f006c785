"""Time as threadloom stores it: epoch milliseconds."""

import time


def now_ms() -> int:
    return int(time.time() * 1000)
