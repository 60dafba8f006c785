"""Synthetic, deterministic memories of the kind coding agents store, and questions about them.

Realistic length (one to three sentences, ~90-250 characters), a vocabulary of services,
files, people and tools large enough that full-text search has to rank, and questions that
name a few of a memory's words, as an agent would ask. Used by bench/memory.py and by the
Papez driver, so both systems see the same data.

    python bench/memory_data.py 10000 > memories.jsonl   # one {"content", "category", "entities"} per line
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator

SERVICES = [
    f"{a}-{b}"
    for a in (
        "billing",
        "search",
        "auth",
        "ingest",
        "notify",
        "report",
        "export",
        "gateway",
        "scheduler",
        "ledger",
        "catalog",
        "profile",
        "upload",
        "webhook",
        "metrics",
        "audit",
    )
    for b in ("api", "worker", "service", "cron", "proxy")
]
FILES = [
    f"src/{d}/{f}.py"
    for d in ("api", "core", "db", "jobs", "auth", "util", "cli", "web")
    for f in ("handlers", "models", "client", "retry", "cache", "schema", "config", "routes", "tasks", "views")
]
PEOPLE = ["Ana", "Ben", "Chen", "Dara", "Eli", "Farah", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lena", "Mo", "Nia"]
TOOLS = [
    "pytest",
    "ruff",
    "mypy",
    "uv",
    "docker",
    "terraform",
    "redis",
    "postgres",
    "kafka",
    "celery",
    "nginx",
    "grafana",
    "sentry",
    "alembic",
    "pydantic",
    "fastapi",
    "httpx",
    "numpy",
    "sqlite",
    "github actions",
]
PROBLEMS = [
    "timeouts",
    "memory leak",
    "flaky test",
    "deadlock",
    "slow query",
    "race condition",
    "stale cache",
    "missing index",
    "retry storm",
    "encoding error",
    "clock skew",
    "disk full",
    "oom kill",
]
TEMPLATES = [
    ("decision", "We decided to move {svc} from {t1} to {t2} because of {prob} under load."),
    ("bug", "The {prob} in {svc} came from {file}; fixed by adding a bounded retry with jitter."),
    ("tooling", "Run {t1} with --strict before pushing changes to {file}, or CI fails on {svc}."),
    ("people", "{p1} owns {svc} and reviews every change to {file}; ask {p2} when {p1} is away."),
    ("config", "{svc} reads its {t1} settings from {file}; the timeout is {n} seconds in production."),
    ("incident", "On-call note: {svc} paged {n} times for {prob}; the runbook step is to restart {t1}."),
    ("preference", "{p1} prefers small pull requests under {n} lines and wants {t1} output in the description."),
    ("lesson", "Lesson: never run {t1} migrations on {svc} during business hours; it caused {prob} last time."),
    ("architecture", "{svc} talks to {svc2} through {t1}; keep the schema in {file} backward compatible."),
    ("testing", "The {prob} in the {svc} suite is a known {t1} issue; mark it and retry, do not delete the test."),
]


def memories(n: int, seed: int = 7) -> Iterator[dict[str, object]]:
    rng = random.Random(seed)
    for i in range(n):
        category, template = TEMPLATES[rng.randrange(len(TEMPLATES))]
        slots = {
            "svc": rng.choice(SERVICES),
            "svc2": rng.choice(SERVICES),
            "file": rng.choice(FILES),
            "p1": rng.choice(PEOPLE),
            "p2": rng.choice(PEOPLE),
            "t1": rng.choice(TOOLS),
            "t2": rng.choice(TOOLS),
            "prob": rng.choice(PROBLEMS),
            "n": rng.randrange(2, 900),
        }
        text = template.format(**slots) + f" (ticket {category[:3].upper()}-{i})"
        yield {"content": text, "category": category, "entities": [str(slots["svc"]), str(slots["p1"])]}


def queries(n: int, seed: int = 11) -> Iterator[str]:
    rng = random.Random(seed)
    shapes = [
        "why did we move {svc} off {t1}",
        "who owns {svc}",
        "how do we fix {prob} in {svc}",
        "what is the timeout of {svc}",
        "{t1} rules for {file}",
        "what happened with {prob} on {svc}",
    ]
    for _ in range(n):
        yield rng.choice(shapes).format(
            svc=rng.choice(SERVICES), t1=rng.choice(TOOLS), prob=rng.choice(PROBLEMS), file=rng.choice(FILES)
        )


if __name__ == "__main__":
    for item in memories(int(sys.argv[1])):
        print(json.dumps(item))
