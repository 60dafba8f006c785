"""A missing optional dependency is a clear message naming the extra, not a traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers import PY, env_for

# Runs the real CLI with numpy made unimportable, as on an install without the `embed` extra.
WITHOUT_NUMPY = "import sys; sys.modules['numpy'] = None; sys.argv = ['threadloom', 'reindex']; " + (
    "from threadloom.entry import main; main()"
)


def test_reindex_without_the_embed_extra_says_which_extra_to_install(home: Path) -> None:
    done = subprocess.run(
        [PY, "-c", WITHOUT_NUMPY],
        env=env_for(home, THREADLOOM_EMBEDDER="local"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'threadloom[embed]'" in done.stderr and "numpy" in done.stderr
    assert "Traceback" not in done.stderr
