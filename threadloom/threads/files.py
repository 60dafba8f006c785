"""Thread files: `<repo>/.threadloom/threads/<project>/<id>.md`, Markdown with YAML front matter,
committed with the code. Each file names its parent, so the tree is rebuilt from the files and
there is no index to conflict in git. Every read and write goes through `Repository` (no symlink
out of the repository is followed; writes are atomic: temp file, fsync, rename), writers are
serialised across processes by a lock file, and a hand-broken file is reported and skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Final

import yaml

from threadloom.errors import InvalidInput, NotFound
from threadloom.threads.file_cache import FileCache
from threadloom.threads.model import Summary, Thread, check_thread_id
from threadloom.threads.repository import MAX_FILE_BYTES, Repository

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
        return round(value.replace(tzinfo=value.tzinfo or UTC).timestamp() * 1000)
    if isinstance(value, str):
        return round(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    raise ValueError(f"not a time: {scalar(value, 'a time')!r}")


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


def checked(thread: Thread) -> str:
    """The file's whole new text, validated before anything is written: the thread within its limits,
    and the text read back giving the same thread (no value can change the file's structure)."""
    thread.check()
    text = render(thread)
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise InvalidInput(f"the file of {thread.id} would be larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        back = parse(text, thread.id)
    except (ValueError, KeyError, TypeError, yaml.YAMLError, InvalidInput):
        back = None
    if back != thread:
        raise InvalidInput(f"{thread.id} cannot be written as it would not read back the same: nothing was written")
    return text


def parse(text: str, expected_id: str) -> Thread:
    # A byte-order mark or Windows line ends (an editor, git's autocrlf) change nothing.
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise ValueError("no YAML front matter (the file must start with ---)")
    end = text.find("\n---", 4)
    if end < 0:
        raise ValueError("the front matter is not closed with ---")
    front = yaml.load(text[4:end], Loader=_LOADER)
    if not isinstance(front, dict):
        raise ValueError("the front matter is not a mapping")
    if front.get("id") != expected_id:
        raise ValueError(f"its id {scalar(front.get('id'), 'id')!r} does not match the file name")
    body = text[end + 4 :].lstrip("-").lstrip("\n")
    paths = front.get("paths") or []
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ValueError("paths must be a list of strings")
    return Thread(
        id=expected_id,
        title=scalar(front["title"], "title"),
        parent=_optional(front.get("parent"), "parent"),
        status=scalar(front.get("status", "active"), "status"),
        author=scalar(front.get("author", "unknown"), "author"),
        created_at=_ms(front["created"]),
        updated_at=_ms(front["updated"]),
        summary=Summary.parse(body),
        branch=_optional(front.get("branch"), "branch"),
        commit=_optional(front.get("commit"), "commit"),
        paths=tuple(paths),
        outcome=_optional(front.get("outcome"), "outcome"),
    )


def scalar(value: object, what: str) -> str:
    """A front-matter value as text. A list or a mapping is refused unread: YAML aliases let a hostile
    file make one enormous (nine nested lists of nine are 9**9 items once printed)."""
    if not isinstance(value, str | int | float | date):  # bool is an int, datetime a date
        raise ValueError(f"{what} must be text, not a {type(value).__name__}")
    return str(value)


def _optional(value: object, what: str) -> str | None:
    return None if value is None or value == "" else scalar(value, what)


def _parse_file(text: str, name: str) -> Thread:
    return parse(text, check_thread_id(name[:-3]))


_PARSED: Final = FileCache(_parse_file, (ValueError, KeyError, TypeError, yaml.YAMLError, InvalidInput))


class ThreadFiles:
    """The thread files of one project in one repository, read and written through `Repository`."""

    def __init__(self, repo: Path | Repository, project: str) -> None:
        check_thread_id(project)  # a project id obeys the same rule: it names a folder
        self.files = repo if isinstance(repo, Repository) else Repository(repo)
        self.repo = self.files.root
        self.project = project
        self.base = self.repo / FOLDER
        self.folder = self.base / "threads" / project
        self._folder = f"{FOLDER}/threads/{project}"
        self._lock = f"{FOLDER}/{project}.lock"

    def rel_of(self, thread_id: str) -> str:
        return f"{self._folder}/{check_thread_id(thread_id)}.md"

    def path_of(self, thread_id: str) -> Path:
        return self.repo / self.rel_of(thread_id)

    def load(self) -> tuple[dict[str, Thread], list[Problem]]:
        """Every readable thread, and what is wrong with the files that are not (a link out of the
        repository among them: reported, never followed). Only files changed since the last load in
        this process are read and parsed (`file_cache`)."""
        found, unreadable = _PARSED.load(self.files, self._folder, ".md")
        threads = {name[:-3]: thread for name, thread in found.items()}
        problems = [Problem(f"{self._folder}/{name}", error) for name, error in unreadable.items()]
        return threads, sorted(problems, key=lambda p: p.path)

    def read(self, thread_id: str) -> Thread:
        """One thread's file; NotFound when it is missing, InvalidInput when it is broken or refused."""
        rel = self.rel_of(thread_id)
        text = self.files.read_text(rel)
        if text is None:
            raise NotFound(f"no thread {thread_id!r} in project {self.project}")
        try:
            return parse(text, thread_id)
        except (ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
            raise InvalidInput(f"{rel} is broken: {str(exc).splitlines()[0]}") from None

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

    def check(self) -> None:
        """Refuse now (naming the link) whatever `locked()` and `write()` would refuse."""
        for rel in (self._folder, f"{FOLDER}/.gitignore"):
            self.files.check(rel)
        self.files.check(self._lock, "lock")

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Serialise writers across processes (one lock per project folder)."""
        self.check()
        self.files.make_folder(self._folder)
        self.files.write_text(f"{FOLDER}/.gitignore", GITIGNORE, replace=False)
        with self.files.locked(self._lock):
            yield

    def write(self, thread: Thread) -> None:
        """Atomically replace one thread's file (call inside `locked()`), validated first."""
        self.put(thread.id, checked(thread))

    def put(self, thread_id: str, text: str, replace: bool = True) -> bool:
        """Write a thread file's text whole (from `checked`). With `replace` False a file of that name,
        readable or not, is left as it is and False returned."""
        return self.files.write_text(self.rel_of(thread_id), text, replace=replace)

    def restore(self, thread_id: str, text: str | None) -> None:
        """Put a file back as it was read (`None`: it did not exist)."""
        if text is None:
            self.delete(thread_id)
        else:
            self.put(thread_id, text)

    def raw(self, thread_id: str) -> str | None:
        """A thread file's text as it is, or None when it does not exist."""
        return self.files.read_text(self.rel_of(thread_id))

    def names(self, problems: list[Problem]) -> set[str]:
        """The ids the files named in `problems` hold: taken, though unreadable."""
        prefix = f"{self._folder}/"
        return {p.path.removeprefix(prefix).removesuffix(".md") for p in problems if p.path.startswith(prefix)}

    def delete(self, thread_id: str) -> None:
        self.files.delete(self.rel_of(thread_id))
