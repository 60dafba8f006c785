"""The thread tree, rebuilt from the files, and the context a session loads from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from threadloom.errors import InvalidInput, NotFound
from threadloom.threads.model import INHERITED, Thread

CHARS_PER_TOKEN: Final = 4  # a rough estimate, good enough to budget with


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


class Tree:
    def __init__(self, threads: dict[str, Thread]) -> None:
        self.threads = threads

    def get(self, thread_id: str) -> Thread:
        thread = self.threads.get(thread_id)
        if thread is None:
            raise NotFound(f"no thread {thread_id!r}; `thread tree` lists them")
        return thread

    def children(self, thread_id: str | None) -> list[Thread]:
        kids = [t for t in self.threads.values() if t.parent == thread_id]
        return sorted(kids, key=lambda t: (t.created_at, t.id))

    def roots(self) -> list[Thread]:
        """Threads with no parent, or whose parent is missing (its file deleted or broken)."""
        return sorted(
            (t for t in self.threads.values() if t.parent is None or t.parent not in self.threads),
            key=lambda t: (t.created_at, t.id),
        )

    def ancestors(self, thread_id: str) -> list[Thread]:
        """Parent first, root last; a cycle in hand-edited files stops the walk instead of looping."""
        found: list[Thread] = []
        seen = {thread_id}
        parent = self.get(thread_id).parent
        while parent is not None and parent in self.threads and parent not in seen:
            seen.add(parent)
            found.append(self.threads[parent])
            parent = self.threads[parent].parent
        return found

    def descendants(self, thread_id: str) -> list[Thread]:
        found: list[Thread] = []
        frontier = [thread_id]
        seen = {thread_id}
        while frontier:
            nxt = []
            for tid in frontier:
                for child in self.children(tid):
                    if child.id not in seen:
                        seen.add(child.id)
                        found.append(child)
                        nxt.append(child.id)
            frontier = nxt
        return found

    def check_move(self, thread_id: str, new_parent: str) -> None:
        """Refuse a move that would put a thread under itself."""
        self.get(thread_id)
        self.get(new_parent)
        if new_parent == thread_id or new_parent in {t.id for t in self.descendants(thread_id)}:
            raise InvalidInput(f"{new_parent} is {thread_id} or below it: moving there would make a cycle")

    def render(self, active: str | None = None) -> str:
        """An ASCII tree with each thread's status, branch and the active marker."""
        lines: list[str] = []

        def walk(thread: Thread, prefix: str, last: bool, top: bool, seen: set[str]) -> None:
            marks = [thread.status] if thread.status != "active" else []
            if thread.branch:
                marks.append(f"branch {thread.branch}")
            label = (
                thread.id + (f" [{', '.join(marks)}]" if marks else "") + ("  <- active" if thread.id == active else "")
            )
            lines.append(label if top else f"{prefix}{'└── ' if last else '├── '}{label}")
            kids = [k for k in self.children(thread.id) if k.id not in seen]
            for n, kid in enumerate(kids):
                walk(
                    kid,
                    prefix if top else prefix + ("    " if last else "│   "),
                    n == len(kids) - 1,
                    False,
                    seen | {kid.id},
                )

        for root in self.roots():
            walk(root, "", True, True, {root.id})
        return "\n".join(lines)


@dataclass(frozen=True)
class Context:
    text: str
    tokens: int
    threads: tuple[str, ...]  # active first, then the ancestors included
    left_out: tuple[str, ...]  # ancestors the budget did not fit, farthest first


def assemble(
    tree: Tree,
    active: str,
    project_title: str,
    system_context: str = "",
    max_tokens: int | None = None,
    warnings: tuple[str, ...] = (),
) -> Context:
    """The active thread's whole summary plus only the Decisions and Constraints of its ancestors
    (siblings stay out). Over `max_tokens`, the farthest ancestors are left out first."""
    thread = tree.get(active)
    ancestors = tree.ancestors(active)  # nearest first
    head = f"## System context\n{system_context.strip()}\n\n---\n" if system_context.strip() else ""

    def block(t: Thread, whole: bool) -> str:
        title = f"## Thread: {t.title}" + (" (active)" if whole else "")
        body = t.summary.render() if whole else t.summary.render(only=INHERITED)
        notes = "".join(f"_⚠ {w}_\n" for w in warnings) if whole else ""
        return f"{title}\n{notes}{body}".rstrip() + "\n"

    active_block = block(thread, True)
    kept = list(ancestors)
    left_out: list[str] = []
    while True:
        blocks = [block(a, False) for a in reversed(kept) if a.summary.render(only=INHERITED)]
        text = head + "\n---\n".join([*blocks, active_block])
        footer = f"\n---\n_threadloom context for {project_title}: ~{{tokens}} tokens, {len(kept) + 1} thread(s)_\n"
        tokens = estimate_tokens(text + footer)
        if max_tokens is None or tokens <= max_tokens or not kept:
            break
        left_out.append(kept.pop().id)  # the farthest: the root end of the chain
    text += footer.format(tokens=tokens)
    return Context(text, tokens, (active, *[a.id for a in kept]), tuple(left_out))
