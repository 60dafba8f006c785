"""The observation miner's share of bench/usermodel.py: its cost per ingested message without the validator,
beside a baseline measured in the same run (the same messages read in the miner's batches, nothing parsed),
and its precision and recall on the labelled fixture, overall and per language.

The messages are a realistic mix: the fixture's labelled turns (a statement in about one message in four of
the user's), ordinary requests and assistant replies of a coding session around them, half the rows the
assistant's (which the miner skips after reading).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from threadloom.store import transcripts
from threadloom.store.base import Writer
from threadloom.store.sqlite import SqliteStore, open_store
from threadloom.store.transcripts import StoredMessage
from threadloom.usermodel.miner import BATCH, Miner, own_words
from threadloom.usermodel.patterns import find, normalise

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "data" / "usermodel_mining.jsonl"
CHATTER = (
    "Can you look at why test_parser fails on the empty input case?",
    'Here is the traceback:\n```\nTraceback (most recent call last):\n  File "x.py", line 3\nValueError\n```',
    "Rename the helper to load_config and update the callers.",
    "Looks good, commit it with a short message.",
    "What does the retry loop do when the store is busy for longer than the timeout?",
    "Ok, now run the whole suite and tell me what breaks.",
)
REPLY = "I updated the function and ran the tests; all 42 passed. I always check the callers first."


def labelled() -> list[dict[str, object]]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


def quality() -> None:
    """Precision and recall of the statements read from the fixture, overall and per language."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # tp, fp, fn
    for case in labelled():
        expected = {(str(s).rstrip("-"), str(s).endswith("-"), normalise(str(o))) for s, o in case["expect"]}  # type: ignore[attr-defined]
        got = {(f.stance, f.retract, normalise(f.obj)) for f in find(own_words(str(case["text"])))}
        for key in (str(case["lang"]), "all"):
            counts[key][0] += len(expected & got)
            counts[key][1] += len(got - expected)
            counts[key][2] += len(expected - got)
    print("miner on the labelled fixture (statement found with the right stance and object):")
    for lang in sorted(counts, key=lambda k: (k == "all", k)):
        tp, fp, fn = counts[lang]
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        print(f"  {lang:4} precision {precision:5.2f}  recall {recall:5.2f}  (tp {tp}, fp {fp}, fn {fn})")


def seed(store: SqliteStore, n: int) -> None:
    cases = [str(c["text"]) for c in labelled()]

    def write(w: Writer) -> None:
        for i in range(n):
            if i % 2:
                role, text = "assistant", REPLY
            else:
                role = "user"
                text = cases[(i // 2) % len(cases)] if i % 8 == 0 else CHATTER[(i // 2) % len(CHATTER)]
            m = StoredMessage("claude-code", f"s{i // 200}", f"k{i}", role, text, "[]", i, None, None, None, "t", "", i)
            transcripts.upsert_message(w, "ana", m, False, 1)

    store.write(write)


def observation(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "observe.db")
        try:
            seed(store, n)
            started = time.perf_counter()
            position, read = 0, 0
            while True:  # the baseline: the miner's reads alone
                rows = store.read(
                    lambda r, p=position: r.tuples(
                        "SELECT id, source, session_id, role, text FROM transcript_messages WHERE owner = 'ana' "
                        "AND id > :p ORDER BY id LIMIT :n",
                        {"p": p, "n": BATCH},
                    )
                )
                if not rows:
                    break
                read, position = read + len(rows), int(rows[-1][0])
            baseline = (time.perf_counter() - started) * 1000 / read
            texts = [
                t for (t,) in store.read(lambda r: r.tuples("SELECT text FROM transcript_messages WHERE role = 'user'"))
            ]
            started = time.perf_counter()
            for text in texts:
                list(find(own_words(text)))
            parse = (time.perf_counter() - started) * 1000 / len(texts)
            started = time.perf_counter()
            report = Miner(store, "ana").run()
            whole = (time.perf_counter() - started) * 1000 / max(report.messages, 1)
        finally:
            store.close()
    print(f"observation, {n} messages ({report.statements} statements, {report.proposed} claims proposed, "
          f"{report.supported} pieces of evidence), no validator:")  # fmt: skip
    print(f"  {'read the messages alone (baseline)':38} {baseline:7.4f} ms per message")
    print(f"  {'read them out (own words, cue table)':38} {parse:7.4f} ms per user message (parsing alone)")
    print(f"  {'a whole miner pass (reads and writes)':38} {whole:7.4f} ms per message   (target <= 1 ms)")
    quality()
