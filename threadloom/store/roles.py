"""What an organisation member's role lets them change (issue 21; the roles are m030/m031's `org_members.role`).

- `owner`: everything an admin may; an organisation always keeps one (threadloom/accounts/service.py).
- `admin`: manages the organisation's members and projects (`threadloom admin`, run on the server), and writes
  like a member.
- `member`: reads the organisation's shared memories and writes them: stores, amends, links, pins, promotes and
  deletes shared items (project- or org-visible memories, a project's notes) in the organisation's projects.
- `reader`: reads the same, writes only private items of their own.

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
    if visibility not in SHARED:
        return
    if visibility == "org" and org is not None and r.scalar("SELECT 1 FROM organisations WHERE name = :o", {"o": org}):
        holder: str | None = org
    else:
        holder = r.scalar("SELECT org FROM org_projects WHERE project = :p", {"p": project or ""})
    if holder is None:
        return
    role = r.scalar("SELECT role FROM org_members WHERE org = :o AND account = :u", {"o": holder, "u": user})
    if role in WRITE_ROLES:
        return
    who = f"a {role}" if role else "not a member"
    raise NotPermitted(
        f"you are {who} of organisation {holder!r}: you may read its shared items but not change them ({action}) "
        "(an owner or admin gives write access: threadloom admin org member add ORG USER --role member)"
    )


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
