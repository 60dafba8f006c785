"""The `threadloom` console script.

`threadloom serve` with no options is what every agent CLI starts, once per
conversation, so it goes straight to the standard-library bridge without
loading the CLI framework; `threadloom hook ...`, which agent CLIs run at each
session's start, goes straight to the standard-library hooks the same way.
Everything else goes through the typer app.
"""

from __future__ import annotations

import contextlib
import sys


def main() -> None:
    try:
        _main(sys.argv[1:])
    except KeyboardInterrupt:
        # Ctrl-C: a write in flight is a transaction that did not commit; what committed stays. No traceback.
        print("threadloom: interrupted", file=sys.stderr)
        sys.exit(130)


def _main(args: list[str]) -> None:
    if args and args[0] not in ("version", "hook") and not {"--help", "-h"} & set(args):  # a hook fails open
        _check_home()
    if args == ["serve"]:
        from threadloom.daemon.bridge import main as bridge_main

        sys.exit(bridge_main())
    if args[:1] == ["hook"]:
        from threadloom.hooks.run import main as hook_main

        sys.exit(hook_main(args[1:]))
    if args[:2] == ["daemon", "run"] and (len(args) == 2 or (len(args) == 4 and args[2] == "--lock-fd")):
        # The daemon lock comes first, before anything heavy is imported: a bridge takes it and hands it
        # over (`--lock-fd`); a daemon started by hand takes it here, and leaves at once if it is held.
        lock_fd = _take_daemon_lock(int(args[3]) if len(args) == 4 and args[3].isdigit() else None)
        if lock_fd is None:
            sys.exit(0)
        from threadloom.daemon.process import main as daemon_main
        from threadloom.errors import ThreadloomError

        try:
            sys.exit(daemon_main(lock_fd))
        except ThreadloomError as exc:
            print(f"threadloom: {exc.message}", file=sys.stderr)
            sys.exit(2)
    for n, arg in enumerate(args, 1):
        if not _is_text(arg):  # bytes that are not UTF-8, which Python kept as lone surrogates (PEP 383)
            shown = arg.encode("utf-8", "surrogateescape")[:60]
            print(f"threadloom: argument {n} ({shown!r}) is not UTF-8 text; nothing was done", file=sys.stderr)
            sys.exit(2)
    from threadloom.cli import run

    run()


def _check_home() -> None:
    """A home that cannot be one (a file, a link to nothing, under a file) refused in one line, before anything
    tries to make it or a file in it."""
    from threadloom.home import default_home, home_problem

    problem = home_problem(default_home())
    if problem is not None:
        hint = "set THREADLOOM_HOME to a folder (or unset it for ~/.threadloom)"
        print(f"threadloom: {problem}; {hint}", file=sys.stderr)
        sys.exit(2)


def _is_text(arg: str) -> bool:
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _take_daemon_lock(inherited: int | None) -> int | None:
    """The daemon lock of this home: the inherited descriptor when it is that file and holds the lock,
    else a new one; None when another process holds it."""
    import fcntl
    import os

    from threadloom.home import HomeLayout, default_home, try_lock

    layout = HomeLayout(default_home())
    try:
        layout.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        print(f"threadloom: cannot make the home folder {layout.home}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(2)
    if inherited is not None:
        try:
            mine, lock = os.fstat(inherited), os.stat(layout.lock)
            if (mine.st_dev, mine.st_ino) == (lock.st_dev, lock.st_ino):
                fcntl.flock(inherited, fcntl.LOCK_EX | fcntl.LOCK_NB)  # already ours: this only confirms it
                os.set_inheritable(inherited, False)
                return inherited
        except OSError:
            pass
        with contextlib.suppress(OSError):
            os.close(inherited)
    return try_lock(layout.lock)
