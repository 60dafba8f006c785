"""User-model benchmark: the session brief with 500 claims about the user (then with 200 style habits beside
them), against the same store's brief for a user with none (the baseline, same run), plus the cost of a
claim, a piece of evidence and the synthesis; and the observation miner's cost per message (against reading
the same messages alone, same run) with its precision and recall on the labelled fixture
(tests/data/usermodel_mining.jsonl).

Claims are written through the public path (UserModel, what the user_claim and user_evidence tools call):
a third validated (four statements each), a third observed, a third hypotheses, a few disputed.

    python bench/usermodel.py [--claims 500] [--habits 200] [--runs 50] [--messages 5000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import pct
from usermodel_observe import observation

from threadloom.brief import render_brief
from threadloom.config import Settings
from threadloom.identity import Provenance
from threadloom.runtime import Runtime, open_runtime
from threadloom.sessions import SessionInfo
from threadloom.style import StyleMemory
from threadloom.usermodel import UserModel

DOMAINS = ("style", "values", "workflow", "technical", "communication", "context")


def join(runtime: Runtime, repo: Path, sid: str, user: str) -> Provenance:
    info = SessionInfo(sid, "claude", "stdio", str(repo), str(repo), 1, user=user)
    runtime.sessions.open(info)
    return info.provenance()


def populate(model: UserModel, prov: Provenance, n: int) -> tuple[list[float], list[float]]:
    """`n` claims; the time of each claim write and of each evidence write, in ms."""
    claim_ms: list[float] = []
    evidence_ms: list[float] = []
    for i in range(n):
        started = time.perf_counter()
        made = model.claim(prov, f"Claim {i}: prefers option {i % 7} for task kind {i}", DOMAINS[i % len(DOMAINS)],
                           statement=f"I said so, number {i}")  # fmt: skip
        claim_ms.append((time.perf_counter() - started) * 1000)
        extra = {0: 3, 1: 1}.get(i % 3, 0)  # validated, observed, hypothesis
        for j in range(extra):
            started = time.perf_counter()
            model.add_evidence(prov, made["claim"]["id"], "support", "statement", f"again {i}.{j}")
            evidence_ms.append((time.perf_counter() - started) * 1000)
        if i % 25 == 0:
            model.add_evidence(prov, made["claim"]["id"], "contradict", "statement", f"no {i}")
            model.add_evidence(prov, made["claim"]["id"], "contradict", "statement", f"not at all {i}")
    return claim_ms, evidence_ms


def habits(runtime: Runtime, prov: Provenance, n: int) -> None:
    """`n` style habits made active (each hinted in two sessions) with a profile item, as style_hint writes them."""
    memory = StyleMemory(runtime.store, runtime.scrubber)
    for session in ("s1", "s2"):
        hinter = Provenance(session_id=session, vendor=prov.vendor, project=prov.project, user=prov.user)
        for i in range(0, n, 8):
            hints = [{"kind": "idiolect", "text": f"pet phrase {j}"} for j in range(i, min(i + 8, n))]
            memory.hint(hinter, hints, ["conclusions first"] if i == 0 else [])


def timed(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    fn()  # warm
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return {"p50": statistics.median(samples), "p95": pct(samples, 0.95)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=500)
    parser.add_argument("--habits", type=int, default=200, help="active style habits beside the claims")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--messages", type=int, default=5000, help="ingested messages the miner reads")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        runtime = open_runtime(Settings(home=Path(tmp) / "home", embedder="none"), "cli")
        try:
            ana, bob = join(runtime, repo, "ana-1", "ana"), join(runtime, repo, "bob-1", "bob")
            model = UserModel(runtime.store, runtime.scrubber)
            claim_ms, evidence_ms = populate(model, ana, args.claims)
            listed = model.claims(ana)["claims"]
            tiers = {
                t: sum(1 for c in listed if c["tier"] == t) for t in ("hypothesis", "observed", "validated", "disputed")
            }
            claims_only = timed(lambda: render_brief(runtime, ana), args.runs)
            habits(runtime, ana, args.habits)
            brief = render_brief(runtime, ana)
            rows = {
                "brief, no claims (baseline)": timed(lambda: render_brief(runtime, bob), args.runs),
                f"brief, {args.claims} claims": claims_only,
                f"brief, {args.claims} claims + {args.habits} habits": timed(
                    lambda: render_brief(runtime, ana), args.runs
                ),
                f"user_synthesis, {args.claims} claims": timed(lambda: model.synthesis(ana), args.runs),
                "user_review (list every claim)": timed(lambda: model.claims(ana), args.runs),
            }
        finally:
            runtime.close()
    print(f"{args.claims} claims {tiers}; the brief shows {brief.text.count('(uc_')} of them in {brief.tokens} tokens")
    print(f"{'write a claim (with a statement)':38} p50 {statistics.median(claim_ms):7.2f} ms   "
          f"p95 {pct(claim_ms, 0.95):7.2f} ms")  # fmt: skip
    print(f"{'write a piece of evidence':38} p50 {statistics.median(evidence_ms):7.2f} ms   "
          f"p95 {pct(evidence_ms, 0.95):7.2f} ms")  # fmt: skip
    for name, row in rows.items():
        print(f"{name:38} p50 {row['p50']:7.2f} ms   p95 {row['p95']:7.2f} ms")
    observation(args.messages)


if __name__ == "__main__":
    main()
