"""The memory graph's upkeep tables and reports: what a maintenance pass reads, counts for a viewer, the
prune archive, and core preferences.
"""

from __future__ import annotations

import json
from typing import Any

from threadloom.search.model import Viewer
from threadloom.store import memories
from threadloom.store.base import Reader, Writer
from threadloom.store.visibility import seen_by, visibility_sql


def scoring_inputs(r: Reader, after: str, limit: int, viewer: Viewer | None) -> list[tuple[Any, ...]]:
    """A page of what scoring needs, by id: (id, last_reactivated_at, recalls, degree, pinned, core, visibility,
    status, decay_score, category, owner, project, seen): every memory for the store's own pass (no viewer),
    else the viewer's own, since a pass a user asks for changes nothing of anyone else's."""
    seen, params = seen_by(viewer)
    own = "" if viewer is None else "AND m.owner = :pass_owner "
    return r.tuples(
        "SELECT m.id, m.last_reactivated_at, m.reactivation_count, "
        f"{memories.counted_edges_sql('m')}, "
        "m.pinned, m.core_key IS NOT NULL, m.visibility, m.status, m.decay_score, m.category, m.owner, "
        f"COALESCE(m.project, ''), CASE WHEN {seen} THEN 1 ELSE 0 END "
        f"FROM memories m WHERE m.id > :after {own}ORDER BY m.id LIMIT :limit",
        params | {"after": after, "limit": limit} | ({} if viewer is None else {"pass_owner": viewer.user}),
    )


def counts(r: Reader, viewer: Viewer) -> dict[str, Any]:
    """Counts of what `viewer` may see: their memories and those shared with them, and edges between those."""
    seen, params = visibility_sql(viewer)
    visible = f"SELECT m.* FROM memories m WHERE {seen}"
    by_status = dict(r.tuples(f"SELECT status, count(*) FROM ({visible}) GROUP BY status", params))
    by_category = dict(
        r.tuples(
            f"SELECT COALESCE(category, '-'), count(*) FROM ({visible}) GROUP BY 1 ORDER BY 2 DESC LIMIT 20", params
        )
    )
    seen_a, params_a = visibility_sql(viewer, "a")
    seen_b, _ = visibility_sql(viewer, "b")
    edges = (
        "SELECT e.* FROM memory_edges e JOIN memories a ON a.id = e.source JOIN memories b ON b.id = e.target "
        f"WHERE {seen_a} AND {seen_b}"
    )
    by_type = dict(r.tuples(f"SELECT type, count(*) FROM ({edges}) GROUP BY type", params_a))
    by_maker = dict(r.tuples(f"SELECT made_by, count(*) FROM ({edges}) GROUP BY made_by", params_a))
    row = r.one(
        "SELECT count(*) AS total, COALESCE(sum(pinned), 0) AS pinned, count(core_key) AS core, "
        f"count(superseded_by) AS superseded, COALESCE(avg(decay_score), 0) AS mean_score FROM ({visible})",
        params,
    )
    assert row is not None
    return {
        "memories": int(row["total"]),
        "by_status": by_status,
        "by_category": by_category,
        "pinned": int(row["pinned"]),
        "core": int(row["core"]),
        "superseded": int(row["superseded"]),
        "mean_decay_score": round(float(row["mean_score"]), 4),
        "edges": sum(by_type.values()),
        "edges_by_type": by_type,
        "edges_by_maker": by_maker,
        "archived": int(r.scalar("SELECT count(*) FROM memory_archive WHERE owner = :o", {"o": viewer.user})),
    }


# the prune archive


def archive(w: Writer, memory_id: str, payload: dict[str, Any], now: int) -> None:
    w.execute(
        "INSERT INTO memory_archive (id, payload, pruned_at, owner) VALUES (:id, :payload, :now, :owner) "
        "ON CONFLICT (id) DO UPDATE SET payload = excluded.payload, pruned_at = excluded.pruned_at, "
        "owner = excluded.owner",
        {
            "id": memory_id,
            "payload": json.dumps(payload, separators=(",", ":")),
            "now": now,
            "owner": payload["memory"]["owner"],
        },
    )


def archived(r: Reader, memory_id: str, owner: str) -> tuple[dict[str, Any], int] | None:
    """A pruned memory of `owner`'s (nobody else may restore it, or learn it was there)."""
    row = r.one(
        "SELECT payload, pruned_at FROM memory_archive WHERE id = :id AND owner = :o", {"id": memory_id, "o": owner}
    )
    return (json.loads(row["payload"]), int(row["pruned_at"])) if row else None


def unarchive(w: Writer, memory_id: str) -> None:
    w.execute("DELETE FROM memory_archive WHERE id = :id", {"id": memory_id})


def purge_archive(w: Writer, before: int, owner: str | None) -> int:
    """Purge every archived memory pruned before `before`; return how many of them were `owner`'s (all,
    given no owner)."""
    mine_sql = "SELECT count(*) FROM memory_archive WHERE pruned_at < :before" + (
        "" if owner is None else " AND owner = :o"
    )
    mine = int(w.scalar(mine_sql, {"before": before, "o": owner}))  # no `:o IS NULL`: PostgreSQL cannot type it
    w.execute("DELETE FROM memory_archive WHERE pruned_at < :before", {"before": before})
    return mine


def raw_row(r: Reader, memory_id: str) -> dict[str, Any] | None:
    row = r.one("SELECT * FROM memories WHERE id = :id", {"id": memory_id})
    return dict(row) if row else None


def restore_row(w: Writer, row: dict[str, Any]) -> None:
    columns = list(row)
    w.execute(
        f"INSERT INTO memories ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})",
        row,
    )
    for entity in json.loads(row["entities"]):
        w.execute(
            "INSERT INTO memory_entities (memory_id, entity) VALUES (:id, :entity) ON CONFLICT DO NOTHING",
            {"id": row["id"], "entity": entity},
        )


# core preferences


def preferences(r: Reader, owner: str, project: str) -> dict[str, list[str]]:
    row = r.one(
        "SELECT auto, approval, excluded FROM core_preferences WHERE owner = :o AND project = :p",
        {"o": owner, "p": project},
    )
    if row is None:
        return {"auto": [], "approval": [], "excluded": []}
    return {name: json.loads(row[name]) for name in ("auto", "approval", "excluded")}


def auto_categories(r: Reader) -> dict[tuple[str, str], set[str]]:
    """Per (owner, project): the categories whose well-used memories become core by themselves."""
    return {
        (str(o), str(p)): set(json.loads(a))
        for o, p, a in r.tuples("SELECT owner, project, auto FROM core_preferences")
    }


def set_preferences(w: Writer, owner: str, project: str, prefs: dict[str, list[str]], now: int) -> None:
    w.execute(
        "INSERT INTO core_preferences (owner, project, auto, approval, excluded, updated_at) "
        "VALUES (:o, :p, :auto, :approval, :excluded, :now) ON CONFLICT (owner, project) DO UPDATE SET "
        "auto = excluded.auto, approval = excluded.approval, excluded = excluded.excluded, updated_at = :now",
        {"o": owner, "p": project, "now": now} | {k: json.dumps(v) for k, v in prefs.items()},
    )
