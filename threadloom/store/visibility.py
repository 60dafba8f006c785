"""Who may see what: the one visibility rule for memories (and the filters built on it) and the one for
sessions, as SQL conditions.

Every read of memories (search, listing, core, stats, traverse, maintenance reports) goes through
`visibility_sql`, so a new read path inherits the rule by being written with it. A search scoped to a
viewer that also asks for notes, quotes or thread summaries gets `shared_documents_sql` for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.search.model import MemoryScope, Viewer
from threadloom.store.sql import placeholders


def project_member_sql(project: str, user: str) -> str:
    """The organisation scope of a project (m030, threadloom/accounts/): a project an organisation holds is
    seen only by that organisation's members, checked here at every read, so a member taken out sees none of
    it from that moment; a project no organisation holds (a personal store's) keeps the plain project rule.
    `project` is a column, `user` a parameter."""
    return (
        f"(NOT EXISTS (SELECT 1 FROM org_projects op WHERE op.project = {project}) OR EXISTS (SELECT 1 FROM "
        f"org_projects op JOIN org_members om ON om.org = op.org WHERE op.project = {project} AND om.account = {user}))"
    )


def visibility_sql(viewer: Viewer, alias: str = "m") -> tuple[str, dict[str, Any]]:
    """The one rule of who may see a memory, as SQL on `alias` (a memories row): its owner; a `project` one
    from its project (when an organisation holds that project, by its members only); an `org` one by the
    viewer's organisation (THREADLOOM_ORG, or a team session's project's) and by every organisation the viewer
    is a member of now (m030's org_members)."""
    return (
        f"({alias}.owner = :v_user OR ({alias}.visibility = 'project' AND COALESCE({alias}.project, '') = :v_project "
        f"AND {project_member_sql(f'{alias}.project', ':v_user')}) "
        f"OR ({alias}.visibility = 'org' AND ({alias}.org = :v_org "
        f"OR {alias}.org IN (SELECT om.org FROM org_members om WHERE om.account = :v_user))))",
        {"v_user": viewer.user, "v_project": viewer.project or "", "v_org": viewer.org},
    )


def session_seen_sql(viewer: Viewer, alias: str = "s") -> tuple[str, dict[str, Any]]:
    """Which sessions a viewer may see, name or signal: their own user's, and anyone's in their project (the
    people they work with there); either way, in an organisation's project only while the viewer is one of its
    members (their own session in a project of an organisation they left is hidden too), and only a session
    whose own user is a member there too. A session of no user is nobody's peer."""
    project = f"{alias}.project"
    return (
        f"(({alias}.user = :s_user OR ({alias}.user IS NOT NULL AND COALESCE({project}, '') = :s_project)) "
        f"AND {project_member_sql(project, ':s_user')} AND {project_member_sql(project, f'{alias}.user')})",
        {"s_user": viewer.user, "s_project": viewer.project or ""},
    )


def signal_seen_sql(viewer: Viewer, alias: str = "s") -> tuple[str, dict[str, Any]]:
    """Which delivered signals (`alias`: a signals row) a recipient may read: those whose sender's session, and
    whose scope, are in projects the viewer may see now (a signal sent in an organisation's project is not read
    once the recipient left that organisation)."""
    sender = project_member_sql("ss.project", ":g_user")
    return (
        f"(NOT EXISTS (SELECT 1 FROM sessions ss WHERE ss.id = {alias}.sender AND NOT {sender}) "
        f"AND {project_member_sql(f'{alias}.scope', ':g_user')})",
        {"g_user": viewer.user},
    )


def seen_by(viewer: Viewer | None) -> tuple[str, dict[str, Any]]:
    """`visibility_sql`, or no condition for a job that acts on every user's memories."""
    return visibility_sql(viewer) if viewer is not None else ("1 = 1", {})


def memory_scope_sql(scope: MemoryScope) -> tuple[str, dict[str, Any]]:
    """SQL conditions on alias `m` (the memories table); always a valid expression."""
    clauses = ["1 = 1"]
    params: dict[str, Any] = {}
    if scope.viewer is not None:
        sql, named = visibility_sql(scope.viewer)
        clauses.append(sql)
        params.update(named)
    if scope.project is not None:
        clauses.append("(m.project = :m_project OR m.project IS NULL OR m.visibility = 'org')")
        params["m_project"] = scope.project
    if scope.categories:
        keys, named = placeholders("m_cat", scope.categories)
        clauses.append(f"m.category IN ({keys})")
        params.update(named)
    if scope.entity is not None:
        clauses.append("EXISTS (SELECT 1 FROM memory_entities e WHERE e.memory_id = m.id AND e.entity = :m_entity)")
        params["m_entity"] = scope.entity
    if scope.as_of is not None:
        # Bi-temporal (memory/corrections.py): what held then as known now, whenever it was recorded, or
        # what was believed then (stored by then, claiming to hold then) and corrected only after it.
        clauses.append(
            "m.valid_from <= :m_as_of AND (m.valid_to IS NULL OR m.valid_to > :m_as_of OR (m.created_at <= :m_as_of "
            "AND EXISTS (SELECT 1 FROM memory_edges s WHERE s.target = m.id AND s.type = 'supersedes' "
            "AND s.created_at > :m_as_of)))"
        )
        params["m_as_of"] = scope.as_of
    elif not scope.include_superseded:
        clauses.append("m.superseded_by IS NULL")
    if scope.created_since is not None:
        clauses.append("m.created_at >= :m_created")
        params["m_created"] = scope.created_since
    if scope.active_since is not None:
        clauses.append("m.last_reactivated_at >= :m_active")
        params["m_active"] = scope.active_since
    if scope.pinned_or_core:
        clauses.append("(m.pinned = 1 OR m.core_key IS NOT NULL)")
    return " AND ".join(clauses), params


# The kinds besides memories that a recall searches, and who may see each.
PROJECT_KINDS = ("note", "thread")  # notes and thread summaries: the project's
OWNED_KINDS = ("quote",)  # verbatim quotes: their speaker's alone (thread_notes.owner)
TRANSCRIPT_KIND = "transcript"  # ingested conversations: their owner's alone (transcript_messages.owner)


def transcripts_sql(viewer: Viewer | None, alias: str = "t") -> tuple[str, dict[str, Any]]:
    """The one rule of who may see an ingested transcript message (store/transcripts.py): its owner only,
    from every project. A job (no viewer) sees all."""
    if viewer is None:
        return "1 = 1", {}
    return f"{alias}.owner = :t_owner", {"t_owner": viewer.user}


def claims_sql(viewer: Viewer, alias: str = "c") -> tuple[str, dict[str, Any]]:
    """The one rule of who may see a claim about a user (threadloom/usermodel/): that user alone, from every
    project. Another user's claim id reads as one that never existed."""
    return f"{alias}.owner = :c_owner", {"c_owner": viewer.user}


def shared_documents_sql(scope: MemoryScope, kinds: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """Who may see documents of `kinds` other than memories, as SQL on alias `d` (a documents row): a note
    or a thread summary from sessions in its project; a quote by its owner only, as a private memory
    (from this project, or everywhere when the scope names no project); a transcript message by its owner
    only (`transcripts_sql`; from this project when the scope names one). A kind with no rule here is seen
    by no one. Conditions only memories have (categories, entity, as of, activity, pinned or core) are met
    by no other kind; `created_since` applies to when the document was written. Always a valid expression."""
    memory_only = (scope.categories, scope.entity, scope.as_of, scope.active_since, scope.pinned_or_core)
    if any(condition not in (None, (), False) for condition in memory_only):
        return "0 = 1", {}
    clauses: list[str] = []
    params: dict[str, Any] = {}
    viewer = scope.viewer
    shared = [k for k in kinds if k in PROJECT_KINDS]
    if shared:
        keys, named = placeholders("o_kind", shared)
        params.update(named)
        if viewer is None:
            clauses.append(f"d.kind IN ({keys})")
        else:
            member = project_member_sql("d.project", ":o_member")
            clauses.append(f"(d.kind IN ({keys}) AND COALESCE(d.project, '') = :o_project AND {member})")
            params |= {"o_project": viewer.project or "", "o_member": viewer.user}
    if any(k in OWNED_KINDS for k in kinds):
        owned = ["d.kind = 'quote'"]
        if viewer is not None:
            owned.append(
                "EXISTS (SELECT 1 FROM thread_notes n WHERE n.id = CAST(d.ref AS INTEGER) AND n.owner = :o_user)"
            )
            params["o_user"] = viewer.user
        if scope.project is not None:
            owned.append("(d.project = :o_scope OR d.project IS NULL)")
            params["o_scope"] = scope.project
        clauses.append("(" + " AND ".join(owned) + ")")
    if TRANSCRIPT_KIND in kinds:
        owner_sql, owner_params = transcripts_sql(viewer)
        transcript = [
            f"d.kind = '{TRANSCRIPT_KIND}'",
            f"EXISTS (SELECT 1 FROM transcript_messages t WHERE t.id = CAST(d.ref AS INTEGER) AND {owner_sql})",
        ]
        params.update(owner_params)
        if scope.project is not None:
            transcript.append("d.project = :t_scope")
            params["t_scope"] = scope.project
        clauses.append("(" + " AND ".join(transcript) + ")")
    if not clauses:
        return "0 = 1", {}
    where = "(" + " OR ".join(clauses) + ")"
    if scope.created_since is not None:
        where += " AND d.created_at >= :o_created"
        params["o_created"] = scope.created_since
    return where, params
