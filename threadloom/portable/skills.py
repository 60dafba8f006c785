"""Skills and lessons (m024 and the files under the home): `skills.jsonl`, one entry a line. A skill carries
its SKILL.md and reference files whole, a lesson its text; who wrote it (person or loop), where from and
whether it is pinned travel with it; views and uses are this machine's.

A skill's files and row change together only through `Library` (its per-user lock), so entries are checked
inside the import's transaction and written after it commits, each skill whole; a failure part-way leaves
whole skills behind and importing again completes the rest. A skill the importer already has by that name
stays as it is here (`skills_kept`, reported when its text differs); a lesson is one by its words.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

from threadloom.errors import InvalidInput
from threadloom.learning import lessons
from threadloom.learning.library import ORIGINS, Library, owner_folder
from threadloom.learning.screen import check_loop_text
from threadloom.learning.skills import MAX_FILE, MAX_REFERENCE, MAX_REFERENCES, REFERENCES, SKILL_FILE, checked, parse
from threadloom.portable import format as f
from threadloom.portable.memories import fenced
from threadloom.portable.registry import Context
from threadloom.store.base import Reader, Row, Writer
from threadloom.threads.repository import Repository


class Skills:
    name = "skills"

    def __init__(self, library: Library) -> None:
        self.library = library

    def export(self, r: Reader, user: str) -> Iterator[dict[str, Any]]:
        for row in r.rows(
            "SELECT kind, name, origin, source, pinned, body FROM learning_entries WHERE owner = :u "
            "ORDER BY kind, name",
            {"u": user},
        ):
            record: dict[str, Any] = {k: row[k] for k in ("kind", "name", "origin", "source")}
            record["pinned"] = bool(row["pinned"])
            if row["kind"] == "lesson":
                yield record | {"text": row["body"], "references": {}}
                continue
            text, refs = self._files(user, row["name"])
            yield record | {"text": text, "references": refs}

    def markdown(self, record: dict[str, Any]) -> str:
        return f"## {record['kind']} {record['name']} ({record['origin']})\n\n{fenced(record['text'])}\n"

    def parse(self, line: f.Line) -> f.Line:
        rec, where = line.record, line.where
        kind = f.choice(rec, "kind", where, ("skill", "lesson"))
        f.text(rec, "name", where, 64)
        f.choice(rec, "origin", where, ORIGINS)
        f.text(rec, "source", where, 200)
        f.boolean(rec, "pinned", where)
        text = f.text(rec, "text", where, MAX_FILE)
        refs = rec.get("references")
        if not isinstance(refs, dict) or len(refs) > MAX_REFERENCES:
            raise InvalidInput(f"{where}: references must map at most {MAX_REFERENCES} file names to text")
        for name in refs:
            f.text(refs, name, where, MAX_REFERENCE)
        if kind == "lesson" and refs:
            raise InvalidInput(f"{where}: a lesson has no references")
        try:  # all the library would refuse when writing it after the transaction, the loop screen included
            if kind == "lesson":
                parts = {"lesson": lessons.checked_text(text)}
            else:
                skill = parse(text)
                whole = checked(skill.name, skill.description, skill.body, refs)
                parts = {"description": whole.description, "body": whole.body}
                parts |= {f"reference {k}": v for k, v in whole.references.items()}
                if skill.name != rec["name"]:
                    raise InvalidInput(f"the SKILL.md names {skill.name!r}, the record {rec['name']!r}")
            if rec["origin"] == "loop":
                check_loop_text(parts)
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}") from None
        return line

    def merge(self, r: Reader, w: Writer | None, ctx: Context, items: list[f.Line]) -> dict[str, int]:
        counts = {"skills_added": 0, "skills_present": 0, "skills_kept": 0}
        seen: set[tuple[str, str]] = set()
        for item in items:
            rec = item.record
            name = self._name(ctx, rec)
            if (rec["kind"], name) in seen:
                raise InvalidInput(f"{item.where}: {rec['kind']} {name} appears twice in the file")
            seen.add((rec["kind"], name))
            row = self._row(r, ctx.user, rec["kind"], name)
            if row is None:
                counts["skills_added"] += 1
            elif rec["kind"] == "lesson" or self._same(ctx.user, rec):
                counts["skills_present"] += 1
            else:
                counts["skills_kept"] += 1
        return counts

    def _row(self, r: Reader, user: str, kind: str, name: str) -> Row | None:
        return r.one(
            "SELECT name FROM learning_entries WHERE owner = :o AND kind = :k AND name = :n",
            {"o": user, "k": kind, "n": name},
        )

    def _name(self, ctx: Context, rec: dict[str, Any]) -> str:
        """A lesson's name is its words' digest, after the scrubber (as `Library.add_lesson` names it)."""
        return lessons.lesson_id(ctx.scrubber.text(rec["text"].strip())) if rec["kind"] == "lesson" else rec["name"]

    def _same(self, user: str, rec: dict[str, Any]) -> bool:
        return self._files(user, rec["name"]) == (rec["text"], rec["references"])

    def _files(self, user: str, name: str) -> tuple[str, dict[str, str]]:
        """A skill's SKILL.md and references as the library keeps them (read as `Library.show` reads them,
        through `Repository`, without its store read: this runs inside the export's snapshot)."""
        repo = Repository(self.library.skills_root / owner_folder(user))
        refs, _ = repo.read_folder(f"{name}/{REFERENCES}", "")
        return repo.read_text(f"{name}/{SKILL_FILE}") or "", {k: v for k, v in refs.items() if not k.startswith(".")}

    def after(self, ctx: Context, items: list[f.Line]) -> None:
        """Write what `merge` counted as added, through the library, once the transaction has committed."""
        for item in items:
            rec = item.record
            name = self._name(ctx, rec)
            if self.library.store.read(partial(self._row, user=ctx.user, kind=rec["kind"], name=name)) is not None:
                continue
            if rec["kind"] == "lesson":
                self.library.add_lesson(ctx.user, rec["text"], rec["origin"], rec["source"])
            else:
                skill = parse(rec["text"])
                self.library.write_skill(
                    ctx.user, skill.name, skill.description, skill.body, rec["origin"], rec["source"],
                    rec["references"],
                )  # fmt: skip
            if rec["pinned"]:
                self.library.pin(ctx.user, name, rec["kind"])
