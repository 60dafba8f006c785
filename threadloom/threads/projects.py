"""A repository's projects: `.threadloom/projects/<id>.yaml` (title, standing instructions, mode),
committed with the code beside the thread files and read and written through `Repository`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import yaml

from threadloom.errors import InvalidInput
from threadloom.threads.files import scalar
from threadloom.threads.model import check_thread_id, slugify
from threadloom.threads.repository import Repository

PROJECTS: Final = ".threadloom/projects"
_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Project:
    id: str
    title: str
    system_context: str
    mode: str


def load_projects(repo: Repository) -> tuple[dict[str, Project], list[str]]:
    """Every readable project, and why each other project file was skipped."""
    texts, unreadable = repo.read_folder(PROJECTS, ".yaml")
    skipped = [f"skipped {PROJECTS}/{name}: {error}" for name, error in unreadable.items()]
    found: dict[str, Project] = {}
    for name, text in texts.items():
        stem = name.removesuffix(".yaml")
        try:
            data = yaml.load(text, Loader=_LOADER) or {}
            found[check_thread_id(stem)] = Project(
                stem,
                scalar(data["title"], "title"),
                scalar(data.get("system_context", ""), "system_context"),
                scalar(data.get("mode", "solo"), "mode"),
            )
        except (KeyError, TypeError, ValueError, yaml.YAMLError, InvalidInput) as exc:
            skipped.append(f"skipped {PROJECTS}/{name}: {str(exc).splitlines()[0]}")
    return found, skipped


def create_project_file(
    repo: Repository,
    title: str,
    system_context: str,
    mode: str,
    check: Callable[[str], None],
    record: Callable[[str, str], None] = lambda rel, text: None,
) -> Project:
    """Write a new project's file under an id made from its title that no file holds yet: a file that
    exists is never replaced, so racing creators get an id each. `check(id)` runs before the file
    is written, to refuse the project's other paths first; `record(rel, text)` just before it is written."""
    taken = set(load_projects(repo)[0])
    while True:
        project = Project(slugify(title, taken), title.strip(), system_context.strip(), mode)
        check(project.id)
        data = {"title": project.title, "system_context": project.system_context, "mode": project.mode}
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        record(f"{PROJECTS}/{project.id}.yaml", text)
        if repo.write_text(f"{PROJECTS}/{project.id}.yaml", text, replace=False):
            return project
        taken.add(project.id)  # a broken file holds the name, or another process won it
