"""Fixtures the learning tests share: a CLI runtime over a real store in a temp home, a temp folder standing
in for the user's home with Claude Code and Codex installed (so a skill is mirrored into `.claude/skills` and
`.agents/skills`), and the library writing into both. A test module takes them by naming them at module level
(`runtime = learning_fixtures.runtime`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sqlite_template import fresh_home
from threadloom.config import Settings
from threadloom.learning.library import Library
from threadloom.runtime import Runtime, open_runtime


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    rt = open_runtime(Settings(home=fresh_home(tmp_path / "home"), embedder="none"), "cli")
    yield rt
    rt.close()


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    return home


@pytest.fixture
def lib(runtime: Runtime, user_home: Path) -> Library:
    return Library(runtime, client_home=user_home)


def tree(*roots: Path) -> dict[str, bytes]:
    """Every file under `roots` by its path, but the store's and the locks."""
    out: dict[str, bytes] = {}
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.is_file() and not p.name.startswith("threadloom.db") and not p.name.endswith(".lock"):
                out[str(p)] = p.read_bytes()
    return out
