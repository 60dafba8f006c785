"""The thread tree, rebuilt from the files, and the context a session loads from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from threadloom.errors import InvalidInput, NotFound
from threadloom.threads.model import INHERITED, MAX_SYSTEM_CONTEXT_CHARS, SECTIONS, Summary, Thread

CHARS_PER_TOKEN: Final = 4  # a rough estimate, good enough to budget with
DEFAULT_MAX_TOKENS: Final = 25_000  # a context's budget when the caller names none
# The active thread's sections a budget cuts, in this order, once every ancestor is out; its Decisions
# and Constraints stay (cut only at their end when nothing else is left).
CUT_FIRST: Final = ("Open questions", "State", "Next steps")


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
        """Threads with no parent, or whose parent is missing (its file deleted or broken), then the
        oldest thread of each parent cycle (hand-made), so that no thread drops out of the tree."""
        tops = [t for t in self.threads.values() if t.parent is None or t.parent not in self.threads]
        entries = [self.threads[cycle[0]] for cycle in self.cycles()]
        return sorted(tops, key=_age) + entries

    def cycles(self) -> list[list[str]]:
        """Each parent cycle, oldest thread first, then each one's parent in turn."""
        found: list[list[str]] = []
        done: set[str] = set()
        for start in sorted(self.threads):
            path: list[str] = []
            on_path: set[str] = set()
            at: str | None = start
            while at is not None and at in self.threads and at not in done and at not in on_path:
                path.append(at)
                on_path.add(at)
                at = self.threads[at].parent
            if at is not None and at in on_path:
                cycle = path[path.index(at) :]
                first = cycle.index(min(cycle, key=lambda i: _age(self.threads[i])))
                found.append(cycle[first:] + cycle[:first])
            done.update(path)
        return sorted(found, key=lambda c: _age(self.threads[c[0]]))

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
            cycle = top and thread.parent is not None and thread.parent in self.threads
            text = label(thread, active, cycle)
            lines.append(text if top else f"{prefix}{'└── ' if last else '├── '}{text}")
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


def label(thread: Thread, active: str | None = None, cycle: bool = False) -> str:
    """A thread's line in a tree: its id, status and branch, and the active marker."""
    marks = [thread.status] if thread.status != "active" else []
    if cycle:
        marks.append("parent cycle")
    if thread.branch:
        marks.append(f"branch {thread.branch}")
    return thread.id + (f" [{', '.join(marks)}]" if marks else "") + ("  <- active" if thread.id == active else "")


def _age(t: Thread) -> tuple[int, str]:
    return (t.created_at, t.id)


@dataclass(frozen=True)
class Context:
    text: str
    tokens: int
    threads: tuple[str, ...]  # active first, then the ancestors included
    left_out: tuple[str, ...]  # ancestors the budget did not fit, farthest first
    caveats: tuple[str, ...] = ()  # what was cut, and where to read it whole


def assemble(
    tree: Tree,
    active: str,
    project_title: str,
    system_context: str = "",
    max_tokens: int | None = None,
    warnings: tuple[str, ...] = (),
    folder: str = ".threadloom/threads",
    lead: str = "",
) -> Context:
    """The active thread's whole summary plus only the Decisions and Constraints of its ancestors
    (siblings stay out), within `max_tokens` (default DEFAULT_MAX_TOKENS) for the whole text. Over
    it, the farthest ancestors go first, then the active thread's sections in CUT_FIRST order, then
    the text is cut at its end; the context and its caveats name each cut and where to read it all.
    `lead` (where the session is and why) opens the text."""
    budget = max(1, DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens) * CHARS_PER_TOKEN
    thread = tree.get(active)
    kept = tree.ancestors(active)  # nearest first
    sections = dict(thread.summary.sections)
    cuttable = [n for n in sections if n not in SECTIONS][::-1] + [n for n in CUT_FIRST if n in sections]
    whole = f"threadloom://thread/{thread.id} (or {folder}/{thread.id}.md) has the whole summary"
    system = system_context.strip()
    left_out: list[str] = []
    dropped: list[str] = []
    system_cut = len(system) > MAX_SYSTEM_CONTEXT_CHARS  # a hand-edited project file
    system = _cut(system, MAX_SYSTEM_CONTEXT_CHARS)

    def compose(cut_end: bool = False) -> tuple[str, str, list[str]]:
        """The body, the footer (with a short note of the cuts; `{tokens}` is filled in at the end),
        and the cuts said in full."""
        said, short = [], []
        if system_cut:
            said.append("cut the project's system context: thread_project lists it whole")
            short.append("system context")
        if left_out:
            said.append(
                f"left out the Decisions and Constraints of the ancestors {', '.join(left_out)} (farthest first): "
                "a larger max_tokens brings them back; threadloom://thread/<id> shows each"
            )
            short.append(f"ancestors {', '.join(left_out)}")
        if dropped:
            said.append(f"left out {', '.join(dropped)} of {thread.id}: {whole}")
            short.append(f"{', '.join(dropped)} of {thread.id}")
        if cut_end:
            said.append(f"cut the end of the context (of {thread.id}'s Decisions and Constraints): {whole}")
            short.append("the end")
        where = f"threadloom://thread/{thread.id} has it all" if dropped or cut_end else "threadloom://thread/<id>"
        head = (f"_{lead}_\n\n" if lead else "") + (f"## System context\n{system}\n\n---\n" if system else "")
        blocks = [_block(a, a.summary.render(only=INHERITED)) for a in reversed(kept)]
        notes = "".join(f"_⚠ {w}_\n" for w in warnings)
        blocks.append(_block(thread, Summary(sections).render(), notes, active=True))
        cut = f"_⚠ cut to fit ~{budget // CHARS_PER_TOKEN} tokens: {'; '.join(short)} ({where})_\n" if short else ""
        size = f"~{{tokens}} tokens, {len(kept) + 1} thread(s)"
        footer = f"\n---\n{cut}_threadloom context for {project_title}: {size}_\n"
        return head + "\n---\n".join(b for b in blocks if b), footer, said

    body, footer, said = compose()
    while len(body) + len(footer) > budget and (kept or cuttable):
        if kept:
            left_out.append(kept.pop().id)  # the farthest: the root end of the chain
        else:
            name = cuttable.pop(0)
            del sections[name]
            dropped.append(name)
        body, footer, said = compose()
    if len(body) + len(footer) > budget and system:  # then the standing instructions, before Decisions
        system_cut, system = True, ""
        body, footer, said = compose()
    if len(body) + len(footer) > budget:
        body, footer, said = compose(cut_end=True)
        body = _cut(body, budget - len(footer))
    tokens = estimate_tokens(body + footer)
    text = body + footer.replace("{tokens}", str(tokens))  # not format(): a title may hold braces
    return Context(text, tokens, (active, *[a.id for a in kept]), tuple(left_out), tuple(said))


def _block(t: Thread, body: str, notes: str = "", active: bool = False) -> str:
    """One thread's part of the context; an ancestor with nothing to pass down has none."""
    if not body and not active:
        return ""
    return f"## Thread: {t.title}{' (active)' if active else ''}\n{notes}{body}".rstrip() + "\n"


def _cut(text: str, chars: int) -> str:
    """At most `chars` characters of `text`'s start, ended at a line's (or a word's) end, marked as cut."""
    mark = "\n…\n"
    if len(text) <= chars:
        return text
    room = max(0, chars - len(mark))
    kept = text[: room + 1]
    for end in ("\n", " "):  # at a line's end, else at a word's
        if end in kept:
            kept = kept[: kept.rindex(end)]
            break
    kept = kept[:room].rstrip()
    return kept + mark if kept else ""
