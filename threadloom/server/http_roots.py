"""The folders an HTTP client may name as its project root: the server's own repository, and any listed.

A root arrives from a client as the X-Threadloom-Root header or as MCP client roots. Either is
resolved as for any session (`identity.project_root`), then its real path (symlinks resolved) must
be one of the allowed folders or inside one; otherwise the client is refused before anything is
written there. A server started in / or the home folder (a service manager's default working
directory) allows that folder alone, not what lies under it: it holds no repository of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.server.context import ServerRequestContext

from threadloom.config import Settings
from threadloom.errors import InvalidInput
from threadloom.identity import project_root, unsafe_repository_root
from threadloom.server.connection import ConnectionState


class RootPolicy:
    def __init__(self, allowed: Sequence[Path], *, exact: Sequence[Path] = ()) -> None:
        self.allowed = tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in allowed))
        self.exact = tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in exact))

    @classmethod
    def of(cls, settings: Settings, cwd: str) -> RootPolicy:
        """The repository the server was started in, and THREADLOOM_HTTP_ROOTS."""
        started_in = project_root({}, [], cwd)
        if unsafe_repository_root(Path(os.path.realpath(started_in))) is not None:
            return cls(settings.http_root_paths(), exact=[started_in])
        return cls([started_in, *settings.http_root_paths()])

    def check(self, root: Path) -> Path:
        try:
            real = Path(os.path.realpath(root))
        except (OSError, ValueError):
            raise InvalidInput(f"root {str(root)!r} is not a usable path") from None
        if real in self.exact or any(real == allowed or real.is_relative_to(allowed) for allowed in self.allowed):
            return root
        listed = ", ".join([*(str(a) for a in self.allowed), *(f"{e} (itself only)" for e in self.exact)])
        raise InvalidInput(
            f"root {root} is outside the folders this HTTP server may use ({listed}); "
            "start the server in that repository or add it to THREADLOOM_HTTP_ROOTS"
        )

    def resolve(self, env: Mapping[str, str], client_roots: Sequence[str], cwd: str) -> Path:
        return self.check(project_root(env, client_roots, cwd))


@dataclass(kw_only=True)
class HttpConnectionState(ConnectionState):
    """An HTTP client's connection: whatever root it names is checked against the server's policy."""

    roots: RootPolicy = field(default_factory=lambda: RootPolicy([]))

    async def _client_roots(self, ctx: ServerRequestContext[Any, Any]) -> list[str]:
        offered = await super()._client_roots(ctx)
        self.roots.resolve(self.env, offered, self.cwd)  # raises before the session writes anywhere
        return offered
