"""Reading a growing file exactly: identity checks against the cursor, and complete lines only.

Memory stays bounded whatever the file holds: bytes are read in chunks, a line longer than
`max_line` is discarded chunk by chunk (never assembled) and reported, and one call reads at most
`budget` bytes before handing control back.
"""

from __future__ import annotations

import copy
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from threadloom.transcripts.model import Cursor, Problem

HEAD = 4096  # bytes hashed to recognise a file rewritten in place
CHUNK = 1 << 20
MAX_LINE = 8 << 20  # a record longer than this is skipped (a pasted image, a runaway tool output)
BUDGET = 4 << 20  # bytes read per parse call: bounds the messages one result holds


@dataclass
class Opened:
    file: BinaryIO
    cursor: Cursor  # positioned where reading resumes; `offset` 0 on a new or replaced file
    restarted: Problem | None  # why an old cursor was dropped, if it was


def _head_sha(file: BinaryIO, length: int) -> str:
    file.seek(0)
    return hashlib.sha256(file.read(length)).hexdigest()


def open_checked(path: Path, cursor: Cursor | None) -> Opened | Problem:
    """Open `path` for reading from `cursor`, or from the start when the cursor no longer describes
    this file: another inode (rotated or replaced by rename), a shorter file (truncated), or a
    different head (rewritten in place). A vanished file, a FIFO or a device is a Problem, not a hang."""
    name = str(path)
    try:
        # O_NONBLOCK: opening a FIFO planted where a transcript was expected must not block.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return Problem(name, "vanished", detail="the file disappeared before it could be read")
    except OSError as exc:
        return Problem(name, "unreadable", detail=exc.strerror or str(exc))
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return Problem(name, "not_regular", detail="not a regular file")
    file = os.fdopen(fd, "rb", buffering=0)
    head_len = min(HEAD, info.st_size)
    restarted: Problem | None = None
    offset, skipping, state = 0, False, {}
    if cursor is not None:
        if not (0 <= cursor.head_len <= HEAD and cursor.offset >= 0):
            restarted = Problem(name, "replaced", detail="a damaged cursor: reading the file from the start")
        elif (cursor.device, cursor.inode) != (info.st_dev, info.st_ino):
            restarted = Problem(name, "replaced", detail="a new file (inode) at this path: reading it from the start")
        elif info.st_size < cursor.offset:
            restarted = Problem(name, "truncated", cursor.offset, "the file shrank: reading it from the start")
        elif _head_sha(file, cursor.head_len) != cursor.head_sha:
            restarted = Problem(name, "replaced", detail="the file was rewritten in place: reading it from the start")
        else:
            offset, skipping, state = cursor.offset, cursor.skipping, copy.deepcopy(dict(cursor.state))
    fresh = Cursor(
        path=name,
        device=info.st_dev,
        inode=info.st_ino,
        size=info.st_size,
        mtime_ns=info.st_mtime_ns,
        offset=offset,
        head_len=head_len,
        head_sha=_head_sha(file, head_len),
        skipping=skipping,
        state=state,
    )
    return Opened(file, fresh, restarted)


class LineReader:
    """Complete lines from `offset` on. `position` is always the byte after the last line handed out
    (or discarded), so a caller that stops early, or a line still being written, loses nothing."""

    def __init__(self, file: BinaryIO, offset: int, skipping: bool, max_line: int = MAX_LINE) -> None:
        self.file = file
        self.position = offset
        self.skipping = skipping
        self.max_line = max_line
        self.at_eof = False
        self.tail = 0  # at EOF, bytes after the last newline: a record being written, or cut
        self.oversize: list[int] = []  # offsets of lines skipped for length

    def lines(self, budget: int = BUDGET) -> Iterator[tuple[int, bytes]]:
        """(offset, line without its newline) for each complete, non-empty line, until EOF or until
        about `budget` bytes were read. A partial last line is left for the next call."""
        self.file.seek(self.position)
        buf = bytearray()
        base = self.position  # file offset of buf[0]
        read = 0
        step = max(1, min(CHUNK, budget))
        progressed = False  # past the budget, read on until one line is out: a call always moves
        while read < budget or not progressed:
            chunk = self.file.read(step)
            if not chunk:
                self.at_eof = True
                self.tail = 0 if self.skipping else len(buf)
                return
            read += len(chunk)
            if self.skipping:
                newline = chunk.find(b"\n")
                progressed = True
                if newline < 0:
                    self.position += len(chunk)
                    base = self.position
                    continue
                self.skipping = False
                self.position += newline + 1
                base = self.position
                chunk = chunk[newline + 1 :]
            searched = len(buf)  # bytes already known to hold no newline
            buf += chunk
            start = 0
            while (newline := buf.find(b"\n", max(start, searched))) >= 0:
                line = bytes(buf[start:newline]).rstrip(b"\r")
                line_offset = base + start
                start = newline + 1
                self.position = base + start
                progressed = True
                if line.strip():
                    yield line_offset, line
            del buf[:start]
            base += start
            if len(buf) > self.max_line:
                self.oversize.append(base)
                progressed = True
                self.skipping = True
                self.position = base + len(buf)
                base = self.position
                buf.clear()
