"""Finding transcript files under a client's folder without trusting the folder.

Symlinked directories are never entered (no loop can hang the walk, no link leads out of the
client's folder), a symlinked file is listed only when it resolves to a regular file inside the
same folder, and depth is bounded. The folder itself may be a symlink (dotfile managers do that).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path


def walk(root: Path, wanted: Callable[[tuple[str, ...]], bool], max_depth: int) -> Iterator[Path]:
    """Files under `root` whose path parts relative to it satisfy `wanted`, in sorted order."""
    real_root = os.path.realpath(root)
    if not os.path.isdir(real_root):
        return
    stack: list[tuple[str, tuple[str, ...]]] = [(str(root), ())]
    while stack:
        folder, parts = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            continue  # vanished or unreadable: the next pass sees it again
        folders: list[tuple[str, tuple[str, ...]]] = []
        for entry in entries:
            relative = (*parts, entry.name)
            try:
                if entry.is_dir(follow_symlinks=False):
                    if len(relative) < max_depth:
                        folders.append((entry.path, relative))
                elif entry.is_symlink():
                    target = os.path.realpath(entry.path)
                    inside = os.path.commonpath([real_root, target]) == real_root
                    if inside and os.path.isfile(target) and wanted(relative):
                        yield Path(entry.path)
                elif entry.is_file(follow_symlinks=False) and wanted(relative):
                    yield Path(entry.path)
            except (OSError, ValueError):
                continue
        stack.extend(reversed(folders))
