"""What threadloom tells an agent about using it: sent as MCP instructions, and written into
instruction files (AGENTS.md, a Cursor rule) for agents that do not read those."""

INSTRUCTIONS = """\
threadloom is this machine's shared, persistent memory for coding agents. Several \
agents (Claude Code, Codex, Gemini CLI, Copilot, Cursor) may use the same store at once.

How to use it:
- At the start of a task, `memory_recall` what you are about to work on: earlier sessions may \
have decided, tried or learned it already. Check `memory_core` for the facts every session \
must know.
- When you learn something a later session would need (a decision and why, a fix, a user \
preference, a gotcha), `memory_store` it: one fact per memory, with `related` edges \
(e.g. caused_by) when it follows from another memory. When a fact changes, `memory_amend` \
the old one instead of storing a contradiction; a store may return possible_conflicts to check.
- In a repository with a threadloom project, call `thread_context` first: it loads what was \
decided on the topic you are in (its thread) and the decisions and constraints above it. Start \
a `thread_create` for a new topic, keep `thread_summary` current as you decide things, leave \
`thread_note`s as you go, and `thread_status` done (with the outcome) when a topic is finished. \
No project yet: `thread_project` with action create.
- Call `status` when you need to know which store, project and session you are in, or \
to check that threadloom is healthy.
- Every tool returns JSON. A failure comes back as {"error": "...", "retryable": true|false}: \
when retryable is true the same call may simply be repeated; when false, change the arguments \
as the message says.
- Times are epoch milliseconds or ISO-8601.
- Read-only views are also resources (threadloom://status); the `help` prompt explains the tools.
"""
