"""Every tool failure becomes a structured result: {"error": ..., "retryable": bool}, isError set."""

from __future__ import annotations

import json

from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError

from threadloom.errors import ThreadloomError

# An error may quote an argument (an unknown id, say): a client's SDK drops an answer of over 1 MiB whole, so a
# multi-megabyte argument quoted back would leave it with no answer at all.
MAX_ERROR_CHARS = 2_000


def error_result(message: str, *, retryable: bool) -> CallToolResult:
    if len(message) > MAX_ERROR_CHARS:
        message = f"{message[:MAX_ERROR_CHARS]}... ({len(message) - MAX_ERROR_CHARS:,} more characters not shown)"
    body = {"error": message, "retryable": retryable}
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body))],
        structured_content=body,
        is_error=True,
    )


def describe_validation(exc: ValidationError) -> str:
    """A short, model-readable account of what was wrong with the arguments."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "missing":
            parts.append(f"missing required argument {where!r}")
        elif err["type"] == "extra_forbidden":
            parts.append(f"unknown argument {where!r}")
        else:
            parts.append(f"argument {where!r}: {err['msg']}")
    return "invalid arguments: " + "; ".join(parts)


def from_exception(exc: BaseException) -> CallToolResult:
    if isinstance(exc, ThreadloomError):
        return error_result(exc.message, retryable=exc.retryable)
    if isinstance(exc, ValidationError):
        return error_result(describe_validation(exc), retryable=False)
    return error_result(f"internal error ({type(exc).__name__}); see the threadloom log", retryable=False)
