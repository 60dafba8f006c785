"""Thread files: `<repo>/.threadloom/threads/<project>/<id>.md`, Markdown with YAML front matter,
committed with the code. Each file names its parent, so the tree is rebuilt from the files and
there is no index to conflict in git. Writes are atomic (temp file, fsync, rename) and
serialised across processes by a lock file; a hand-broken file is reported and skipped.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import yaml

from threadloom.errors import InvalidInput, NotFound
from threadloom.threads.model import Summary, Thread, check_thread_id

FOLDER: Final = ".threadloom"
_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Machine-local state never goes to git; thread files do.
GITIGNORE: Final = "# written by threadloom: machine-local state stays out of git\nlocal/\n*.lock\n"


@dataclass(frozen=True)
class Problem:
    path: str
    error: str


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ms(value: object) -> int:
    if isinstance(value, datetime):
        return int(value.replace(tzinfo=value.tzinfo or UTC).timestamp() * 1000)
    if isinstance(value, str):
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    raise ValueError(f"not a time: {value!r}")


def render(thread: Thread) -> str:
    front: dict[str, Any] = {
        "id": thread.id,
        "title": thread.title,
        "parent": thread.parent,
        "status": thread.status,
        "author": thread.author,
        "created": _iso(thread.created_at),
        "updated": _iso(thread.updated_at),
    }
    optional = {
        "branch": thread.branch,
        "commit": thread.commit,
        "paths": list(thread.paths),
        "outcome": thread.outcome,
    }
    front |= {k: v for k, v in optional.items() if v}
    header = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000)
    body = thread.summary.render()
    return f"---\n{header}---\n{body}\n" if body else f"---\n{header}---\n"


def parse(text: str, expected_id: str) -> Thread:
    if not text.startswith("---\n"):
        raise ValueError("no YAML front matter (the file must start with ---)")
    end = text.find("\n---", 4)
    if end < 0:
        raise ValueError("the front matter is not closed with ---")
    front = yaml.load(text[4:end], Loader=_LOADER)
    if not isinstance(front, dict):
        raise ValueError("the front matter is not a mapping")
    if front.get("id") != expected_id:
        raise ValueError(f"its id {front.get('id')!r} does not match the file name")
    body = text[end + 4 :].lstrip("-").lstrip("\n")
    paths = front.get("paths") or []
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ValueError("paths must be a list of strings")
    return Thread(
        id=expected_id,
        title=str(front["title"]),
        parent=front.get("parent") or None,
        status=str(front.get("status", "active")),
        author=str(front.get("author", "unknown")),
        created_at=_ms(front["created"]),
        updated_at=_ms(front["updated"]),
        summary=Summary.parse(body),
        branch=front.get("branch") or None,
        commit=front.get("commit") or None,
        paths=tuple(paths),
        outcome=front.get("outcome") or None,
    )


class ThreadFiles:
    """The thread files of one project in one repository."""

    def __init__(self, repo: Path, project: str) -> None:
        check_thread_id(project)  # a project id obeys the same rule: it names a folder
        self.repo = repo
        self.project = project
        self.base = repo / FOLDER
        self.folder = self.base / "threads" / project

    def path_of(self, thread_id: str) -> Path:
        return self.folder / f"{check_thread_id(thread_id)}.md"

    def load(self) -> tuple[dict[str, Thread], list[Problem]]:
        """Every readable thread, and what is wrong with the files that are not."""
        threads: dict[str, Thread] = {}
        problems: list[Problem] = []
        if not self.folder.is_dir():
            return threads, problems
        for path in sorted(self.folder.glob("*.md")):
            try:
                threads[path.stem] = parse(path.read_text(encoding="utf-8"), check_thread_id(path.stem))
            except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, yaml.YAMLError, InvalidInput) as exc:
                problems.append(Problem(str(path.relative_to(self.repo)), str(exc).splitlines()[0]))
        return threads, problems

    def read(self, thread_id: str) -> Thread:
        """One thread's file; NotFound when it is missing, InvalidInput when it is broken."""
        path = self.path_of(thread_id)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise NotFound(f"no thread {thread_id!r} in project {self.project}") from None
        try:
            return parse(text, thread_id)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
            raise InvalidInput(f"{path.relative_to(self.repo)} is broken: {str(exc).splitlines()[0]}") from None

    def chain(self, thread_id: str) -> list[Thread]:
        """A thread and its ancestors, nearest first, reading only their files. The walk stops at a
        missing or broken parent, or a cycle in hand-edited files."""
        found = [self.read(thread_id)]
        seen = {thread_id}
        while found[-1].parent is not None and found[-1].parent not in seen:
            try:
                found.append(self.read(found[-1].parent))
            except InvalidInput:
                break
            seen.add(found[-1].id)
        return found

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Serialise writers across processes (one lock per project folder)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._ensure_gitignore()
        fd = os.open(self.base / f"{self.project}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def write(self, thread: Thread) -> None:
        """Atomically replace one thread's file (call inside `locked()`)."""
        data = render(thread).encode("utf-8")
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{thread.id}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.path_of(thread.id))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def delete(self, thread_id: str) -> None:
        self.path_of(thread_id).unlink(missing_ok=True)

    def _ensure_gitignore(self) -> None:
        ignore = self.base / ".gitignore"
        if not ignore.exists():
            ignore.write_text(GITIGNORE, encoding="utf-8")
