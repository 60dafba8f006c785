"""A full disk: reads keep working, writes fail with a clear retryable error, and the daemon survives.

The home is a small tmpfs the test mounts (it needs root; elsewhere the test is skipped and says why).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import HOMES, serve_params, stop_everything, structured

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def small_home() -> Iterator[Path]:
    mount = Path(tempfile.mkdtemp(prefix="tlfull", dir="/tmp"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.decode().strip() or 'not root'})")
    HOMES.append(mount)
    try:
        yield mount
    finally:
        stop_everything(mount)
        subprocess.run(["umount", "-l", str(mount)], check=False)
        with contextlib.suppress(OSError):
            mount.rmdir()


def fill(folder: Path) -> Path:
    """Write a file until the filesystem refuses another byte."""
    filler = folder / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
                os.fsync(out.fileno())
        except OSError:
            pass
    with contextlib.suppress(OSError), open(filler, "ab") as out:  # the last partial block too
        while True:
            out.write(b"\0" * 512)
            out.flush()
            os.fsync(out.fileno())
    return filler


async def test_a_full_disk_fails_writes_clearly_keeps_reads_and_the_daemon(small_home: Path, tmp_path: Path) -> None:
    params = serve_params(small_home, THREADLOOM_ROOT=str(tmp_path), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as first:
        kept = structured(await first.call_tool("memory_store", {"content": "the cache is redis, port 6380"}))
        filler = fill(small_home)
        status = await first.call_tool("status", {})
        assert not status.is_error, status
        recalled = await first.call_tool("memory_recall", {"query": "which cache"})
        assert not recalled.is_error, recalled
        assert [m["id"] for m in structured(recalled)["memories"]] == [kept["id"]]
        refused = await first.call_tool("memory_store", {"content": "a fact that cannot be written now"})
        assert refused.is_error
        body = structured(refused)
        assert "full" in body["error"] and body["retryable"] is True
    async with Client(params, mode="legacy") as second:  # the first session's end did not take the daemon down
        assert not (await second.call_tool("memory_search", {"query": "cache"})).is_error
        searched = structured(await second.call_tool("memory_search", {"query": "cannot be written"}))
        assert searched["memories"] == []  # refused means not written
        filler.unlink()
        again = await second.call_tool("memory_store", {"content": "a fact that cannot be written now"})
        assert not again.is_error, again
