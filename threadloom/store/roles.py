"""What an organisation member's role lets them change (issue 21; the roles are m030/m031's `org_members.role`).

- `owner`: everything an admin may; an organisation always keeps one (threadloom/accounts/service.py).
- `admin`: manages the organisation's members and projects (`threadloom admin`, run on the server), and writes
  like a member.
- `member`: reads the organisation's shared memories and writes them: stores, amends, links, pins, promotes and
  deletes shared items (project- or org-visible memories, a project's notes) in the organisation's projects.
- `reader`: reads the same, writes only private items of their own. An edge to a shared memory changes it too
  (its score, what a traverse finds): a reader's `memory_link`, `related` and amend `by` naming one are
  refused, and a reader's new memory gets no automatic link to one (`may_change`).

A project no organisation holds, and an org label that names no organisation (a personal store's
THREADLOOM_ORG), are gated by nothing here: a personal store has no roles.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Protocol

from threadloom.errors import NotPermitted
from threadloom.store.base import Reader

WRITE_ROLES: Final = ("owner", "admin", "member")
SHARED: Final = ("project", "org")


def require_shared_write(
    r: Reader, user: str, visibility: str, project: str | None, org: str | None, action: str
) -> None:
    """Raise NotPermitted when `user` may not `action` an item of `visibility` in `project` (or, org-visible,
    of `org`): a reader, or someone who is no member of the organisation that holds it."""
    refusal = shared_write_refusal(r, user, visibility, project, org)
    if refusal is None:
        return
    holder, who = refusal
    raise NotPermitted(
        f"you are {who} of organisation {holder!r}: you may read its shared items but not change them ({action}) "
        "(an owner or admin gives write access: threadloom admin org member add ORG USER --role member)"
    )


def shared_write_refusal(
    r: Reader, user: str, visibility: str, project: str | None, org: str | None
) -> tuple[str, str] | None:
    """None when `user` may change such an item; else the organisation that holds it and what `user` is there
    ("a reader", "not a member")."""
    if visibility not in SHARED:
        return None
    if visibility == "org" and org is not None and r.scalar("SELECT 1 FROM organisations WHERE name = :o", {"o": org}):
        holder: str | None = org
    else:
        holder = r.scalar("SELECT org FROM org_projects WHERE project = :p", {"p": project or ""})
    if holder is None:
        return None
    role = r.scalar("SELECT role FROM org_members WHERE org = :o AND account = :u", {"o": holder, "u": user})
    if role in WRITE_ROLES:
        return None
    return holder, f"a {role}" if role else "not a member"


class SharedItem(Protocol):
    @property
    def visibility(self) -> str: ...
    @property
    def project(self) -> str | None: ...
    @property
    def org(self) -> str: ...


def require_write_of(r: Reader, user: str, items: Iterable[SharedItem], action: str) -> None:
    """`require_shared_write` for each stored item (a memory) the caller is about to change."""
    for item in items:
        require_shared_write(r, user, item.visibility, item.project, item.org, action)


def may_change(r: Reader, user: str, item: SharedItem | None) -> bool:
    """Whether `user` may change (link to, supersede by) a stored item: what an automatic write asks before it
    touches another's shared memory, where an explicit one would be refused."""
    return item is not None and shared_write_refusal(r, user, item.visibility, item.project, item.org) is None
