"""`threadloom hook session-start|session-end|pre-compact [--client NAME]`. Standard library only.

An agent CLI runs this at a session's edges with its hook JSON on stdin. It asks the warm daemon (over
its socket, starting it when none runs) to record the event and, at session start, to render the brief
for the session's folder and the hook's user; then it prints what that client injects. It fails open:
whatever goes wrong, it prints nothing on stdout, says why on stderr and exits 0, so the agent's
session starts as if threadloom were not there.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from threadloom import __version__
from threadloom.agents import FORWARDED_ENV
from threadloom.daemon import protocol
from threadloom.daemon.launch import ABSENT, START_TIMEOUT_S, LaunchError, until_served
from threadloom.home import HomeLayout, default_home
from threadloom.hooks.clients import CLIENTS, EVENTS, Event, guess_client, injects, parse_input

USAGE = f"usage: threadloom hook {{{'|'.join(EVENTS)}}} [--client {'|'.join(CLIENTS)}]"
# The whole hook, a cold daemon start included (as long as a bridge waits for one); the clients' own limits
# are 30-60 s, and a client that gives up first still starts its session.
TIMEOUT_S = START_TIMEOUT_S
STDIN_TIMEOUT_S = 2.0  # clients write their JSON and close stdin at once
MAX_STDIN = 1 << 20
MAX_REPLY = 8 << 20
MAX_ANCESTORS = 8


class HookFailed(Exception):
    """Why the hook did nothing; printed on stderr."""


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    try:
        out = run(argv, sys.stdin, os.environ)
    except HookFailed as exc:
        print(f"threadloom hook: {exc} (nothing injected)", file=sys.stderr)
        return 0
    except Exception as exc:  # noqa: BLE001 - failing open is the contract: the agent's session must start
        print(f"threadloom hook: unexpected {type(exc).__name__}: {exc} (nothing injected)", file=sys.stderr)
        return 0
    if out:
        try:
            sys.stdout.write(out + "\n")
            sys.stdout.flush()
        except OSError as exc:  # the client stopped reading (it gave up on the hook): its session goes on
            print(f"threadloom hook: could not write the brief: {exc}", file=sys.stderr)
            with contextlib.suppress(OSError):  # so that the interpreter's own flush at exit stays quiet
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    return 0


def run(argv: list[str], stdin: Any, environ: Mapping[str, str]) -> str | None:
    """What to print on stdout for this hook, or None."""
    event, client, vendor = _arguments(argv, environ)
    hook = parse_input(_read_json(stdin))
    inject = injects(client, event)
    fields = {
        "event": event,
        "client": client,
        "vendor": vendor,
        "client_session": hook.session,
        "cwd": hook.cwd or os.getcwd(),
        "source": hook.source,
        "reason": hook.reason,
        "trigger": hook.trigger,
        "transcript": hook.transcript,
        "render": inject,
        "ancestors": _ancestors(),
        "env": {k: environ[k] for k in FORWARDED_ENV if k in environ},
    }
    reply = ask_daemon(HomeLayout(default_home(environ)), fields)
    if not reply.get("ok"):
        raise HookFailed(str(reply.get("error") or "the daemon refused the hook"))
    text = reply.get("text")
    if not inject:
        return None
    if not isinstance(text, str) or not text.strip():
        raise HookFailed("the daemon rendered no brief")
    return CLIENTS[client].output(event, text)


def _arguments(argv: list[str], environ: Mapping[str, str]) -> tuple[Event, str, str]:
    if not argv or argv[0] not in EVENTS:
        raise HookFailed(f"unknown hook {argv[0] if argv else '(none)'!r}; {USAGE}")
    event: Event = argv[0]  # narrowed by the check against EVENTS just above
    rest = argv[1:]
    if not rest:
        client, vendor = guess_client(environ)
        return event, client, vendor
    if len(rest) == 2 and rest[0] == "--client" and rest[1] in CLIENTS:
        return event, rest[1], CLIENTS[rest[1]].vendor
    raise HookFailed(f"unexpected arguments {' '.join(rest)!r}; {USAGE}")


def _read_json(stdin: Any) -> dict[str, Any]:
    """The client's hook JSON: one object, read within STDIN_TIMEOUT_S and MAX_STDIN bytes."""
    if stdin is None or stdin.isatty():
        raise HookFailed("no hook JSON on stdin (the agent CLI gives it; a terminal does not)")
    fd = stdin.fileno()
    deadline = time.monotonic() + STDIN_TIMEOUT_S
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise HookFailed(f"stdin was not closed within {STDIN_TIMEOUT_S:.0f}s")
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_STDIN:
            raise HookFailed(f"the hook JSON on stdin is over {MAX_STDIN} bytes")
    if not data.strip():
        raise HookFailed("stdin was empty: expected the agent CLI's hook JSON")
    try:
        payload = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HookFailed(f"stdin is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise HookFailed(f"the hook JSON is a {type(payload).__name__}, not an object")
    return payload


def _ancestors() -> list[int]:
    """This process's ancestors, nearest first: the agent CLI that runs the hook is among them, and the daemon
    finds its session by that pid (a bridge records its agent's pid). Empty where /proc does not exist."""
    found: list[int] = []
    pid = os.getppid()
    while pid > 1 and len(found) < MAX_ANCESTORS:
        found.append(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def ask_daemon(layout: HomeLayout, fields: dict[str, Any]) -> dict[str, Any]:
    """The daemon's reply to one `hook` control request, starting the daemon when none listens."""
    message = protocol.encode({"kind": protocol.CONTROL, "op": "hook", "version": __version__, **fields})
    if len(message) > protocol.MAX_HEADER_BYTES:
        raise HookFailed("the hook request is over the daemon's header limit")
    deadline = time.monotonic() + TIMEOUT_S
    try:
        return until_served(layout, lambda: _send(layout.socket, message, deadline), TIMEOUT_S)
    except LaunchError as exc:
        raise HookFailed(str(exc)) from None
    except OSError as exc:  # a home that cannot be made or written: no daemon can start there
        raise HookFailed(f"cannot start the daemon: {exc}") from None


def _send(path: Path, message: bytes, deadline: float) -> dict[str, Any] | str:
    """The reply, or ABSENT when nobody listens. Sent once: after a timeout the daemon may have recorded it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            return ABSENT
        sock.sendall(message)
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_REPLY:
                raise HookFailed("the daemon's reply is oversized")
    except TimeoutError:
        raise HookFailed(f"the daemon did not answer within {TIMEOUT_S:.0f}s") from None
    finally:
        sock.close()
    if not data.strip():
        raise HookFailed("the daemon closed the connection without answering")
    try:
        return protocol.decode(data)
    except ValueError:
        raise HookFailed(f"something other than a threadloom daemon answers on {path}: {data[:80]!r}") from None
