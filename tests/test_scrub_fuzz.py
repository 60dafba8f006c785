"""The scrub invariant from outside: every tool the server lists is called through a real MCP client with a
fresh credential in its string arguments, three ways (every string a secret, so errors that quote an
argument are journaled; ids valid and every other string a secret; the required arguments valid plus one
string a secret), and no credential may reach the home's files (the database and its WAL included) or the
repository's thread files. Tools that start processes or delete are left out."""

from __future__ import annotations

import secrets
import string
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.helpers import serve_params, structured

pytestmark = pytest.mark.anyio
SKIPPED = ("spawn", "tournament", "memory_delete", "thread_delete", "forget")
TIMES = {"since", "until", "as_of", "valid_from", "valid_until", "created_since", "created_until", "day"}


class Secrets:
    def __init__(self) -> None:
        self.made: dict[str, str] = {}  # secret -> where it went

    def new(self, where: str) -> str:
        value = "AKIA" + "".join(secrets.choice(string.ascii_uppercase + "234567") for _ in range(16))
        self.made[value] = where
        return value


def resolve(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        if "$ref" in schema:
            return resolve(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: resolve(v, defs) for k, v in schema.items()}
    if isinstance(schema, list):
        return [resolve(v, defs) for v in schema]
    return schema


def argument(schema: dict[str, Any], name: str, where: str, made: Secrets, ids: dict[str, str] | None) -> Any:
    """A value for one argument: a secret in every string, except ids and times when `ids` is given."""
    if "anyOf" in schema:
        chosen: dict[str, Any] = next((s for s in schema["anyOf"] if s.get("type") != "null"), {})
        return argument(chosen, name, where, made, ids)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "string" if "string" in kind else kind[0]
    if "enum" in schema:
        return schema["enum"][0]
    if kind in ("integer", "number"):
        return max(schema.get("minimum", 1), 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return [argument(schema.get("items", {}), name, where, made, ids)]
    if kind == "object" and schema.get("properties"):
        return {k: argument(v, f"{name}.{k}", where, made, ids) for k, v in schema["properties"].items()}
    if ids is not None and name in TIMES:
        return "2026-11-01"
    if ids is not None and name in ids:
        return ids[name]
    return f"x {made.new(f'{where}.{name}')}"


async def test_no_tool_argument_reaches_the_disk_unscrubbed(home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    made = Secrets()
    echoed, succeeded = 0, 0
    params = serve_params(home, "--in-process", THREADLOOM_SESSION_ID="fz-1", THREADLOOM_TOOLSET="full",
                          THREADLOOM_ROOT=str(repo))  # fmt: skip
    async with Client(params, mode="legacy") as client:
        await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        first = structured(await client.call_tool("memory_store", {"content": "we deploy on fridays"}))["id"]
        second = structured(await client.call_tool("memory_store", {"content": "the cart uses postgres"}))["id"]
        ids = {"memory_id": first, "target": second, "restore": second, "thread_id": "main", "parent": "main",
               "new_parent": "main", "to": "fz-1"}  # fmt: skip
        tools = [t for t in (await client.list_tools()).tools if not any(s in t.name for s in SKIPPED)]
        assert len(tools) >= 20
        calls: list[tuple[str, dict[str, Any]]] = []
        for tool in tools:
            schema = resolve(tool.input_schema, tool.input_schema.get("$defs", {}))
            props: dict[str, Any] = {k: v for k, v in schema.get("properties", {}).items() if k != "idempotency_key"}
            for mode, given in (("all", None), ("ids", ids)):
                calls.append(
                    (tool.name, {k: argument(v, k, f"{mode}:{tool.name}", made, given) for k, v in props.items()})
                )
            required = {k: argument(props[k], k, f"one:{tool.name}", made, ids) for k in schema.get("required", [])}
            for name, prop in props.items():
                if name not in required and name not in ids and name not in TIMES:
                    calls.append((tool.name, required | {name: argument(prop, name, f"one:{tool.name}", made, None)}))
        for name, args in calls:
            result = await client.call_tool(name, args)
            text = str(result.content)
            echoed += result.is_error and any(s in text for s in made.made)
            succeeded += not result.is_error
    assert echoed > 10 and succeeded > 20  # the secrets reached the server, and many calls went through
    files = [p for p in home.rglob("*") if p.is_file()] + [p for p in (repo / ".threadloom").rglob("*") if p.is_file()]
    disk = b"".join(p.read_bytes() for p in files)
    leaked = [where for value, where in made.made.items() if value.encode() in disk or value.lower().encode() in disk]
    assert leaked == []
