"""The brief's slots: every module of this package that defines `SLOT` (a `Slot`) is one part of the brief.

Adding a part (a user model, a style guide, ...) is one small module here: a function from an `Ask` to a
`Section` (or None when it has nothing to say), and its `SLOT = Slot(name, priority, build, order, scopes)`.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from threadloom.brief.model import Slot


@cache
def registry() -> tuple[Slot, ...]:
    """Every slot, in the order they show."""
    found: dict[str, Slot] = {}
    for module in pkgutil.iter_modules(__path__):
        slot = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SLOT", None)
        if isinstance(slot, Slot):
            if slot.name in found:
                raise RuntimeError(f"two brief slots are named {slot.name!r}")
            found[slot.name] = slot
    return tuple(sorted(found.values(), key=lambda s: (s.order, s.name)))
