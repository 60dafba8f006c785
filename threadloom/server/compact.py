"""tools/list as an agent pays for it: the SDK's schemas without what tells a model nothing.

Pydantic writes a `title` for every argument (its name, capitalised), wraps every optional argument in
`anyOf: [{T}, {type: null}]` with `default: null`, and gives every tool a generic output schema. Those
are about a third of the tokens of the input schemas. What is left says the same: an argument that is
not required may be omitted, a flag is off unless given, an absent hint has the value MCP defines.
Only the listing changes; arguments are still validated by the model the SDK built from each signature.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from mcp_types import Tool

from threadloom.clock import EARLIEST_MS, LATEST_MS

_NULL = {"type": "null"}


# What MCP says an absent hint means (https://modelcontextprotocol.io/specification/2025-06-18/schema#toolannotations).
_SPEC_DEFAULTS = {"read_only_hint": False, "idempotent_hint": False}
_INT64 = 2**63 - 1
_LIMITS = frozenset({"maxLength", "minLength", "maxItems", "minItems"})


def compact_tool(tool: Tool) -> Tool:
    annotations = tool.annotations
    if annotations is not None:
        same = {"title": None} if annotations.title == tool.title else {}
        same |= {k: None for k, v in _SPEC_DEFAULTS.items() if getattr(annotations, k) is v}
        if annotations.read_only_hint:  # MCP: the other two hints mean something only for a tool that writes
            same |= {"destructive_hint": None, "idempotent_hint": None}
        annotations = annotations.model_copy(update=same)
    output = tool.output_schema
    if output is not None and _generic_object(output):
        output = None
    return tool.model_copy(
        update={
            "description": _unwrapped(tool.description),
            "input_schema": compact_schema(tool.input_schema),
            "output_schema": output,
            "annotations": annotations,
        }
    )


def _unwrapped(text: str | None) -> str | None:
    """A docstring's paragraphs on one line each: its line breaks are where the source wrapped."""
    if text is None:
        return None
    return "\n".join(" ".join(paragraph.split()) for paragraph in text.split("\n\n"))


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with titles, null branches of optional arguments and null defaults left out, `$ref`s inlined."""
    return _compact(schema, schema.get("$defs", {}))


def _compact(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
        schema = {**defs[ref[8:]], **{k: v for k, v in schema.items() if k != "$ref"}}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("title", "$defs"):
            continue
        if key == "properties":
            out[key] = {name: _compact(prop, defs) for name, prop in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _compact(value, defs)
        elif key in ("anyOf", "oneOf", "allOf"):
            out[key] = [_compact(branch, defs) for branch in value]
        elif (key == "default" and value is False) or (key == "maximum" and value == _INT64) or key in _LIMITS:
            continue  # a flag is off unless given; 64 bits bound every integer; a size limit is named when hit
        else:
            out[key] = value
    return _unwrap_optional(out)


def _unwrap_optional(schema: dict[str, Any]) -> dict[str, Any]:
    """`anyOf: [{T}, {type: null}]` with `default: null` is an argument that may be left out: plain T."""
    if "default" in schema and schema["default"] is None and "anyOf" not in schema:
        return {k: v for k, v in schema.items() if k != "default"}
    branches = schema.get("anyOf")
    if not isinstance(branches, list) or _NULL not in branches or schema.get("default", 0) is not None:
        return schema
    rest = [b for b in branches if b != _NULL]
    outer = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
    if len(rest) == 1:
        return {**rest[0], **outer}
    if all(set(b) == {"type"} and isinstance(b["type"], str) for b in rest):
        return {"type": [b["type"] for b in rest], **outer}
    return {"anyOf": rest, **outer}


def _generic_object(schema: dict[str, Any]) -> bool:
    """The output schema of a tool that returns `dict[str, Any]`: any object, which says nothing."""
    return {k: v for k, v in schema.items() if k != "title"} in (
        {"type": "object"},
        {"type": "object", "additionalProperties": True},
    )


def iso_times(value: Any, key: str = "") -> Any:
    """A tool's result with every time (a key `at`, `*_at`, `valid_from`, `valid_to` holding epoch ms) as
    ISO 8601 with the offset, to the millisecond so that it can be passed back unchanged."""
    if isinstance(value, dict):
        return {k: iso_times(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [iso_times(v, key) for v in value]
    timed = key == "at" or key.endswith("_at") or key in ("valid_from", "valid_to")
    if timed and isinstance(value, int) and not isinstance(value, bool) and EARLIEST_MS <= value <= LATEST_MS:
        return datetime.fromtimestamp(value / 1000).astimezone().isoformat(timespec="milliseconds")
    return value
