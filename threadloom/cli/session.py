"""Running one service call from the terminal: a runtime for the command, the provenance of a
terminal session (`cli`, or THREADLOOM_SESSION_ID), and the result printed."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from threadloom.cli.app import out, settings
from threadloom.identity import Provenance, detect_vendor, project_root
from threadloom.runtime import Runtime, open_runtime


def run_in_session(fn: Callable[[Runtime, Provenance], Any], as_json: bool = True) -> None:
    runtime = open_runtime(settings(), "cli")
    try:
        prov = Provenance(
            session_id=os.environ.get("THREADLOOM_SESSION_ID") or "cli",
            vendor=detect_vendor(None, os.environ),
            project=str(project_root(os.environ, [], os.getcwd())),
        )
        result = fn(runtime, prov)
    finally:
        runtime.close()
    if as_json:
        out.print_json(json.dumps(result, default=str))
    else:
        out.print(result, markup=False, highlight=False)
