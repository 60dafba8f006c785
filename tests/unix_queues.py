"""What waits unread on a process's Unix sockets, as the kernel counts it (sock_diag, which `ss -x` reads).

A test that stops a daemon (SIGSTOP) and sends it a request through the bridge waits on this, not on a
sleep, to know that the request has left the bridge: the bytes sit in the daemon's socket, unread.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
UDIAG_SHOW_RQLEN = 0x10
UNIX_DIAG_RQLEN = 4
TCP_LISTEN = 10  # a listening socket's "queue" counts connections, not bytes


def socket_inodes(pid: int) -> set[int]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            found.add(int(target[len("socket:[") : -1]))
    return found


def _unread_by_inode() -> dict[int, int]:
    """Every connected Unix socket's inode and the bytes waiting in it, unread."""
    request = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, UDIAG_SHOW_RQLEN, 0, 0)
    header = struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
    found: dict[int, int] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as diag:
        diag.sendall(header + request)
        while True:
            data = diag.recv(1 << 20)
            at = 0
            while at + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, at)
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR:
                    raise OSError(-struct.unpack_from("=i", data, at + 16)[0], "sock_diag refused the dump")
                state, inode = struct.unpack_from("=xxBxI", data, at + 16)
                attr = at + 16 + 16
                while attr + 4 <= at + length:
                    attr_len, attr_kind = struct.unpack_from("=HH", data, attr)
                    if attr_kind == UNIX_DIAG_RQLEN and state != TCP_LISTEN:
                        found[inode] = struct.unpack_from("=I", data, attr + 4)[0]
                    attr += (attr_len + 3) & ~3
                at += (length + 3) & ~3


def unread_bytes(pid: int) -> int:
    """The bytes waiting, unread, in the connected Unix sockets process `pid` holds."""
    mine = socket_inodes(pid)
    return sum(n for inode, n in _unread_by_inode().items() if inode in mine)
