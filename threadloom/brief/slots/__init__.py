"""The brief's slots: every module of this package that defines `SLOT` (a `Slot`) is one part of the brief.

Adding a part (a user model, a style guide, ...) is one small module here: a function from an `Ask` to a
`Section` (or None when it has nothing to say), and its `SLOT = Slot(name, priority, build, order, scopes)`.
A module that fails to import costs its own part only: it shows as unavailable, and the error is logged.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from functools import cache

from threadloom.brief.model import Ask, Section, Slot

log = logging.getLogger(__name__)


def _unloadable(name: str, error: Exception) -> Slot:
    note = f"unavailable: its module failed to load ({type(error).__name__}, logged)"

    def build(_: Ask) -> Section:
        return Section(name, (), "", fenced=False, notes=(note,))

    return Slot(name, priority=0, build=build, order=1000)


@cache
def registry() -> tuple[Slot, ...]:
    """Every slot, in the order they show."""
    found: dict[str, Slot] = {}
    for module in pkgutil.iter_modules(__path__):
        try:
            slot = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SLOT", None)
        except Exception as exc:  # a broken part must not cost the session its whole brief
            log.exception("brief slot module %s failed to load", module.name)
            slot = _unloadable(module.name, exc)
        if isinstance(slot, Slot):
            if slot.name in found:
                raise RuntimeError(f"two brief slots are named {slot.name!r}")
            found[slot.name] = slot
    return tuple(sorted(found.values(), key=lambda s: (s.order, s.name)))
