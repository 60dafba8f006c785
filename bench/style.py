"""Style-memory benchmark: what learning costs per user message (target <= 1 ms), against the secret scrubber
alone over the same messages and against reading them alone (the baselines, same run); the session brief
with 200 habits against the same store's brief for a user with none; a host hint's write; and the
activation gate's precision and recall on the labelled fixture (tests/data/style_gate.jsonl).

Everything goes through the public path: messages are ingested transcript rows that `Learner.run` (what the
daemon's job and `threadloom style learn` call) reads; habits come from `StyleMemory.hint` (style_hint).

    python bench/style.py [--messages 5000] [--habits 200] [--runs 50]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from measure import pct

from tests.test_style_gate import add_message, gate_outcome, load_fixture
from threadloom.brief import render_brief
from threadloom.clock import now_ms
from threadloom.config import Settings
from threadloom.identity import Provenance
from threadloom.runtime import open_runtime
from threadloom.scrub import Scrubber
from threadloom.sessions import SessionInfo
from threadloom.store.sqlite import open_store
from threadloom.style import Learner, StyleMemory
from threadloom.style.dictionary import extract
from threadloom.style.language import detect
from threadloom.style.learn import voice
from threadloom.style.model import habit_key
from threadloom.style.profile import statements

SAMPLES = (
    "ok lgtm, ship it 🚀 but tbh the flaky test in the parser worries me...",
    "can you plan first, then implement and verify? no vague praise please",
    "Vale, pero primero la conclusión. ¿Seguro que el test pasa? jaja",
    "好的好的，先给结论，这个方案靠谱吗？哈哈",
    "Please rename the function `parse_header` and update the callers in src/http/parser.py",
    "Here is the traceback:\n```\nTraceback (most recent call last):\n  ValueError: bad header\n```\nany idea?",
    "hmm not sure that's right :) can we check the docs first",
    "órale, ya quedó. Dale, lo subo ahora!!",
)


def messages(n: int) -> list[str]:
    rng = random.Random(7)
    return [f"{rng.choice(SAMPLES)} ({i})" for i in range(n)]


def per_message_us(fn: object, texts: list[str]) -> float:
    started = time.perf_counter()
    for text in texts:
        fn(text)  # type: ignore[operator]
    return (time.perf_counter() - started) / len(texts) * 1e6


def observation(n: int, tmp: Path) -> None:
    texts = messages(n)
    store = open_store(tmp / "observe.db")
    at = now_ms() - n
    for i, text in enumerate(texts):
        add_message(store, "ana", "claude-code", f"s{i % 40}", f"k{i}", text, at + i)
    learner, scrubber = Learner(store), Scrubber()

    # Steady state: the habits in these messages already have their example (sanitising runs once a habit).
    have = {(h.kind, habit_key(h.text)) for text in texts[:200] for h in extract(voice(text))}

    def pure(text: str) -> None:  # the dictionary, language and profile work without the store
        learner.observations("claude-code", "s", text, at, "claude", have)
        detect(voice(text))
        statements(voice(text))

    scrub_us = per_message_us(scrubber.text, texts)
    pure_us = per_message_us(pure, texts)
    started = time.perf_counter()
    store.read(lambda r: r.rows("SELECT id, owner, source, session_id, text, at FROM transcript_messages"))
    read_us = (time.perf_counter() - started) / n * 1e6
    started = time.perf_counter()
    report = learner.run("bench")
    pass_us = (time.perf_counter() - started) / n * 1e6
    habits = store.read(lambda r: r.tuples("SELECT status, count(*) FROM style_habits GROUP BY status"))
    store.close()
    print(f"observation over {n} user messages ({report.observations} sightings; habits {dict(habits)})")
    print(f"  {'scrubber alone (baseline)':44} {scrub_us:8.1f} us/message")
    print(f"  {'reading the messages alone (baseline)':44} {read_us:8.1f} us/message")
    print(f"  {'dictionary + language + profile, no store':44} {pure_us:8.1f} us/message")
    print(f"  {'whole learning pass (read, match, write)':44} {pass_us:8.1f} us/message  (target <= 1000)")


def brief(n_habits: int, runs: int, tmp: Path) -> None:
    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    runtime = open_runtime(Settings(home=tmp / "home", embedder="none"), "cli")
    try:
        infos = [SessionInfo(f"{u}-1", "claude", "stdio", str(repo), str(repo), 1, user=u) for u in ("ana", "bob")]
        for info in infos:
            runtime.sessions.open(info)
        ana, bob = (info.provenance() for info in infos)
        memory = StyleMemory(runtime.store, runtime.scrubber)
        hint_ms = []
        for session in ("s1", "s2"):
            prov = Provenance(session_id=session, vendor="claude", project=str(repo), user="ana")
            for i in range(0, n_habits, 8):
                hints = [{"kind": "idiolect", "text": f"pet phrase {j}"} for j in range(i, min(i + 8, n_habits))]
                started = time.perf_counter()
                memory.hint(prov, hints, ["conclusions first"] if i == 0 else [])
                hint_ms.append((time.perf_counter() - started) * 1000)
        active = runtime.store.read(lambda r: r.scalar("SELECT count(*) FROM style_habits WHERE status = 'active'"))

        def timed(fn: object) -> tuple[float, float]:
            fn()  # type: ignore[operator]
            samples = []
            for _ in range(runs):
                started = time.perf_counter()
                fn()  # type: ignore[operator]
                samples.append((time.perf_counter() - started) * 1000)
            return statistics.median(samples), pct(samples, 0.95)

        rows = {
            "brief, no style memory (baseline)": timed(lambda: render_brief(runtime, bob)),
            f"brief, {active} active habits": timed(lambda: render_brief(runtime, ana)),
            f"style() capsule, {active} active habits": timed(lambda: memory.view(ana, None, "all")),
            "style(revision=current): ack": timed(lambda: memory.view(ana, 2, "all")),
        }
        shown = render_brief(runtime, ana)
    finally:
        runtime.close()
    print(f"brief with {active} active habits: the style section holds {shown.text.count('pet phrase')} of them")
    hint_p50, hint_p95 = statistics.median(hint_ms), pct(hint_ms, 0.95)
    print(f"  {'style_hint write, 8 hints':44} p50 {hint_p50:7.2f} ms   p95 {hint_p95:7.2f} ms")
    for name, (p50, p95) in rows.items():
        print(f"  {name:44} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")


def gate(tmp: Path) -> None:
    store = open_store(tmp / "gate.db")
    labels = load_fixture(store)
    Learner(store).run("bench")
    outcome = gate_outcome(store, labels)
    store.close()
    should = sum(1 for on in labels.values() if on)
    print(f"activation gate on the fixture ({len(labels)} labelled habits, {should} should activate): "
          f"precision {outcome['precision']:.2f}, recall {outcome['recall']:.2f}")  # fmt: skip
    if outcome["false_active"] or outcome["missed"]:
        print(f"  wrongly active {outcome['false_active']}; missed {outcome['missed']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--habits", type=int, default=200)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        observation(args.messages, Path(tmp))
        brief(args.habits, args.runs, Path(tmp))
        gate(Path(tmp))


if __name__ == "__main__":
    main()
