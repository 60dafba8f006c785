"""Ctrl-C at any moment of a CLI command, from its first imports on: a shell sees status 130, no traceback.

The command exits 130 itself, or dies of the SIGINT, which a shell also reports as 130. Python 3.11 does
the latter after a Ctrl-C that landed inside `exec` of a string (dataclasses builds its methods that way,
so this happens during imports), even though the KeyboardInterrupt was caught.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import PY, env_for


@pytest.mark.parametrize("after_s", [0.05, 0.15, 0.3])  # stats takes about 0.9 s here: still running
def test_an_interrupted_command_exits_130_without_a_traceback(home: Path, after_s: float) -> None:
    proc = subprocess.Popen(
        [PY, "-m", "threadloom", "stats"], env=env_for(home), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a test runner may start children with SIGINT ignored; a terminal never does
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (130, -signal.SIGINT), err
    assert "threadloom: interrupted" in err or proc.returncode == -signal.SIGINT, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
