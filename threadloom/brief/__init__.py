"""The brief: what a session should know when it starts, in one budgeted, fenced text.

One function, `render_brief`, is rendered by the `brief` tool, the `threadloom://brief` resource and
the session-start hook, so all three give the same text. Its parts are slots (`threadloom/brief/slots/`);
the "now" table is `now.py`, and `render_now` is what a `now` read gives.
"""

from __future__ import annotations

from threadloom.brief.model import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET, Brief, Dropped, Scope
from threadloom.brief.render import render_brief, render_now

__all__ = ["DEFAULT_BUDGET", "MAX_BUDGET", "MIN_BUDGET", "Brief", "Dropped", "Scope", "render_brief", "render_now"]
