"""One module per agent CLI: where its files are, what setup writes there, with the doc page it follows."""

from __future__ import annotations

from typing import Final

from threadloom.setup.clients import claude, codex, copilot, cursor, gemini, vscode
from threadloom.setup.model import Client

CLIENTS: Final[dict[str, Client]] = {
    c.name: c for c in (claude.CLIENT, codex.CLIENT, gemini.CLIENT, vscode.CLIENT, cursor.CLIENT, copilot.CLIENT)
}
