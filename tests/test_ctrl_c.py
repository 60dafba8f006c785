"""Ctrl-C at any moment of a CLI command, from its first imports on: a shell sees status 130, no traceback.

The command exits 130 itself, or dies of the SIGINT, which a shell also reports as 130. Python 3.11 does
the latter after a Ctrl-C that landed inside `exec` of a string (dataclasses builds its methods that way,
so this happens during imports), even though the KeyboardInterrupt was caught.

"Its first imports" are those of `threadloom.entry.main`, which catches the interrupt: the test waits for the
first import after `threadloom.entry`'s (`-X importtime` reports each). A fixed 0.05 s after the start landed,
on a loaded machine, inside Python's own start-up (`site`), where no program can catch it: "Fatal Python error:
init_import_site", exit 1.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import PY, env_for, wait_for


def in_main(lines: list[str]) -> bool:
    """An import finished after threadloom.entry's: the command runs inside `main`."""
    names = [line.rsplit("|", 1)[-1].strip() for line in list(lines) if line.startswith("import time:")]
    return "threadloom.entry" in names and names[-1] != "threadloom.entry"


@pytest.mark.parametrize("after_s", [0.0, 0.1, 0.25])  # stats takes about 0.9 s here: still running
def test_an_interrupted_command_exits_130_without_a_traceback(home: Path, after_s: float) -> None:
    with subprocess.Popen(
        [PY, "-X", "importtime", "-m", "threadloom", "stats"], env=env_for(home), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        # a test runner may start children with SIGINT ignored; a terminal never does
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as proc:  # fmt: skip
        lines: list[str] = []
        reader = threading.Thread(target=lambda: [lines.append(line) for line in proc.stderr or ()], daemon=True)
        reader.start()
        wait_for(lambda: in_main(lines) or proc.poll() is not None, timeout=60, what="threadloom's own imports")
        time.sleep(after_s)  # where in them the Ctrl-C lands
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        reader.join(timeout=60)
    err = "".join(line for line in lines if not line.startswith("import time:"))
    assert proc.returncode in (130, -signal.SIGINT), err
    assert "threadloom: interrupted" in err or proc.returncode == -signal.SIGINT, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
