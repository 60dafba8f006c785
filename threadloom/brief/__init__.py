"""The brief: what a session should know when it starts, in one budgeted, fenced text.

One function, `render_brief`, is rendered by the `brief` tool, the `threadloom://brief` resource and
the session-start hook, so all three give the same text.
"""

from __future__ import annotations

from threadloom.brief.render import DEFAULT_BUDGET, Brief, Scope, render_brief

__all__ = ["DEFAULT_BUDGET", "Brief", "Scope", "render_brief"]
