"""`threadloom check`: start the server the way an agent CLI does, and show that it answers."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import anyio
import typer
from rich.markup import escape

from threadloom.cli.app import out, settings

MODEL_WAIT_S = 60.0


async def _probe(in_process: bool) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    args = ["-m", "threadloom", "serve", *(["--in-process"] if in_process else [])]
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
    async with Client(params, mode="legacy") as client:
        tools = await client.list_tools()
        status = await _status(client)
        # The model loads after the first call: wait for it, so that what it cost is measured, not assumed.
        with anyio.move_on_after(MODEL_WAIT_S):
            while status["search"]["embedder"]["state"] == "loading":
                await anyio.sleep(0.1)
                status = await _status(client)
    return {"tools": [t.name for t in tools.tools], "status": status}


async def _status(client: Any) -> dict[str, Any]:
    result = await client.call_tool("status", {})
    if result.is_error or result.structured_content is None:
        raise RuntimeError(f"status failed: {result.content}")
    found: dict[str, Any] = result.structured_content
    return found


def search_lines(search: dict[str, Any]) -> list[str]:
    """Which search a user has, why, and what it costs, in two lines (shared with `doctor`)."""
    using, cost = search["using"], search.get("cost")
    if search["mode"] == "hybrid":
        first = f"hybrid: {using}"
    elif using.startswith("full-text only"):
        first = using
    else:
        first = f"full-text until the model is ready, then {using}"
    if cost and cost.get("resident_mb"):
        first += f"; loaded in {cost['load_s']} s, holds about {cost['resident_mb']} MB ({cost['measured']})"
    elif cost and cost.get("load_s") is not None:
        first += f"; it answered in {cost['load_s']} s at start ({cost['measured']})"
    return [first, search["why"]]


def check(
    in_process: Annotated[bool, typer.Option("--in-process", help="Check the in-process server instead.")] = False,
) -> None:
    """Run `threadloom serve` as an MCP client would, list its tools and call `status`.

    Says which search you have (hybrid with the local model or an endpoint, or full-text only, and why) and
    what the model costs, measured by the server: it waits for the model to load (up to a minute).
    """
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
    search, colour = st["search"], "green" if st["search"]["mode"] == "hybrid" else "yellow"
    first, why = search_lines(search)
    out.print(f"  search    [{colour}]{escape(first)}[/{colour}]\n            {escape(why)}")
    out.print(f"  tools     {', '.join(seen['tools'])}")
    out.print("Add it to your agent: see README.md, 'Connect your agent'.")
