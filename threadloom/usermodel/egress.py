"""Where personal memory may go: the egress policy for claims, style, the interaction profile and verbatim
quotes, read on every path that hands memory to a model (the brief, recall, resources, spawned children).

`all` sends it to every vendor's model; `none` to none; `same-vendor` only to a model of the company whose
agent CLI recorded the item (a claim first stated in a Claude Code session reaches Anthropic's models, not
OpenAI's). Work memory (memories, threads' notes, tasks) is not personal and always goes. What is held back
is said in one line, so the agent knows it exists and can tell the user how to change the policy.
"""

from __future__ import annotations

from typing import Final, Literal

Policy = Literal["all", "same-vendor", "none"]
POLICIES: Final = ("all", "same-vendor", "none")

# The company whose models serve each agent CLI (threadloom.agents.VENDORS). Copilot and Cursor route to
# several model makers; their own company is the only one the session's data reaches for certain.
COMPANY: Final[dict[str, str]] = {
    "claude": "anthropic",
    "codex": "openai",
    "gemini": "google",
    "copilot": "github",
    "cursor": "cursor",
}


def company(vendor: str) -> str | None:
    """The model maker behind an agent CLI; None when unknown (`other`), which same-vendor never matches."""
    return COMPANY.get(vendor)


def allows(policy: str, recorded_by: str, reader: str) -> bool:
    """Whether an item of personal memory recorded in a `recorded_by` session may reach `reader`'s model."""
    if policy == "all":
        return True
    if policy == "none":
        return False
    made = company(recorded_by)
    return made is not None and made == company(reader)


def allowed_vendors(policy: str, reader: str) -> tuple[str, ...] | None:
    """The vendors whose items `allows` lets reach `reader`, for a query: None for every vendor, () for none."""
    if policy == "all":
        return None
    return tuple(v for v in COMPANY if allows(policy, v, reader))


def withheld_line(policy: str, reader: str, counts: dict[str, int]) -> str | None:
    """The one line that says what was held back (`counts`: per kind, e.g. {"claims": 3}); None if nothing."""
    held = [f"{n} {kind}" for kind, n in counts.items() if n > 0]
    if not held:
        return None
    to = company(reader) or reader
    return (
        f"egress policy={policy}: personal memory withheld from {to} ({', '.join(held)}); "
        "THREADLOOM_EGRESS=all sends it, or ask the user"
    )
