"""The threads near the active one, bounded: its ancestors (one line each), its siblings and its
children, each list capped with a count of what was left out, so what `thread_context` returns costs
what the context costs however large the project (the whole tree is `threadloom://tree`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from threadloom.threads.model import Thread
from threadloom.threads.tree import Tree, label

MAX_SIBLINGS: Final = 8  # the active thread among them
MAX_CHILDREN: Final = 12
MAX_PROBLEMS: Final = 5
WHOLE: Final = "threadloom://tree or `threadloom thread tree` lists them all"


@dataclass(frozen=True)
class Outline:
    text: str
    shown: int  # threads named in `text`
    left_out: int  # the project's other threads
    problems: tuple[dict[str, Any], ...]
    problems_left_out: int


def outline(
    tree: Tree,
    active: str,
    problems: list[dict[str, Any]],
    siblings: int = MAX_SIBLINGS,
    children: int = MAX_CHILDREN,
) -> Outline:
    thread = tree.get(active)
    chain = [*reversed(tree.ancestors(active)), thread]
    lines = [label(chain[0], active)]
    shown = 1
    depth = 0
    for node in chain[1:-1]:  # each ancestor below the top, alone on its line
        lines.append(f"{'    ' * depth}└── {label(node, active)}")
        depth, shown = depth + 1, shown + 1
    indent = "    " * depth
    if len(chain) > 1:
        peers, more_peers = _nearest(tree.children(chain[-2].id), siblings, keep=thread.id)
        for n, peer in enumerate(peers):
            last = n == len(peers) - 1 and not more_peers
            lines.append(f"{indent}{'└── ' if last else '├── '}{label(peer, active)}")
            if peer.id == thread.id:
                lines += _children(tree, thread, children, indent + ("    " if last else "│   "))
        if more_peers:
            lines.append(f"{indent}└── … {more_peers} more sibling(s)")
        shown += len(peers)
    else:
        lines += _children(tree, thread, children, "")
    shown += min(len(tree.children(thread.id)), children)
    left_out = max(0, len(tree.threads) - shown)
    if left_out:
        lines.append(f"… and {left_out} other thread(s) in this project: {WHOLE}")
    kept = tuple(problems[:MAX_PROBLEMS])
    if len(problems) > len(kept):
        lines.append(f"… and {len(problems) - len(kept)} more unreadable file(s) or cycle(s): {WHOLE}")
    return Outline("\n".join(lines), shown, left_out, kept, len(problems) - len(kept))


def _nearest(threads: list[Thread], most: int, keep: str | None = None) -> tuple[list[Thread], int]:
    """At most `most` of `threads` (`keep` always among them, then the most recently updated), in
    their own order, and how many were left out."""
    if len(threads) <= most:
        return threads, 0
    ranked = sorted(threads, key=lambda t: (t.id != keep, -t.updated_at, t.id))[: max(1, most)]
    chosen = {t.id for t in ranked}
    return [t for t in threads if t.id in chosen], len(threads) - len(chosen)


def _children(tree: Tree, thread: Thread, most: int, prefix: str) -> list[str]:
    kids, more = _nearest(tree.children(thread.id), most)
    lines = [f"{prefix}{'└── ' if n == len(kids) - 1 and not more else '├── '}{label(k)}" for n, k in enumerate(kids)]
    if more:
        lines.append(f"{prefix}└── … {more} more child thread(s)")
    return lines
