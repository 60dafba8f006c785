"""`threadloom memory ...`: the memory graph from the terminal. Output is JSON, for people and scripts.

`recall` runs in the warm daemon when one answers (with its model), else here, loading the model first;
it says on stderr which search it used. The other commands run here, with full-text search only.
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer

from threadloom.agents import FORWARDED_ENV
from threadloom.cli.app import err, out, settings
from threadloom.cli.session import _safe, run_in_session
from threadloom.clock import instant
from threadloom.config import Settings
from threadloom.daemon import control
from threadloom.errors import InvalidInput
from threadloom.identity import Identity, Provenance
from threadloom.memory.model import Link, NewMemory, check_id
from threadloom.memory.recall import RecallFilters
from threadloom.runtime import Runtime
from threadloom.search.embedders import search_plan, search_report

DAEMON_RECALL_TIMEOUT_S = 90.0  # the daemon may first wait up to a minute for its model
LOCAL_MODEL_WAIT_S = 120.0
memory_app = typer.Typer(help="Store, recall and maintain the memory graph.", no_args_is_help=True)


@memory_app.command("store")
def store(
    content: str,
    category: Annotated[str | None, typer.Option(help="Free-form class, e.g. tooling.")] = None,
    kind: Annotated[
        str, typer.Option(help="fact, decision, preference, event, lesson, procedure, observation")
    ] = "fact",
    entity: Annotated[list[str] | None, typer.Option(help="A name it is about; repeatable.")] = None,
    related: Annotated[list[str] | None, typer.Option(help="ID:TYPE edge, e.g. m_...:caused_by; repeatable.")] = None,
    visibility: Annotated[str, typer.Option(help="private, project or org.")] = "private",
    pinned: Annotated[bool, typer.Option(help="Never forget it.")] = False,
) -> None:
    """Store a memory (exact duplicates return the existing one)."""
    links = []
    for spec in related or []:
        target, _, edge_type = spec.partition(":")
        links.append(Link(target, edge_type))
    new = NewMemory(
        content=content,
        category=category,
        kind=kind,
        entities=tuple(entity or ()),
        related=tuple(links),
        visibility=visibility,  # type: ignore[arg-type]
        pinned=pinned,
    )
    run_in_session(lambda rt, prov: rt.memory.store(new, prov).as_dict())


@memory_app.command("recall")
def recall(
    query: str,
    k: Annotated[int, typer.Option("-k", help="How many.")] = 10,
    concise: Annotated[bool, typer.Option(help="Only id, summary, status and score.")] = False,
    read_only: Annotated[bool, typer.Option(help="Do not reactivate what is found.")] = False,
    as_of: Annotated[str | None, typer.Option(help="What was held true then (ISO-8601 or epoch ms).")] = None,
) -> None:
    """Recall memories for a question, as the memory_recall tool does: full-text, vectors and graph fused.

    Runs in the daemon when one is running, where the model is already loaded (milliseconds). Otherwise it
    runs here: it loads the configured model first (a few seconds) or, with THREADLOOM_EMBEDDER=none or no
    model installed, searches full-text only. Which search it used goes to stderr; the result, JSON, to
    stdout. It acts as THREADLOOM_USER, in this folder's project.
    """
    config = settings()
    verbosity = "concise" if concise else "full"
    when = instant(as_of, "--as-of")
    if _recall_in_daemon(config, query, k, verbosity, read_only, when):
        return

    def act(rt: Runtime, prov: Provenance) -> Any:
        _load_model(rt)
        return rt.recall.recall(query, prov, k=k, verbosity=verbosity, read_only=read_only, as_of=when)

    run_in_session(act)


def _recall_in_daemon(config: Settings, query: str, k: int, verbosity: str, read_only: bool, as_of: int | None) -> bool:
    """Recall through the running daemon and print the result; False when no daemon could do it."""
    who = Identity.of({}, config.user, config.author, config.org)
    # The identity this terminal resolved (its settings, .env included), and the session id run_in_session uses.
    env = {key: os.environ[key] for key in FORWARDED_ENV if key in os.environ}
    env |= {"THREADLOOM_USER": who.user, "THREADLOOM_ORG": who.org} | (
        {"THREADLOOM_AUTHOR": who.author} if who.author else {}
    )
    env.setdefault("THREADLOOM_SESSION_ID", f"cli:{_safe(who.user)}")
    fields = {"query": query, "k": k, "verbosity": verbosity, "read_only": read_only, "as_of": as_of}
    reply = control.request(config.layout.socket, "recall", DAEMON_RECALL_TIMEOUT_S, env=env, cwd=os.getcwd(), **fields)
    if reply is None or not (reply.get("ok") or reply.get("refused")):
        return False  # no daemon, or one too old to recall: do it here
    if not reply.get("ok"):
        raise InvalidInput(str(reply.get("error")))
    said = _said(reply["search"], loaded_here=False)
    err.print(f"recalled by the daemon (pid {reply.get('pid')}); {said}", markup=False, soft_wrap=True)
    out.print_json(json.dumps(reply["result"], default=str))
    return True


def _load_model(rt: Runtime) -> None:
    """Load the configured model here before searching, and say which search this is and what loading took."""
    if search_plan(rt.settings).mode == "hybrid":
        err.print("no daemon running: loading the embedder here...", markup=False, soft_wrap=True)
        rt.start_embedder()
        rt.embedder.get(wait_s=LOCAL_MODEL_WAIT_S)
    err.print(_said(search_report(rt.settings, rt.embedder)), markup=False, soft_wrap=True)


def _said(search: dict[str, Any], loaded_here: bool = True) -> str:
    """Which search ran, and why, in one line; with how long loading took when it happened here."""
    cost = search.get("cost") or {}
    took = (
        f" (loaded in {cost['load_s']} s)" if loaded_here and search["mode"] == "hybrid" and cost.get("load_s") else ""
    )
    return f"searched {search['using']}{took}: {search['why']}"


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Search text; empty lists by latest activity.")] = "",
    category: Annotated[list[str] | None, typer.Option(help="Repeatable.")] = None,
    entity: Annotated[str | None, typer.Option()] = None,
    status: Annotated[list[str] | None, typer.Option(help="active, dormant or fading; repeatable.")] = None,
    since: Annotated[str | None, typer.Option(help="Stored since (ISO-8601 or epoch ms).")] = None,
    active_since: Annotated[str | None, typer.Option(help="Stored, recalled or reactivated since.")] = None,
    all_projects: Annotated[bool, typer.Option(help="Every project, not just this one.")] = False,
    k: Annotated[int, typer.Option("-k")] = 20,
) -> None:
    """Search or list memories by filters, without reactivating them."""
    filters = RecallFilters(
        categories=tuple(category or ()),
        entity=entity,
        statuses=tuple(status or ()),
        created_since=instant(since, "--since"),
        active_since=instant(active_since, "--active-since"),
        all_projects=all_projects,
    )
    run_in_session(lambda rt, prov: rt.recall.search(query, prov, filters, k))


@memory_app.command("explain")
def explain(memory_id: str) -> None:
    """A memory's score breakdown and whether it would be forgotten now."""
    run_in_session(lambda rt, prov: rt.recall.explain(memory_id, prov))


