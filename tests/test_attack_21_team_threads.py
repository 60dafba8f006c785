"""A team server's thread resources and prompts say that threads live on the laptop (issue 21, from outside).

They answered "the project folder shop does not exist" (the project name taken for a folder of the server's),
as an internal error (-32603) for the resources.
"""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from tests.team_server import Team, team_client

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]


async def test_thread_resources_and_prompts_point_at_serve_remote(team: Team) -> None:
    async with team_client(team, "bob", "shop") as c:
        for uri in ("threadloom://context", "threadloom://tree?project=garden", "threadloom://thread/1"):
            with pytest.raises(MCPError) as refused:
                await c.read_resource(uri)
            assert refused.value.error.code == INVALID_PARAMS, uri
            assert "a team server keeps no threads" in refused.value.error.message and "--remote" in str(refused.value)
        for prompt in ("context", "tree"):
            with pytest.raises(MCPError) as refused:
                await c.get_prompt(prompt, {})
            assert "a team server keeps no threads" in refused.value.error.message, prompt
        assert "scope" in (await c.read_resource("threadloom://status")).contents[0].text  # the rest still serves
