"""A store with two users' memories (amended, linked, core), notes, quotes and claims, built through the
real services, for the export/import tests and the bench."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.sqlite_template import fresh_home
from threadloom.config import Settings
from threadloom.identity import Provenance
from threadloom.memory.model import Link, NewMemory
from threadloom.runtime import Runtime, open_runtime
from threadloom.sessions import SessionInfo
from threadloom.style import StyleMemory
from threadloom.usermodel import UserModel

BOB_SECRET = "bobsprivatewombat"  # in every one of bob's items; never in alice's export


@dataclass
class World:
    rt: Runtime
    alice: Provenance
    bob: Provenance
    repo: Path

    def count(self, sql: str, params: dict[str, object] | None = None) -> int:
        return int(self.rt.store.read(lambda r: r.scalar(sql, params)))


def runtime(home: Path) -> Runtime:
    if not (home / "threadloom.db").exists():
        fresh_home(home)  # a copy of a store migrated once a run (tests/sqlite_template.py)
    return open_runtime(Settings(home=home, embedder="none", ingest=False, user="alice"), "cli")


def session(rt: Runtime, user: str, repo: Path) -> Provenance:
    info = SessionInfo(id=f"s-{user}", vendor="claude", transport="stdio", project=str(repo), cwd=str(repo), pid=None)
    info = SessionInfo(**{**info.__dict__, "user": user, "author": user, "org": user})
    rt.sessions.open(info)
    return info.provenance()


def build(tmp: Path) -> World:
    repo = tmp / "repo"
    repo.mkdir(exist_ok=True)
    rt = runtime(tmp / "home-a")
    alice, bob = session(rt, "alice", repo), session(rt, "bob", repo)
    mem = rt.memory
    first = mem.store(NewMemory(content="the build runs with make ci", entities=("make",)), alice).memory.id
    second = mem.store(NewMemory(content="deploys go out on Tuesdays", kind="decision"), alice).memory.id
    mem.store(NewMemory(content="release train\n```\n<script>alert(1)</script>\n```\n# not a heading"), alice)
    mem.store(NewMemory(content="use uv for python tooling", kind="preference"), alice, core_key="python.tool")
    mem.link(second, first, "depends_on", alice, reason="deploys need a green build")
    mem.amend(second, alice, content="deploys go out on Wednesdays", reason="moved")
    mem.store(NewMemory(content=f"bob keeps {BOB_SECRET} notes", visibility="project"), bob)
    mem.store(NewMemory(content=f"bob private {BOB_SECRET}"), bob)
    rt.threads.create_project(alice, "Rockets", "", "solo")
    rt.notes.add_note(alice, "tried the long fuse", "failed")
    rt.notes.add_quote(alice, "I want it to fly by Friday")
    rt.notes.add_quote(bob, f"bob says {BOB_SECRET}")
    model = UserModel(rt.store)
    claim = model.claim(alice, "prefers small pull requests", "workflow", statement="keep PRs small")["claim"]["id"]
    model.add_evidence(alice, claim, "support", "memory", first)
    model.claim(bob, f"bob likes {BOB_SECRET}", "other", statement=f"I like {BOB_SECRET}")
    style = StyleMemory(rt.store)
    style.hint(alice, [{"kind": "catchphrase", "text": "righto then", "example": "righto then, ship it"}])
    style.hint(alice, [], profile=["plan first, then implement"])
    style.hint(bob, [{"kind": "catchphrase", "text": BOB_SECRET, "example": f"{BOB_SECRET} again"}])
    return World(rt, alice, bob, repo)


__all__ = ["BOB_SECRET", "Link", "World", "build", "runtime", "session"]
