"""The `threadloom` console script.

`threadloom serve` with no options is what every agent CLI starts, once per
conversation, so it goes straight to the standard-library bridge without
loading the CLI framework. Everything else goes through the typer app.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["serve"]:
        from threadloom.daemon.bridge import main as bridge_main

        sys.exit(bridge_main())
    from threadloom.cli import run

    run()
