"""`threadloom consolidate`: merge your near-duplicate memories, notes and quotes, idle this repository's stale
threads and release what gone sessions held (consolidate/service.py). A dry run unless --apply."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from threadloom.cli.app import err
from threadloom.cli.session import run_in_session
from threadloom.consolidate.report import render
from threadloom.consolidate.service import KINDS, Options, for_runtime
from threadloom.consolidate.sources import sources_of
from threadloom.errors import InvalidInput
from threadloom.identity import Provenance
from threadloom.runtime import Runtime
from threadloom.search.embedders import search_plan

MODEL_WAIT_S = 120.0


def consolidate(
    apply: Annotated[bool, typer.Option("--apply", help="Merge, idle and release; else nothing changes.")] = False,
    kind: Annotated[list[str] | None, typer.Option(help=f"Repeatable: {', '.join(KINDS)} (default all).")] = None,
    threads: Annotated[bool, typer.Option(help="Idle this repository's stale threads.")] = True,
    release: Annotated[bool, typer.Option(help="Release claims and tasks of gone sessions.")] = True,
    sources: Annotated[str | None, typer.Option(help="Instead: what was merged into this memory id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Find your near-duplicate memories, notes and quotes (by their words and the model's cosine) and merge
    each into one survivor that keeps every edge and source; the rest are superseded, not deleted. A dry
    run by default: the report says what would merge into what, with the similarity and why."""

    kinds = tuple(kind) if kind else KINDS
    if any(k not in KINDS for k in kinds):
        raise InvalidInput(f"kinds are one or more of {', '.join(KINDS)}")

    def act(rt: Runtime, prov: Provenance) -> dict[str, Any] | str:
        if sources is not None:
            return sources_of(rt.store, sources, prov)
        if search_plan(rt.settings).mode == "hybrid":
            err.print("loading the embedder for the cosine...", markup=False)
            rt.start_embedder()
            rt.embedder.get(wait_s=MODEL_WAIT_S)
        options = Options(
            apply=apply,
            owner=prov.viewer().user,
            kinds=kinds,
            threads=(prov,) if threads and _has_threads(prov) else (),
            release=release,
        )
        report = for_runtime(rt).run(options)
        return report if as_json else render(report)

    run_in_session(act, as_json=as_json or sources is not None)


def _has_threads(prov: Provenance) -> bool:
    return bool(prov.project) and (Path(str(prov.project)) / ".threadloom").is_dir()
