"""What the tool surface costs an agent in every session, beside the anchors'.

Lists the tools of a real server (in-process, over stdio, as a client sees them) for the default and the
full toolset and counts tools/list (compact JSON, as sent) plus the server instructions in cl100k_base
tokens, and in bytes / 4, the unit the anchors' published figures use (their figures as published,
not measured here).

    python bench/tool_surface.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.helpers import serve_params
from threadloom import tokens

# Published by the anchors (issue 16): tokens, tools; measured there as bytes / 4.
ANCHORS = (
    ("Thread Keeper, all tools", 32_100, 144),
    ("Thread Keeper, core profile", 3_800, 20),
    ("ThreadMind", 1_100, None),
    ("style-memory", 2_000, None),
)


async def listed(toolset: str) -> tuple[list[dict[str, Any]], str]:
    home = Path(tempfile.mkdtemp(prefix="tlbench"))
    async with Client(serve_params(home, "--in-process", THREADLOOM_TOOLSET=toolset), mode="legacy") as client:
        tools = (await client.list_tools()).tools
        instructions = client.instructions or ""
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools], instructions


async def main() -> None:
    print(f"{'surface':<34}{'tools':>6}{'tokens':>9}{'bytes/4':>9}")
    for toolset in ("default", "full"):
        tools, instructions = await listed(toolset)
        wire = json.dumps({"tools": tools}, separators=(",", ":"))
        count = tokens.count(wire) + tokens.count(instructions)
        size = (len(wire.encode()) + len(instructions.encode())) // 4
        print(f"{'threadloom ' + toolset:<34}{len(tools):>6}{count:>9,}{size:>9,}")
    for name, count, tools_n in ANCHORS:
        print(f"{name:<34}{tools_n or '':>6}{'':>9}{count:>9,}")


if __name__ == "__main__":
    anyio.run(main)