@memory_app.command("traverse")
def traverse(
    memory_id: str,
    depth: Annotated[int, typer.Option(help="Hops, 1-5.")] = 2,
    edge_type: Annotated[
        list[str] | None, typer.Option("--type", help="Follow only this edge type; repeatable.")
    ] = None,
) -> None:
    """The memories reachable from one, and every edge among them."""
    run_in_session(lambda rt, prov: rt.recall.traverse(memory_id, prov, depth, tuple(edge_type or ())))


@memory_app.command("stats")
def stats() -> None:
    """Counts of memories and edges, and the last maintenance pass."""
    run_in_session(lambda rt, prov: rt.recall.stats(prov))


@memory_app.command("pin")
def pin(memory_id: str, off: Annotated[bool, typer.Option("--off", help="Unpin instead.")] = False) -> None:
    """Pin a memory so it is never forgotten (--off unpins)."""
    run_in_session(lambda rt, prov: rt.memory.pin(memory_id, not off, prov).as_dict())


@memory_app.command("delete")
def delete(memory_id: str, yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False) -> None:
    """Delete a memory and its edges for good."""
    check_id(memory_id)  # before asking about it
    if not yes and not typer.confirm(f"delete {memory_id} and all its edges?"):
        raise typer.Exit(1)
    run_in_session(lambda rt, prov: rt.memory.delete(memory_id, prov))


@memory_app.command("core")
def core(
    key: Annotated[str | None, typer.Argument(help="Core slot; omit to list.")] = None,
    set_text: Annotated[str | None, typer.Option("--set", help="Text to put under the key.")] = None,
    priority: Annotated[int, typer.Option(help="0-100, higher shown first.")] = 50,
    remove: Annotated[bool, typer.Option(help="Take the key out of core memory.")] = False,
) -> None:
    """List core memories, or set / remove one."""

    if remove and set_text is not None:
        raise InvalidInput("--set and --remove do not go together")

    def act(rt: Runtime, prov: Provenance) -> Any:
        if key is not None and remove:
            rt.core.remove_core(key, prov)
        elif key is not None and set_text is not None:
            rt.core.set_core(key, set_text, prov, priority)
        elif key is not None:
            raise InvalidInput("with a key, give --set TEXT or --remove")
        return rt.recall.core_list(prov)

    run_in_session(act)


@memory_app.command("maintain")
def maintain(
    apply: Annotated[bool, typer.Option("--apply", help="Change the store (default: dry run).")] = False,
) -> None:
    """Rescore every memory, move it along the lifecycle and prune what nothing protects.

    A dry run by default: it reports what would change. Pruned memories stay restorable for 30 days.
    """
    run_in_session(lambda rt, prov: rt.maintenance.run(dry_run=not apply, viewer=prov.viewer()).as_dict())


@memory_app.command("restore")
def restore(memory_id: str) -> None:
    """Bring back a memory the maintenance pass pruned (within 30 days)."""
    run_in_session(lambda rt, prov: rt.maintenance.restore(memory_id, prov).as_dict())
