"""The parsed-file cache behind thread loads: a file is parsed again exactly when it changed (content,
inode, or only its ctime), never kept while it may still be changing, and never through a link."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from threadloom.threads.file_cache import RACY_NS, FileCache
from threadloom.threads.repository import Repository


def counting() -> tuple[FileCache[str], list[str]]:
    parsed: list[str] = []

    def parse(text: str, name: str) -> str:
        parsed.append(name)
        if text.startswith("broken"):
            raise ValueError("broken on purpose")
        return text

    return FileCache(parse, (ValueError,)), parsed


@pytest.mark.slow  # waits out the racy window (RACY_NS, 2 s)
def test_only_changed_files_are_parsed_again_and_a_hand_edit_is_always_seen(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    for name in ("a", "b", "c"):
        (folder / f"{name}.md").write_text(f"{name} one")
    (tmp_path / "outside.md").write_text("linked")
    (folder / "link.md").symlink_to(tmp_path / "outside.md")  # inside the repository: followed, never kept
    (folder / "bad.md").write_text("broken file")
    cache, parsed = counting()
    repo = Repository(tmp_path)

    values, problems = cache.load(repo, "t", ".md")
    assert values == {"a.md": "a one", "b.md": "b one", "c.md": "c one", "link.md": "linked"}
    assert problems == {"bad.md": "broken on purpose"}
    cache.load(repo, "t", ".md")
    assert len(parsed) == 10  # just written: within the racy window, nothing is kept yet
    time.sleep(RACY_NS / 1e9 + 0.1)
    cache.load(repo, "t", ".md")
    parsed.clear()
    again, problems = cache.load(repo, "t", ".md")
    assert parsed == ["link.md"] and again == values and problems == {"bad.md": "broken on purpose"}

    before = (folder / "b.md").stat()
    (folder / "b.md").write_text("b two")  # same size; the mtime put back: only the ctime moved
    os.utime(folder / "b.md", ns=(before.st_atime_ns, before.st_mtime_ns))
    (folder / "c.md").unlink()
    (folder / "d.md").write_text("d new")
    parsed.clear()
    changed, _ = cache.load(repo, "t", ".md")
    assert sorted(parsed) == ["b.md", "d.md", "link.md"]
    assert changed == {"a.md": "a one", "b.md": "b two", "d.md": "d new", "link.md": "linked"}


def test_a_folder_of_another_repository_is_its_own(tmp_path: Path) -> None:
    cache, _ = counting()
    for n in (1, 2):
        (tmp_path / f"r{n}" / "t").mkdir(parents=True)
        (tmp_path / f"r{n}" / "t" / "x.md").write_text(f"repo {n}")
    assert cache.load(Repository(tmp_path / "r1"), "t", ".md")[0] == {"x.md": "repo 1"}
    assert cache.load(Repository(tmp_path / "r2"), "t", ".md")[0] == {"x.md": "repo 2"}
