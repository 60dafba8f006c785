"""The layering and the start-up discipline, enforced."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "threadloom"
# Services, engines and storage: plain typed Python that no surface type may leak into.
INNER = [
    "config.py",
    "errors.py",
    "home.py",
    "identity.py",
    "runtime.py",
    "sessions.py",
    "status.py",
    "store",
    "memory",
    "search",
    "ingest",
    "usermodel",
    "style",
    "erasure",
    "learning",
    "health",
    "portable",
    "hygiene",
    "accounts",
    "consolidate",
]
SURFACE_MODULES = ("threadloom.server", "threadloom.cli", "threadloom.daemon", "threadloom.entry")
SURFACE_LIBRARIES = ("mcp", "mcp_types", "typer", "rich", "starlette", "uvicorn")
MAX_LINES = 400


def python_files(entries: list[str]) -> list[Path]:
    files: list[Path] = []
    for entry in entries:
        path = PACKAGE / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return files


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", python_files(INNER), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_services_and_storage_never_import_a_surface(path: Path) -> None:
    for name in imports_of(path):
        assert not name.startswith(SURFACE_MODULES), f"{path.name} imports {name}"
        assert name.split(".")[0] not in SURFACE_LIBRARIES, f"{path.name} imports {name}"


def test_the_bridge_and_the_hooks_import_only_the_standard_library() -> None:
    code = (
        "import sys, threadloom.entry, threadloom.daemon.bridge, threadloom.daemon.control, threadloom.hooks.run;"
        "top = {m.split('.')[0] for m in sys.modules};"
        "print(sorted(top - set(sys.stdlib_module_names) - {'threadloom', '__main__'}))"
    )
    # -S: no site hooks (editable-install finders, distutils shims) muddying the list.
    env = {"PYTHONPATH": str(PACKAGE.parent)}
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60, check=True, env=env
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_LINES
