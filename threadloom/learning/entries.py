"""Every statement on `learning_entries` (m024_skills). Each names its owner: a user's skills and lessons are
theirs alone, and another user's name is "not found" exactly like a name that never existed."""

from __future__ import annotations

from typing import Final, Literal

from threadloom.store.base import Reader, Row, Writer

Kind = Literal["skill", "lesson"]
KINDS: Final = ("skill", "lesson")
MIRROR_JOB: Final = "learning.mirror:"  # job_runs: the last mirroring of a user's skills, for status
_COLUMNS: Final = (
    "kind, name, description, origin, source, pinned, digest, created_at, updated_at, viewed, used, "
    "last_viewed_at, last_used_at"
)


def get(r: Reader, owner: str, kind: str, name: str) -> Row | None:
    return r.one(
        f"SELECT {_COLUMNS}, body FROM learning_entries WHERE owner = :owner AND kind = :kind AND name = :name",
        {"owner": owner, "kind": kind, "name": name},
    )


def listing(r: Reader, owner: str, kinds: tuple[str, ...], with_body: bool = False) -> list[Row]:
    marks = ", ".join(f":k{i}" for i in range(len(kinds)))
    params: dict[str, object] = {"owner": owner}
    params |= {f"k{i}": k for i, k in enumerate(kinds)}
    body = ", body" if with_body else ""
    return r.rows(
        f"SELECT {_COLUMNS}{body} FROM learning_entries WHERE owner = :owner AND kind IN ({marks}) "
        "ORDER BY kind DESC, pinned DESC, name",
        params,
    )


def put(
    w: Writer,
    owner: str,
    kind: str,
    name: str,
    *,
    description: str,
    body: str | None,
    origin: str,
    source: str,
    digest: str,
    now: int,
) -> None:
    """Insert the entry, or replace its content and provenance (its pin and usage stay)."""
    w.execute(
        "INSERT INTO learning_entries (owner, kind, name, description, body, origin, source, digest, created_at, "
        "updated_at) VALUES (:owner, :kind, :name, :description, :body, :origin, :source, :digest, :now, :now) "
        "ON CONFLICT (owner, kind, name) DO UPDATE SET description = excluded.description, body = excluded.body, "
        "origin = excluded.origin, source = excluded.source, digest = excluded.digest, "
        "updated_at = excluded.updated_at",
        {
            "owner": owner,
            "kind": kind,
            "name": name,
            "description": description,
            "body": body,
            "origin": origin,
            "source": source,
            "digest": digest,
            "now": now,
        },
    )


def remove(w: Writer, owner: str, kind: str, name: str) -> int:
    return w.execute(
        "DELETE FROM learning_entries WHERE owner = :owner AND kind = :kind AND name = :name",
        {"owner": owner, "kind": kind, "name": name},
    )


def set_pinned(w: Writer, owner: str, kind: str, name: str, pinned: bool, now: int) -> int:
    return w.execute(
        "UPDATE learning_entries SET pinned = :pinned, updated_at = :now "
        "WHERE owner = :owner AND kind = :kind AND name = :name",
        {"owner": owner, "kind": kind, "name": name, "pinned": int(pinned), "now": now},
    )


def mark(w: Writer, owner: str, kind: str, names: list[str], what: Literal["viewed", "used"], now: int) -> int:
    """Count one view or use of each named entry."""
    if not names:
        return 0
    marks = ", ".join(f":n{i}" for i in range(len(names)))
    params: dict[str, object] = {"owner": owner, "kind": kind, "now": now}
    params |= {f"n{i}": n for i, n in enumerate(names)}
    return w.execute(
        f"UPDATE learning_entries SET {what} = {what} + 1, last_{what}_at = :now "
        f"WHERE owner = :owner AND kind = :kind AND name IN ({marks})",
        params,
    )
