"""Talking to a running daemon from the CLI: status, stop and recall. Standard library only."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from threadloom.daemon import protocol


def request(socket_path: Path, op: str, timeout: float = 5.0, **fields: Any) -> dict[str, Any] | None:
    """Send one control request (`fields` are the op's arguments); None when no daemon answers on the socket,
    or when the request is too large for the daemon's header limit."""
    message = protocol.encode({"kind": protocol.CONTROL, "op": op, **fields})
    if len(message) > protocol.MAX_HEADER_BYTES:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(socket_path))
        sock.sendall(message)
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, BrokenPipeError, TimeoutError):
        return None
    finally:
        sock.close()
    if not data.strip():
        return None
    return protocol.decode(data)


def pid_alive(pid: int) -> bool:
    """Whether a process runs under `pid` (a zombie awaiting its reaper does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def stop(socket_path: Path, wait_s: float = 10.0) -> dict[str, Any] | None:
    """Ask the daemon to stop and wait for its process to end; None when none was running."""
    reply = request(socket_path, "stop")
    if reply is None:
        return None
    pid = int(reply.get("pid", 0))
    deadline = time.monotonic() + wait_s
    while pid and pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    reply["stopped"] = not (pid and pid_alive(pid))
    return reply
