"""Secret scrubbing: the corpus's recall and false-positive rate, and throughput on 1 MB of mixed text.

The corpus (tests/data/secrets/) holds synthetic credentials of each shape that must be scrubbed and
look-alikes that must survive (hashes, UUIDs, git SHAs, base64 images, paths, placeholders, ...). The
throughput text is a developer's transcript-like mix: prose, code, logs, the look-alikes, and one secret
in every ~10 kB. Beside `scrub`, in the same run and on the same text: one `re.sub` of a single pattern
(the AWS access key id's) and one `str.replace`, as the floor any scrubber pays to read the text.

    python bench/scrub.py [--megabytes N] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from threadloom.scrub import scrub

CORPUS = Path(__file__).parent.parent / "tests" / "data" / "secrets"
FILLER = [
    "We moved the retry loop into the store so every write backs off the same way; the token budget is 4096.\n",
    "def refresh(self, session: Session, max_tokens: int = 512) -> list[str]:\n    return self._cache.get(key)\n",
    "2026-11-30T20:41:07Z INFO request id 6f1c2a9e-4b7d-4c1e-9a3f-2b8d7e6c5a41 served in 12 ms (200)\n",
    "The key question is whether the secret manager should rotate credentials nightly or on demand.\n",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8\nAuthor: Jane Doe <jane@example.com>\n",
    "Fetched https://docs.example.com/guide/auth?lang=en and cloned git@github.com:acme/app.git.\n",
    'config = {"timeout": 30, "retries": 3, "endpoint": "https://api.example.com/v1", "auth": "oauth2"}\n',
]


def load(name: str) -> list[dict[str, Any]]:
    lines = (CORPUS / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def corpus_figures() -> None:
    secrets, lookalikes = load("secrets.jsonl"), load("lookalikes.jsonl")
    leaked = [s["name"] for s in secrets if any(str(v) in scrub(str(s["text"])).text for v in list(s["secrets"]))]
    changed = [s["name"] for s in lookalikes if scrub(str(s["text"])).text != s["text"]]
    print(f"corpus: {len(secrets)} secret shapes, {len(leaked)} leaked {leaked or ''}")
    rate = 100 * len(changed) / len(lookalikes)
    print(
        f"corpus: {len(lookalikes)} look-alikes, {len(changed)} changed: false-positive rate {rate:.1f}%", changed or ""
    )


def mixed_text(megabytes: float) -> tuple[str, int]:
    secrets, lookalikes = load("secrets.jsonl"), load("lookalikes.jsonl")
    parts, size, n, planted = [], 0, 0, 0
    while size < megabytes * 1_000_000:
        chunk = FILLER[n % len(FILLER)] + str(lookalikes[n % len(lookalikes)]["text"]) + "\n"
        if n % 12 == 0:
            chunk += str(secrets[planted % len(secrets)]["text"]) + "\n"
            planted += 1
        parts.append(chunk)
        size += len(chunk)
        n += 1
    return "".join(parts), planted


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    corpus_figures()
    text, planted = mixed_text(args.megabytes)
    result = scrub(text)
    placeholders = len(re.findall(r"\[secret:[a-z0-9-]+\]", result.text))
    print(f"text: {len(text) / 1e6:.2f} MB, {planted} secrets planted, {placeholders} placeholders written")
    aws = re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16}\b")
    rows = [
        ("scrub(text)", lambda: scrub(text)),
        ("baseline: one re.sub (AWS key id)", lambda: aws.sub("[secret:aws-access-key-id]", text)),
        ("baseline: str.replace", lambda: text.replace("password", "[secret]")),
    ]
    messages = [text[i : i + 400] for i in range(0, len(text), 400)]  # transcript-message sized pieces
    rows.append((f"scrub per message ({len(messages):,} x 400 chars)", lambda: [scrub(m) for m in messages]))
    for label, fn in rows:
        best, median = best_of(fn, args.repeat)
        speed = len(text) / 1e6 / best
        print(f"{label:40} best {best * 1000:8.1f} ms  median {median * 1000:8.1f} ms  {speed:7.1f} MB/s")
    per = best_of(lambda: [scrub(m) for m in messages], args.repeat)[0] / len(messages)
    print(f"per 400-character message: {per * 1e6:.1f} us ({1 / per:,.0f} messages/s)")


if __name__ == "__main__":
    main()
