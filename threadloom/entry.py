"""The `threadloom` console script.

`threadloom serve` with no options is what every agent CLI starts, once per
conversation, so it goes straight to the standard-library bridge without
loading the CLI framework. Everything else goes through the typer app.
"""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if args == ["serve"]:
        from threadloom.daemon.bridge import main as bridge_main

        sys.exit(bridge_main())
    if args == ["daemon", "run"]:
        # Bridges that start at once each spawn a candidate: the one that takes the lock goes on,
        # the others leave before importing anything heavy.
        lock_fd = _take_daemon_lock()
        if lock_fd is None:
            sys.exit(0)
        from threadloom.daemon.process import main as daemon_main
        from threadloom.errors import ThreadloomError

        try:
            sys.exit(daemon_main(lock_fd))
        except ThreadloomError as exc:
            print(f"threadloom: {exc.message}", file=sys.stderr)
            sys.exit(2)
    from threadloom.cli import run

    run()


def _take_daemon_lock() -> int | None:
    from threadloom.home import HomeLayout, default_home, try_lock

    layout = HomeLayout(default_home())
    layout.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return try_lock(layout.lock)
