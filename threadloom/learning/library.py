"""A user's skills and lessons: written by a person or by a learning loop, kept under the home, mirrored into
each installed agent CLI's skills folder, their views and uses counted.

Rules every write keeps:
- an entry is its owner's: another user's name is "not found", and their files are in another folder;
- a loop (origin "loop") cannot change or delete what a person wrote, what is pinned, nor a skill whose
  canonical files were edited by hand or made without threadloom: protection fails closed;
- what a loop writes passes the write-time screen (learning/screen.py) before anything is written;
- every limit (name, sizes) is checked before the first byte is written; credentials are scrubbed.

A skill's text is its folder under `<home>/skills/<user>/<name>/` (the row keeps its digest, so an edit by
hand is seen); a lesson's text is its row, rendered into `<home>/lessons/<user>.md` after each change.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from threadloom.clock import now_ms
from threadloom.errors import InvalidInput, NotFound
from threadloom.home import HomeLayout
from threadloom.identity import check_user
from threadloom.learning import entries, lessons
from threadloom.learning.entries import KINDS, MIRROR_JOB
from threadloom.learning.mirror import Mirror
from threadloom.learning.screen import check_loop_text
from threadloom.learning.skills import REFERENCES, SKILL_FILE, Skill, check_name, checked, files_digest, parse
from threadloom.scrub import SCRUB, Scrubber
from threadloom.store import jobs
from threadloom.store.base import Row, Store
from threadloom.threads.repository import Repository

if TYPE_CHECKING:
    from threadloom.runtime import Runtime

Origin = Literal["person", "loop"]
ORIGINS: Final = ("person", "loop")
MAX_SOURCE: Final = 200
# Lower case only: on a case-insensitive disk (macOS, Windows) "Ana" and "ana" would share a folder.
_PLAIN_USER: Final = re.compile(r"[a-z0-9][a-z0-9._@-]{0,63}")


def owner_folder(owner: str) -> str:
    """The folder name of a user's skills: the name itself when it is plain, else a digest of it (a user
    name may hold `/`, `..` or capitals; `~` marks the digest form, which no plain name can take)."""
    if _PLAIN_USER.fullmatch(owner) and ".." not in owner:
        return owner
    return "~" + hashlib.sha256(owner.encode()).hexdigest()[:24]


class Library:
    """The skills and lessons of every user of one home. `client_home` is the user's home folder whose CLI
    skills folders receive copies. Without it, the local servers (the daemon, `serve --in-process`) mirror
    into `Path.home()`, their user's; the HTTP server, which may serve users of other machines, and the CLI
    (mode "cli", which tests use) mirror nowhere until `threadloom skills mirror`."""

    def __init__(self, runtime: Runtime, *, client_home: Path | None = None) -> None:
        self.store = runtime.store
        self.scrubber = runtime.scrubber
        self.skills_root = runtime.settings.layout.skills
        self.lessons_root = runtime.settings.layout.lessons
        if client_home is None and runtime.mode in ("daemon", "in-process"):
            client_home = Path.home()
        self.mirror = Mirror(client_home) if client_home is not None else None

    @classmethod
    def at(cls, store: Store, layout: HomeLayout, client_home: Path | None, scrubber: Scrubber = SCRUB) -> Library:
        """The library of a store opened without a runtime (`threadloom forget` holds the store alone)."""
        library = cls.__new__(cls)
        library.store, library.scrubber = store, scrubber
        library.skills_root, library.lessons_root = layout.skills, layout.lessons
        library.mirror = Mirror(client_home) if client_home is not None else None
        return library

    # skills

    def write_skill(
        self,
        owner: str,
        name: str,
        description: str,
        body: str,
        origin: str,
        source: str,
        references: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create or replace skill `name` of `owner` (a loop may not replace a protected one)."""
        owner, origin, source = _who(owner, origin, source)
        skill = checked(name, description, body, references)
        if origin == "loop":
            check_loop_text(
                {"description": skill.description, "body": skill.body}
                | {f"reference {k}": v for k, v in skill.references.items()}
            )
        skill = Skill(
            skill.name,
            self.scrubber.text(skill.description),
            self.scrubber.text(skill.body),
            {k: self.scrubber.text(v) for k, v in skill.references.items()},
        )
        with self._locked(owner):
            repo = self._skills_repo(owner)
            row = self.store.read(lambda r: entries.get(r, owner, "skill", skill.name))
            on_disk = _canonical(repo, skill.name)
            if origin == "loop":
                _refuse_if_protected("skill", skill.name, row, on_disk)
            files = skill.files()
            for path, text in files.items():
                repo.write_text(f"{skill.name}/{path}", text)
            for path in sorted(set(on_disk or {}) - set(files)):
                repo.delete(f"{skill.name}/{path}")
            now = now_ms()
            self.store.write(
                lambda w: entries.put(
                    w, owner, "skill", skill.name, description=skill.description, body=None, origin=origin,
                    source=source, digest=files_digest(files), now=now,
                )
            )  # fmt: skip
            # Inside the lock: two writers of one skill must not interleave their copies' files.
            mirrors = [o.as_dict() for o in self.mirror.sync(owner, skill.name, files)] if self.mirror else []
            self._note_mirror(owner, mirrors)
        return {
            "kind": "skill",
            "name": skill.name,
            "origin": origin,
            "source": source,
            "created": row is None,
            "path": str(self.skills_root / owner_folder(owner) / skill.name / SKILL_FILE),
            "mirrors": mirrors,
        }

    # lessons

    def add_lesson(self, owner: str, text: str, origin: str, source: str) -> dict[str, Any]:
        """Add a lesson to `owner`'s lessons file; the same words added again are the same lesson."""
        owner, origin, source = _who(owner, origin, source)
        text = lessons.checked_text(text)
        if origin == "loop":
            check_loop_text({"lesson": text})
        text = self.scrubber.text(text)
        name = lessons.lesson_id(text)
        with self._locked(owner):
            row = self.store.read(lambda r: entries.get(r, owner, "lesson", name))
            if row is None:
                digest = hashlib.sha256(text.encode()).hexdigest()[:32]
                now = now_ms()
                self.store.write(
                    lambda w: entries.put(
                        w, owner, "lesson", name, description="", body=text, origin=origin, source=source,
                        digest=digest, now=now,
                    )
                )  # fmt: skip
            path = self._render_lessons(owner)
        return {
            "kind": "lesson",
            "name": name,
            "origin": row["origin"] if row else origin,
            "source": row["source"] if row else source,
            "created": row is None,
            "path": str(path),
        }

    # reading

    def listing(self, owner: str, kind: str | None = None) -> list[dict[str, Any]]:
        """`owner`'s skills and lessons (or one kind): name, description or the lesson's first line, who
        wrote it, pinned, views and uses."""
        owner = check_user(owner, "the owner")
        kinds = (_kind(kind),) if kind else KINDS
        rows = self.store.read(lambda r: entries.listing(r, owner, kinds, with_body=True))
        return [_summary(row) for row in rows]

    def show(self, owner: str, name: str, kind: str = "skill", mark: bool = True) -> dict[str, Any]:
        """One entry whole (a skill's SKILL.md and its references' names); counts a view when `mark`."""
        owner, kind = check_user(owner, "the owner"), _kind(kind)
        row = self._row(owner, kind, name)
        shown = _summary(row)
        if kind == "skill":
            on_disk = _canonical(self._skills_repo(owner), row["name"]) or {}
            shown["text"] = on_disk.get(SKILL_FILE, "")
            shown["references"] = sorted(p.split("/", 1)[1] for p in on_disk if p.startswith(f"{REFERENCES}/"))
            shown["path"] = str(self.skills_root / owner_folder(owner) / row["name"] / SKILL_FILE)
            shown["edited_by_hand"] = not on_disk or files_digest(on_disk) != row["digest"]
        else:
            shown["text"] = row["body"]
        if mark:
            self.store.write(lambda w: entries.mark(w, owner, kind, [row["name"]], "viewed", now_ms()))
            shown["viewed"] += 1
        return shown

    def reference(self, owner: str, name: str, file: str) -> str:
        """The text of one of a skill's reference files."""
        owner = check_user(owner, "the owner")
        row = self._row(owner, "skill", name)
        on_disk = _canonical(self._skills_repo(owner), row["name"]) or {}
        text = on_disk.get(f"{REFERENCES}/{file}")
        if text is None:
            raise NotFound(f"skill {name} has no reference {file[:80]!r}")
        return text

    def mark_used(self, owner: str, name: str, kind: str = "skill") -> dict[str, Any]:
        owner, kind = check_user(owner, "the owner"), _kind(kind)
        row = self._row(owner, kind, name)
        self.store.write(lambda w: entries.mark(w, owner, kind, [row["name"]], "used", now_ms()))
        return {"kind": kind, "name": row["name"], "used": row["used"] + 1}

    # curation

    def pin(
        self, owner: str, name: str, kind: str = "skill", pinned: bool = True, origin: str = "person"
    ) -> dict[str, Any]:
        """Pin an entry (no loop may then change or delete it), or unpin it: a person's act alone."""
        owner, kind, origin = check_user(owner, "the owner"), _kind(kind), _origin(origin)
        if origin == "loop" and not pinned:
            raise InvalidInput(f"{kind} {name} is pinned; only a person may unpin it")
        row = self._row(owner, kind, name)
        self.store.write(lambda w: entries.set_pinned(w, owner, kind, row["name"], pinned, now_ms()))
        if kind == "lesson":
            with self._locked(owner):
                self._render_lessons(owner)
        return {"kind": kind, "name": row["name"], "pinned": pinned}

    def delete(self, owner: str, name: str, kind: str = "skill", origin: str = "person") -> dict[str, Any]:
        """Delete an entry (a loop may not delete a protected one) and threadloom's copies of it."""
        owner, kind, origin = check_user(owner, "the owner"), _kind(kind), _origin(origin)
        with self._locked(owner):
            row = self._row(owner, kind, name)
            if kind == "skill":
                repo = self._skills_repo(owner)
                on_disk = _canonical(repo, row["name"])
                if origin == "loop":
                    _refuse_if_protected(kind, row["name"], row, on_disk)
                _drop_folder(repo, row["name"], on_disk)
            elif origin == "loop":
                _refuse_if_protected(kind, row["name"], row, None)
            self.store.write(lambda w: entries.remove(w, owner, kind, row["name"]))
            if kind == "lesson":
                self._render_lessons(owner)
            mirrors = []
            if self.mirror is not None and kind == "skill":
                mirrors = [o.as_dict() for o in self.mirror.remove(owner, row["name"])]
        return {"kind": kind, "name": row["name"], "deleted": True, "mirrors": mirrors}

    def drop_files(self, owner: str, name: str) -> list[dict[str, str]]:
        """Remove skill `name`'s folder and copies, its row gone already (erasure/learning.py, under `_locked`)."""
        repo = self._skills_repo(owner)
        _drop_folder(repo, check_name(name), _canonical(repo, name))
        return [o.as_dict() for o in self.mirror.remove(owner, name)] if self.mirror is not None else []

    def mirror_all(self, owner: str) -> dict[str, Any]:
        """Write every skill of `owner` into the installed CLIs' skills folders; report what each folder
        did and every SKILL.md there that cannot be loaded."""
        owner = check_user(owner, "the owner")
        if self.mirror is None:
            raise InvalidInput("no home folder to mirror into was given")
        written: dict[str, list[dict[str, str]]] = {}
        with self._locked(owner):
            repo = self._skills_repo(owner)
            for row in self.store.read(lambda r: entries.listing(r, owner, ("skill",))):
                files = _canonical(repo, row["name"]) or {}
                try:  # a canonical SKILL.md broken by hand is not copied where every CLI would choke on it
                    parse(files.get(SKILL_FILE, ""), folder=row["name"])
                except InvalidInput as exc:
                    written[row["name"]] = [{"folder": str(repo.root), "status": "broken", "detail": exc.message}]
                    continue
                written[row["name"]] = [o.as_dict() for o in self.mirror.sync(owner, row["name"], files)]
            self._note_mirror(owner, [o | {"skill": name} for name, got in written.items() for o in got])
        return {"folders": [str(p) for p in self.mirror.roots()], "skills": written, "broken": self.mirror.scan()}

    def report(self, owner: str) -> dict[str, Any]:
        """For status: `owner`'s entries by kind and origin, how many are pinned, and every SKILL.md in the
        installed CLIs' skills folders that cannot be loaded."""
        rows = self.listing(owner)
        counts: dict[str, int] = {}
        for row in rows:
            key = f"{row['kind']}s_{row['origin']}"
            counts[key] = counts.get(key, 0) + 1
        broken = self.mirror.scan() if self.mirror is not None else []
        return {"entries": counts, "pinned": sum(r["pinned"] for r in rows), "broken_skill_files": broken}

    # the mechanism

    def _note_mirror(self, owner: str, outcomes: list[dict[str, str]]) -> None:
        """For `status` (harvest.learning_status): a refused folder, a hand-edited or unloadable copy of theirs."""
        if self.mirror is None:
            return
        problems = [o for o in outcomes if o["status"] not in ("written", "unchanged", "removed", "absent")]
        outcome = {"problems": problems[:20], "broken": self.mirror.scan(owner)[:20]}
        now = now_ms()
        self.store.write(lambda w: jobs.record_run(w, MIRROR_JOB + owner, now, now, False, outcome))

    def _row(self, owner: str, kind: str, name: str) -> Row:
        if kind == "skill":
            check_name(name)
        row = self.store.read(lambda r: entries.get(r, owner, kind, name))
        if row is None:
            raise NotFound(f"no {kind} named {str(name)[:80]!r}")
        return row

    def _skills_repo(self, owner: str) -> Repository:
        folder = self.skills_root / owner_folder(owner)
        _private_dirs(folder)
        return Repository(folder)

    def _render_lessons(self, owner: str) -> Path:
        rows = self.store.read(lambda r: entries.listing(r, owner, ("lesson",), with_body=True))
        return lessons.write_file(self.lessons_root, owner_folder(owner) + ".md", rows)

    @contextmanager
    def _locked(self, owner: str) -> Iterator[None]:
        """One writer at a time per user, across processes: a skill's files and its row change together."""
        _private_dirs(self.skills_root)
        fd = os.open(self.skills_root / f".{owner_folder(owner)}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _who(owner: str, origin: str, source: str) -> tuple[str, str, str]:
    owner = check_user(owner, "the owner")
    if not isinstance(source, str) or not source.strip() or len(source) > MAX_SOURCE:
        raise InvalidInput(f"source is a short reference to where it came from (1-{MAX_SOURCE} characters)")
    return owner, _origin(origin), " ".join(source.split())


def _origin(origin: str) -> str:
    if origin not in ORIGINS:
        raise InvalidInput(f"origin is person or loop, not {str(origin)[:40]!r}")
    return origin


def _kind(kind: str | None) -> str:
    if kind not in KINDS:
        raise InvalidInput(f"kind is skill or lesson, not {str(kind)[:40]!r}")
    return kind


def _refuse_if_protected(kind: str, name: str, row: Row | None, on_disk: dict[str, str] | None) -> None:
    """A loop's change of a protected entry is refused, saying why."""
    why = ""
    if row is None and on_disk:
        why = "its folder was made without threadloom"
    elif row is not None and row["pinned"]:
        why = "it is pinned"
    elif row is not None and row["origin"] != "loop":
        why = "a person wrote it"
    elif row is not None and kind == "skill" and on_disk is not None and files_digest(on_disk) != row["digest"]:
        why = "it was edited by hand since it was written"
    if why:
        raise InvalidInput(f"{kind} {name} is protected ({why}): a learning loop may not change or delete it")


def _drop_folder(repo: Repository, name: str, on_disk: dict[str, str] | None) -> None:
    for path in sorted(on_disk or {}):
        repo.delete(f"{name}/{path}")
    for folder in (f"{name}/{REFERENCES}", name):
        with suppress(OSError):
            os.rmdir(repo.root / folder)


def _canonical(repo: Repository, name: str) -> dict[str, str] | None:
    """The files of skill `name`'s canonical folder by path, or None when it has none."""
    skill_md = repo.read_text(f"{name}/{SKILL_FILE}")
    refs, _ = repo.read_folder(f"{name}/{REFERENCES}", "")
    if skill_md is None and not refs:
        return None
    files = {f"{REFERENCES}/{k}": v for k, v in refs.items() if not k.startswith(".")}  # not a write's temp file
    if skill_md is not None:
        files[SKILL_FILE] = skill_md
    return files


def _summary(row: Row) -> dict[str, Any]:
    about = row["description"] if row["kind"] == "skill" else str(row.get("body") or "").strip().split("\n")[0][:200]
    return {
        "kind": row["kind"],
        "name": row["name"],
        "about": about,
        "origin": row["origin"],
        "source": row["source"],
        "pinned": bool(row["pinned"]),
        "protected": bool(row["pinned"]) or row["origin"] != "loop",
        "viewed": row["viewed"],
        "used": row["used"],
        "updated_at": row["updated_at"],
    }


def _private_dirs(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
