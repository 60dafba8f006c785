"""Attack from outside (issue 18): `threadloom style show` run by an agent's shell is a model path (README:
a shell command applies the policy for the vendor its environment names). From a Codex shell under
THREADLOOM_EGRESS=same-vendor the capsule left out a Claude-recorded profile item but did not say so: the one
withheld line was in the `style` tool's answer and missing from the command's text. Real server for the
writes, the real CLI for the reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import cli, serve_params

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_style_show_says_what_the_policy_withheld_and_only_then(home: Path) -> None:
    (home / ".env").write_text("THREADLOOM_EGRESS=same-vendor\nTHREADLOOM_USER=ada\n")
    params = serve_params(home, "--in-process", THREADLOOM_TOOLSET="user_model", CLAUDECODE="1")
    async with Client(params, mode="legacy") as claude:
        added = await claude.call_tool("style_hint", {"profile": ["conclusions first"]})
        assert not added.is_error, added
    codex = cli(home, "style", "show", CODEX_HOME=str(home / "codex"))
    assert codex.returncode == 0, codex.stderr
    assert "conclusion" not in codex.stdout.lower()
    assert "egress policy=same-vendor: personal memory withheld from openai (1 profile" in codex.stdout
    own = cli(home, "style", "show", CLAUDECODE="1")
    assert "conclusion" in own.stdout.lower() and "withheld" not in own.stdout
