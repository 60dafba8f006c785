"""`forget` over what the learning loops keep in files, beside their rows (store/erasure_learning.py).

Before the erasing transaction, under the owner's library lock (no skill or lesson changes meanwhile), a plan:
the entries to erase are the loop-written skills and lessons written from a candidate the selector picks
(directly with the `learning` kind, or quoted from a transcript or note being forgotten; an accepted
candidate's decision names the entry it went into, a patch of an existing skill included) and, with the
`learning` kind and a text, every loop-written entry holding the text (a skill's name, description, SKILL.md
and references; a lesson's text). An entry a loop may not touch (a person's, pinned, edited by hand since) is
never erased by this: it is named in the result as kept, for its person to decide.

After the transaction commits: each erased skill's canonical folder and threadloom's copies in the CLIs'
skills folders (a copy edited by hand there is left and said so), the lessons file rendered again, the lines
of the insights export threadloom wrote for an erased insight or holding the text, the lines of the
curator's reports naming an erased entry or holding the text, and the lines holding the text in the logs of the
learning loops' children (`<home>/tasks/`: what a reviewer printed may quote a candidate).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from threadloom.errors import InvalidInput
from threadloom.learning import entries
from threadloom.learning.curator_review import CURATE_REVIEW
from threadloom.learning.library import Library, _canonical, owner_folder
from threadloom.learning.reviewer import AUTO_REVIEW, REVIEW, SHADOW
from threadloom.learning.skills import files_digest
from threadloom.store import erasure
from threadloom.store.base import Reader, Row
from threadloom.store.erasure import Selector
from threadloom.store.erasure_learning import candidate_entries, candidate_ids, derived_candidate_ids, insight_ids
from threadloom.store.erasure_learning_entries import EntryKey, LearningPlan, lower_ascii
from threadloom.store.sql import placeholders
from threadloom.threads.repository import Repository

TOUCHED: Final = ("learning", "transcripts", "notes")  # the kinds whose erasure reaches learning data
# The task roles of the learning loops' children (learning/reviewer.py, learning/curator_review.py).
LOOP_ROLES: Final = (REVIEW.role, AUTO_REVIEW.role, SHADOW.role, CURATE_REVIEW.role)
ERASED_LINE: Final = "[erased by forget]\n"
_QUOTED: Final = (("transcripts", "message"), ("notes", "note"))


@dataclass(frozen=True)
class Planned:
    plan: LearningPlan
    insights: tuple[int, ...] = ()
    kept: list[dict[str, str]] = field(default_factory=list)  # protected entries the selector reaches


class LearningFiles:
    def __init__(self, library: Library, insights: Path, reports: Path, tasks: Path | None = None) -> None:
        self.library = library
        self.insights = insights
        self.reports = reports
        self.tasks = tasks

    @classmethod
    def of(cls, library: Library, home: Path) -> LearningFiles:
        """The folders as the insights export (learning/insights.py), the curator (learning/curator.py) and the
        spawned children's logs (coordination/spawn.py) use."""
        return cls(library, home / "insights", home / "curator", home / "tasks")

    @contextmanager
    def locked(self, owner: str) -> Iterator[None]:
        with self.library._locked(owner):
            yield

    def plan(self, owner: str, sel: Selector, kinds: Sequence[str]) -> Planned:
        """What the erasure will take of the learning data (call under `locked`)."""
        learning = "learning" in kinds

        def read(r: Reader) -> tuple[list[int], list[int], set[EntryKey], list[Row], list[int]]:
            picked = candidate_ids(r, owner, sel) if learning else []
            quoted: list[int] = []
            for kind, source in _QUOTED:
                if kind in kinds:
                    quoted += derived_candidate_ids(r, owner, source, erasure.picked_ids(r, kind, owner, sel))
            keys = candidate_entries(r, owner, picked + quoted)
            rows = entries.listing(r, owner, entries.KINDS, with_body=True)
            return picked, quoted, keys, rows, insight_ids(r, owner, sel) if learning else []

        picked, quoted, keys, rows, insights = self.library.store.read(read)
        repo = self.library._skills_repo(owner)
        needle = lower_ascii(sel.text) if learning and sel.text is not None else None
        erase: list[EntryKey] = []
        kept: list[dict[str, str]] = []
        for row in rows:
            key = (str(row["kind"]), str(row["name"]))
            files = (_canonical(repo, key[1]) or {}) if key[0] == "skill" else {}
            if key not in keys and not (needle is not None and _holds(row, files, needle)):
                continue
            why = _protected(row, files)
            if why:
                kept.append({"kind": key[0], "name": key[1], "why": why})
            else:
                erase.append(key)
        plan = LearningPlan(tuple(erase), tuple(picked), sel.text if learning else None, tuple(quoted))
        return Planned(plan, tuple(insights), kept)

    def preview(self, owner: str, planned: Planned, sel: Selector) -> dict[str, Any]:
        """The dry run's counts of the files: copies in the CLIs' folders, export and report lines."""
        copies = 0
        if self.library.mirror is not None:
            skills = [name for kind, name in planned.plan.entries if kind == "skill"]
            copies = sum((root / name).is_dir() for root in self.library.mirror.roots() for name in skills)
        lines, _ = self._export_lines(owner, planned, sel)
        reports = sum(n for _, _, n in self._report_lines(owner, planned, sel))
        logs = sum(n for _, _, n in self._log_lines(owner, planned))
        return {"mirror_copies": copies, "exported_lines": lines, "report_lines": reports, "loop_log_lines": logs}

    def apply(self, owner: str, planned: Planned, sel: Selector) -> dict[str, Any]:
        """Once the rows are gone: the files (see the module's docstring); what was done."""
        done: dict[str, Any] = {"skill_folders": 0, "mirror_copies": 0, "exported_lines": 0, "report_lines": 0}
        left: list[dict[str, str]] = []
        for kind, name in planned.plan.entries:
            if kind != "skill":
                continue
            outcomes = self.library.drop_files(owner, name)
            done["skill_folders"] += 1
            done["mirror_copies"] += sum(o["status"] == "removed" for o in outcomes)
            left += [o | {"skill": name} for o in outcomes if o["status"] not in ("removed", "absent")]
        if any(kind == "lesson" for kind, _ in planned.plan.entries):
            self.library._render_lessons(owner)
        if left:
            done["mirrors_left"] = left  # a copy edited by hand, a folder refused: said, not forced
        done["exported_lines"], kept = self._export_lines(owner, planned, sel)
        if done["exported_lines"]:
            repo, name = Repository(self.insights), owner_folder(owner) + ".jsonl"
            with repo.locked(name + ".lock"):
                repo.write_text(name, "".join(kept))
        done["report_lines"] = sum(n for _, _, n in self._report_lines(owner, planned, sel, write=True))
        done["loop_log_lines"] = sum(n for _, _, n in self._log_lines(owner, planned, write=True))
        return done

    # the mechanism

    def _export_lines(self, owner: str, planned: Planned, sel: Selector) -> tuple[int, list[str]]:
        """How many lines of the owner's insights export go, and the lines that stay."""
        if planned.plan.text is None and not planned.insights:
            return 0, []
        path = self.insights / (owner_folder(owner) + ".jsonl")
        if not path.is_file() or path.is_symlink():
            return 0, []
        text = Repository(self.insights).read_text(path.name) or ""
        ids, needle = set(planned.insights), lower_ascii(sel.text) if sel.text is not None else None
        kept: list[str] = []
        gone = 0
        for line in text.splitlines(keepends=True):
            if _exported(line, ids, needle):
                gone += 1
            else:
                kept.append(line)
        return gone, kept

    def _report_lines(
        self, owner: str, planned: Planned, sel: Selector, write: bool = False
    ) -> list[tuple[Repository, str, int]]:
        """Per curator report of the owner: the lines that name an erased entry or hold the text (dropped
        when `write`)."""
        folder = self.reports / owner_folder(owner)
        names = [f"| {kind} | {name} |" for kind, name in planned.plan.entries]
        needle = lower_ascii(planned.plan.text) if planned.plan.text is not None else None
        if not folder.is_dir() or folder.is_symlink() or not (names or needle):
            return []
        repo = Repository(folder)
        found: list[tuple[Repository, str, int]] = []
        for path in sorted(folder.glob("*.md")):
            text = repo.read_text(path.name) or ""
            lines = text.splitlines(keepends=True)
            kept = [x for x in lines if not (any(n in x for n in names) or (needle and needle in lower_ascii(x)))]
            if len(kept) != len(lines):
                found.append((repo, path.name, len(lines) - len(kept)))
                if write:
                    repo.write_text(path.name, "".join(kept))
        return found

    def _log_lines(self, owner: str, planned: Planned, write: bool = False) -> list[tuple[Repository, str, int]]:
        """Per log of the owner's learning-loop children: the lines holding the text (blanked when `write`)."""
        needle = lower_ascii(planned.plan.text) if planned.plan.text is not None else None
        if needle is None or self.tasks is None or not self.tasks.is_dir() or self.tasks.is_symlink():
            return []
        marks, named = placeholders("r", list(LOOP_ROLES))
        ids = self.library.store.read(
            lambda r: [str(i) for (i,) in r.tuples(f"SELECT id FROM tasks WHERE owner = :o AND role IN ({marks}) "
                                                   "AND status NOT IN ('starting', 'running')",
                                                   named | {"o": owner})]
        )  # fmt: skip
        repo = Repository(self.tasks)
        found: list[tuple[Repository, str, int]] = []
        for task in ids:
            name = f"{task}.log"
            try:
                text = repo.read_text(name) or ""
            except (InvalidInput, ValueError):  # a link out of the folder, not text: not read, not written
                continue
            lines = text.splitlines(keepends=True)
            kept = [ERASED_LINE if needle in lower_ascii(x) else x for x in lines]
            gone = sum(a is not b for a, b in zip(lines, kept, strict=True))
            if gone:
                found.append((repo, name, gone))
                if write:
                    repo.write_text(name, "".join(kept))
        return found


def _holds(row: Row, files: dict[str, str], needle: str) -> bool:
    parts = [row["name"], row["description"], row.get("body") or "", *files.values()]
    return any(needle in lower_ascii(str(p)) for p in parts)


def _protected(row: Row, files: dict[str, str]) -> str:
    """Why a loop may not erase this entry (learning/library.py's rule), or ""."""
    if row["pinned"]:
        return "pinned"
    if row["origin"] != "loop":
        return "written by a person"
    if row["kind"] == "skill" and files and files_digest(files) != row["digest"]:
        return "edited by hand"
    return ""


def _exported(line: str, ids: set[int], needle: str | None) -> bool:
    """A line threadloom's export wrote (learning/insights._line) for an erased insight or holding the text."""
    try:
        record = json.loads(line)
    except ValueError:
        return False
    if not isinstance(record, dict) or set(record) != {"id", "text", "up", "down", "at"}:
        return False
    text = record["text"]
    return record["id"] in ids or (needle is not None and isinstance(text, str) and needle in lower_ascii(text))
