"""Attack on export (issue 20): README and `--help` say it writes into a new or empty folder, but only a
folder already holding a .jsonl or .md was refused: `export --out ""` or `--out .` in a repository wrote the
user's private memories beside its sources, where the next `git add .` would commit them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import PY, cli, env_for, new_home


@pytest.mark.slow
@pytest.mark.parametrize("out", ["", ".", "src"])
def test_export_into_a_folder_that_is_not_empty_is_refused(tmp_path: Path, out: str) -> None:
    home, repo = new_home(), tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "main.py").write_text("print('hi')\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    stored = cli(home, "memory", "store", "the staging password rotates monthly", THREADLOOM_ROOT=str(repo))
    assert stored.returncode == 0, stored.stderr
    before = sorted(p.relative_to(repo) for p in repo.rglob("*") if ".git" not in p.parts)
    done = subprocess.run(
        [PY, "-m", "threadloom", "export", "--out", out], cwd=repo, env=env_for(home), capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "not empty" in done.stderr, (done.stdout, done.stderr)
    assert sorted(p.relative_to(repo) for p in repo.rglob("*") if ".git" not in p.parts) == before


@pytest.mark.slow
def test_export_into_an_empty_or_new_folder_still_works(tmp_path: Path) -> None:
    home = new_home()
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "empty", tmp_path / "new" / "deeper"):
        done = cli(home, "export", "--out", str(folder))
        assert done.returncode == 0, done.stderr
        assert (folder / "memories.jsonl").is_file()
