"""Measuring helpers shared by the benchmarks (standard library only: the Papez driver runs in its
own virtual environment and imports this too)."""

from __future__ import annotations

import resource
from pathlib import Path


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0-1) of `values`, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def rss_mb() -> float:
    """This process's resident memory now."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
