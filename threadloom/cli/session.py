"""Running one service call from the terminal: a runtime for the command, the provenance of a
terminal session (`cli`, or THREADLOOM_SESSION_ID), and the result printed."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from threadloom.cli.app import out, settings
from threadloom.identity import Identity, Provenance, detect_vendor, project_root
from threadloom.runtime import Runtime, open_runtime


def run_in_session(fn: Callable[[Runtime, Provenance], Any], as_json: bool = True) -> None:
    config = settings()
    runtime = open_runtime(config, "cli")
    try:
        who = Identity.of({}, config.user, config.author, config.org)
        prov = Provenance(
            session_id=os.environ.get("THREADLOOM_SESSION_ID") or f"cli:{_safe(who.user)}",
            vendor=detect_vendor(None, os.environ),
            project=str(project_root(os.environ, [], os.getcwd())),
            user=who.user,
            author=who.author,
            org=who.org,
        )
        result = fn(runtime, prov)
    finally:
        runtime.close()
    if as_json:
        out.print_json(json.dumps(result, default=str))
    else:
        out.print(result, markup=False, highlight=False)


def _safe(name: str) -> str:
    """A user name as the tail of a session id (letters, digits and . _ : - only)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:100]
