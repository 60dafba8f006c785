"""Ctrl-C at any moment of a CLI command, from its first imports on: exit 130, no traceback."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import PY, env_for


@pytest.mark.parametrize("after_s", [0.05, 0.15, 0.3])  # status takes about 0.9 s here: still running
def test_an_interrupted_command_exits_130_without_a_traceback(home: Path, after_s: float) -> None:
    proc = subprocess.Popen(
        [PY, "-m", "threadloom", "status"], env=env_for(home), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a test runner may start children with SIGINT ignored; a terminal never does
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
