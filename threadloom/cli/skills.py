"""`threadloom skills ...`: your skills and lessons as a person sees them. What you add here is
person-written, and with pin, unpin and rm it is the one place protection is lifted: learning loops may
never change or delete a person's entry or a pinned one. Writes mirror into the installed agent CLIs'
skills folders under your home folder (`mirror` does all of them again and reports broken SKILL.md files)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from threadloom.cli.session import run_in_session
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.learning.library import Library
from threadloom.learning.skills import MAX_FILE, REFERENCES, SKILL_FILE, parse
from threadloom.runtime import Runtime

skills_app = typer.Typer(help="Skills and lessons: list, read, add, pin, remove, mirror, status.", no_args_is_help=True)
Lesson = Annotated[bool, typer.Option("--lesson", help="A lesson (by its id) rather than a skill.")]


def _library(rt: Runtime) -> Library:
    return Library(rt, client_home=Path.home())


def _kind(lesson: bool) -> str:
    return "lesson" if lesson else "skill"


@skills_app.command("list")
def list_entries(
    kind: Annotated[str | None, typer.Option(help="skill or lesson.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Your skills and lessons: who wrote each (person or loop), pinned, views and uses."""

    def act(rt: Runtime, prov: Provenance) -> Any:
        rows = Library(rt).listing(prov.viewer().user, kind)
        if as_json:
            return rows
        lines = [
            f"{r['kind']:<6} {r['name']:<32} {r['origin']:<6} {'pinned' if r['pinned'] else '':<6} "
            f"viewed {r['viewed']:<4} used {r['used']:<4} {r['about'][:60]}"
            for r in rows
        ]
        return "\n".join(lines) or "no skills or lessons yet"

    run_in_session(act, as_json=as_json)


@skills_app.command("show")
def show(name: str, lesson: Lesson = False) -> None:
    """A skill's SKILL.md (and its references' names), or a lesson, with its provenance."""
    run_in_session(lambda rt, prov: Library(rt).show(prov.viewer().user, name, _kind(lesson)))


@skills_app.command("add")
def add(
    path: Annotated[Path, typer.Argument(help="A SKILL.md, or a skill folder holding one (and references/).")],
    source: Annotated[str, typer.Option(help="Where it came from.")] = "cli",
) -> None:
    """Add or replace a skill you wrote (person-written: no loop may change or delete it)."""
    folder = path if path.is_dir() else path.parent
    skill_md = folder / SKILL_FILE if path.is_dir() else path
    skill = parse(_read(skill_md))
    refs_dir = folder / REFERENCES
    refs = {p.name: _read(p) for p in sorted(refs_dir.iterdir()) if p.is_file()} if refs_dir.is_dir() else None
    run_in_session(
        lambda rt, prov: _library(rt).write_skill(
            prov.viewer().user, skill.name, skill.description, skill.body, "person", source, refs
        )
    )


@skills_app.command("lesson")
def lesson(text: str, source: Annotated[str, typer.Option(help="Where it came from.")] = "cli") -> None:
    """Add a lesson you wrote to your lessons file."""
    run_in_session(lambda rt, prov: Library(rt).add_lesson(prov.viewer().user, text, "person", source))


@skills_app.command("pin")
def pin(name: str, lesson: Lesson = False) -> None:
    """Pin an entry: no learning loop may change or delete it."""
    run_in_session(lambda rt, prov: Library(rt).pin(prov.viewer().user, name, _kind(lesson), True, "person"))


@skills_app.command("unpin")
def unpin(name: str, lesson: Lesson = False) -> None:
    """Unpin an entry (a loop's own entries become theirs to revise again)."""
    run_in_session(lambda rt, prov: Library(rt).pin(prov.viewer().user, name, _kind(lesson), False, "person"))


@skills_app.command("rm")
def remove(
    name: str, lesson: Lesson = False, yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False
) -> None:
    """Delete an entry for good, with threadloom's copies in the CLIs' skills folders (not copies edited by
    hand, nor folders threadloom did not make)."""
    if not yes and not typer.confirm(f"delete {_kind(lesson)} {name}?"):
        raise typer.Exit(1)
    run_in_session(lambda rt, prov: _library(rt).delete(prov.viewer().user, name, _kind(lesson), "person"))


@skills_app.command("status")
def status() -> None:
    """Your entries by kind and origin, how many are pinned, and each SKILL.md in the installed CLIs'
    skills folders that no client could load (bad front matter, a name that is not its folder's)."""
    run_in_session(lambda rt, prov: _library(rt).report(prov.viewer().user))


@skills_app.command("mirror")
def mirror() -> None:
    """Write every skill of yours into each installed CLI's skills folder again; report what each folder did
    and any SKILL.md there that cannot be loaded."""
    run_in_session(lambda rt, prov: _library(rt).mirror_all(prov.viewer().user))


def _read(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_FILE:
            raise InvalidInput(f"{path} is larger than {MAX_FILE // 1024} KiB")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {path}: {exc}") from None
