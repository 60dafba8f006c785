"""`threadloom check`: start the server the way an agent CLI does, and show that it answers."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import anyio
import typer

from threadloom.cli.app import out, settings


async def _probe(in_process: bool) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    args = ["-m", "threadloom", "serve", *(["--in-process"] if in_process else [])]
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
    async with Client(params, mode="legacy") as client:
        tools = await client.list_tools()
        result = await client.call_tool("status", {})
    if result.is_error or result.structured_content is None:
        raise RuntimeError(f"status failed: {result.content}")
    return {"tools": [t.name for t in tools.tools], "status": result.structured_content}


def check(
    in_process: Annotated[bool, typer.Option("--in-process", help="Check the in-process server instead.")] = False,
) -> None:
    """Run `threadloom serve` as an MCP client would, list its tools and call `status`."""
    settings()
    try:
        seen = anyio.run(_probe, in_process)
    except Exception as exc:  # noqa: BLE001 - whatever broke, the user needs to see it
        out.print("[red]threadloom check failed:[/red] ", end="")
        out.print(str(exc), markup=False, highlight=False)
        raise typer.Exit(1) from None
    st = seen["status"]
    out.print("[green]threadloom works.[/green]")
    out.print(
        f"  server    {st['server']['mode']} (pid {st['server']['pid']}), threadloom {st['versions']['threadloom']}"
    )
    out.print(f"  store     {st['store']['path']} (schema {st['store']['schema_version']})")
    out.print(f"  session   {st['session']['id']} ({st['session']['vendor']}) in {st['session']['project']}")
    out.print(f"  tools     {', '.join(seen['tools'])}")
    out.print("Add it to your agent: see README.md, 'Connect your agent'.")
