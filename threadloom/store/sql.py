"""Small SQL helpers both dialects share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def placeholders(prefix: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """`:p0, :p1, ...` for an IN list, and the parameters they name."""
    params = {f"{prefix}{n}": v for n, v in enumerate(values)}
    return ", ".join(":" + k for k in params), params
