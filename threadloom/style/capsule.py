"""The style capsule: what the agent is told about how the user writes and likes to work, its revision, and
the capsule / delta / ack answers.

The revision moves only inside a write (`refresh`, called by every write path in its own transaction), and
only when the content's digest changes; reads render the snapshot stored for the current revision, so a
hundred reads give one revision. A caller that names the revision it holds gets `ack` (nothing to repeat)
or a `delta` against the snapshot of its revision.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

from threadloom.store.base import Reader, Writer
from threadloom.style import i18n, rows
from threadloom.style.language import dominant
from threadloom.style.profile import render as render_preference
from threadloom.usermodel.egress import allows, withheld_line

Section = Literal["profile", "voice"]


@dataclass(frozen=True)
class Entry:
    key: str  # p:<profile id> or h:<habit id>
    section: Section
    kind: str  # a habit's kind, or a preference's key
    text: str
    example: str | None
    vendor: str  # the agent CLI it was first recorded with (the egress policy)

    def line(self, language: str) -> str:
        w = i18n.words(language)
        if self.section == "profile":
            return render_preference(self.kind, self.text, language)
        example = f' ({w["example"]} "{self.example}")' if self.example else ""
        return f'"{self.text}": {w.get(self.kind, self.kind)}{example}'


@dataclass(frozen=True)
class Content:
    language: str
    entries: tuple[Entry, ...]

    def to_json(self) -> str:
        return json.dumps({"language": self.language, "entries": [asdict(e) for e in self.entries]}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Content:
        data = json.loads(text)
        return cls(data["language"], tuple(Entry(**e) for e in data["entries"]))

    @property
    def digest(self) -> str:
        if not self.entries and self.language == "en":
            return ""  # what a user with no style memory has: no revision
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:20]


def build(r: Reader, owner: str) -> Content:
    """The content as the owner's rows stand now."""
    language = dominant(rows.state(r, owner)["languages"])
    entries = [Entry(f"p:{p.id}", "profile", p.key, p.text, None, p.vendor) for p in rows.profile(r, owner)]
    entries += [Entry(f"h:{h.id}", "voice", h.kind, h.text, h.example, h.vendor) for h in rows.capsule_habits(r, owner)]
    return Content(language, tuple(entries))


def refresh(w: Writer, owner: str, now: int) -> int:
    """After a write: a new revision (and its snapshot) when the content changed; the revision either way."""
    rows.ensure_state(w, owner, now)
    current = rows.state(w, owner)
    content = build(w, owner)
    if content.digest == current["digest"]:
        return int(current["revision"])
    revision = int(current["revision"]) + 1
    rows.set_revision(w, owner, revision, content.digest, content.to_json(), now)
    return revision


def current(r: Reader, owner: str) -> tuple[int, Content]:
    revision = int(rows.state(r, owner)["revision"])
    stored = rows.snapshot(r, owner, revision) if revision else None
    return revision, Content.from_json(stored) if stored else Content("en", ())


@dataclass(frozen=True)
class View:
    """What one reader may see of a content under the egress policy, and what was held back."""

    language: str
    entries: tuple[Entry, ...]
    withheld: dict[str, int]

    @classmethod
    def of(cls, content: Content, policy: str, reader: str) -> View:
        shown = tuple(e for e in content.entries if allows(policy, e.vendor, reader))
        held = [e for e in content.entries if e not in shown]
        withheld = {
            "profile preferences": sum(1 for e in held if e.section == "profile"),
            "style habits": sum(1 for e in held if e.section == "voice"),
        }
        return cls(content.language, shown, withheld)

    def lines(self, section: Section) -> list[str]:
        return [e.line(self.language) for e in self.entries if e.section == section]

    def text(self, revision: int) -> str:
        w = i18n.words(self.language)
        parts = [f"[style r{revision}, {self.language}] {w['header']}"]
        profile, voice = self.lines("profile"), self.lines("voice")
        if profile:
            parts += [f"{w['profile']}:"] + [f"- {line}" for line in profile]
        if voice:
            parts += [f"{w['voice']}:"] + [f"- {line}" for line in voice]
        if not profile and not voice:
            parts.append(w["empty"])
        return "\n".join(parts)


def answer(r: Reader, owner: str, known: int | None, policy: str, reader: str) -> dict[str, Any]:
    """`ack` when the caller holds the current revision, a `delta` from a revision still kept (same language),
    else the whole capsule."""
    revision, content = current(r, owner)
    view = View.of(content, policy, reader)
    base: dict[str, Any] = {"revision": revision, "language": view.language}
    held = withheld_line(policy, reader, view.withheld)
    if held:
        base["withheld"] = held
    if known is not None and known == revision:
        return {"mode": "ack", **base}
    old_text = rows.snapshot(r, owner, known) if known is not None and 0 < known < revision else None
    old = Content.from_json(old_text) if old_text else (Content("en", ()) if known == 0 else None)
    if old is not None and old.language == content.language:
        before = {e.key: e for e in View.of(old, policy, reader).entries}
        after = {e.key: e for e in view.entries}
        return {
            "mode": "delta",
            "from": known,
            **base,
            "added": [e.line(view.language) for k, e in after.items() if before.get(k) != e],
            "removed": [e.line(view.language) for k, e in before.items() if k not in after],
        }
    return {
        "mode": "capsule",
        **base,
        "text": view.text(revision),
        "profile": [{"id": e.key[2:], "text": e.line(view.language)} for e in view.entries if e.section == "profile"],
        "habits": [{"id": e.key[2:], "kind": e.kind, "text": e.text} for e in view.entries if e.section == "voice"],
    }
