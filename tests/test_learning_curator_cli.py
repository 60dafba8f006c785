"""`threadloom learn curate|snapshots|restore|insights` in real processes whose HOME is a temp folder with
Claude Code installed: a pass merges two duplicates (the CLI's copies too), restore brings them back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers import PY, cli, env_for, wait_for
from threadloom.config import Settings
from threadloom.learning.insights import Insights
from threadloom.learning.library import Library
from threadloom.runtime import open_runtime
from threadloom.store import jobs

DEPLOY = "Deploy with the release script.\n\nRun `make release` from a clean tree, then tag the commit."


def snapshot_of(*roots: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes()
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".lock" not in p.name
    }


def test_curate_dry_run_then_a_pass_then_restore_from_the_command_line(home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    (user_home / ".claude").mkdir(parents=True)
    env = {"HOME": str(user_home), "THREADLOOM_USER": "alice"}
    rt = open_runtime(Settings(home=home, embedder="none"), "cli")
    try:
        lib = Library(rt, client_home=user_home)
        lib.write_skill("alice", "deploy", "How to deploy.", DEPLOY, "loop", "review:1")
        lib.write_skill("alice", "deploy-again", "How to deploy.", DEPLOY + "\n\nTag it.", "loop", "review:2")
    finally:
        rt.close()
    before = snapshot_of(home / "skills", user_home / ".claude/skills")

    dry = json.loads(cli(home, "learn", "curate", "--dry-run", "--json", **env).stdout)
    assert (
        dry["counts"] == {"keep": 1, "merge": 1}
        and snapshot_of(home / "skills", user_home / ".claude/skills") == before
    )

    ran = cli(home, "learn", "curate", **env)
    assert ran.returncode == 0, ran.stderr
    assert "merge into deploy" in ran.stdout and "learn restore s1" in ran.stdout
    assert not (user_home / ".claude/skills/deploy-again").exists()  # the CLI's copy went with it
    listed = json.loads(cli(home, "learn", "snapshots", "--json", **env).stdout)
    assert listed["snapshots"][0]["id"] == "s1" and listed["trash"][0]["name"] == "deploy-again"
    assert json.loads(cli(home, "learn", "snapshots", "--json", THREADLOOM_USER="bob").stdout)["snapshots"] == []

    refused = cli(home, "learn", "restore", "s1", THREADLOOM_USER="bob")
    assert refused.returncode != 0 and "no snapshot" in (refused.stdout + refused.stderr)
    back = cli(home, "learn", "restore", "s1", "--json", **env)
    assert back.returncode == 0, back.stderr
    assert snapshot_of(home / "skills", user_home / ".claude/skills") == before
    report = next((home / "curator" / "alice").glob("*.md")).read_text()
    assert "| skill | deploy-again | merge into deploy |" in report


def test_insights_export_from_the_command_line(home: Path) -> None:
    rt = open_runtime(Settings(home=home, embedder="none"), "cli")
    try:
        ins = Insights(rt.store, home / "insights", threshold=1)
        made = ins.distill("alice", "Review the migration before the code.", "s-0")
        rt.store.write(lambda w: w.execute("UPDATE insights SET up = 3 WHERE id = :i", {"i": made["id"]}))
    finally:
        rt.close()
    first = json.loads(cli(home, "learn", "insights", "--export", "--json", THREADLOOM_USER="alice").stdout)
    again = json.loads(cli(home, "learn", "insights", "--export", "--json", THREADLOOM_USER="alice").stdout)
    assert first["export"]["exported"] == 1 and again["export"]["exported"] == 0
    assert len((home / "insights" / "alice.jsonl").read_text().splitlines()) == 1


def test_the_daemon_curates_once_enabled(home: Path, tmp_path: Path) -> None:
    rt = open_runtime(Settings(home=home, embedder="none"), "cli")
    try:
        lib = Library(rt)
        lib.write_skill("alice", "deploy", "How to deploy.", DEPLOY, "loop", "review:1")
        lib.write_skill("alice", "deploy-again", "How to deploy.", DEPLOY + "\n\nTag it.", "loop", "review:2")
    finally:
        rt.close()
    env = env_for(home, HOME=str(tmp_path), THREADLOOM_LEARN_CURATE="true")
    daemon = subprocess.Popen([PY, "-m", "threadloom", "daemon", "run"], env=env, stdin=subprocess.DEVNULL)

    def passed() -> Any:
        rt = open_runtime(Settings(home=home, embedder="none"), "cli")
        try:
            return rt.store.read(lambda r: jobs.last_run(r, "learning.curate:alice"))
        finally:
            rt.close()

    try:
        last = wait_for(passed, timeout=90, what="the daemon's curator pass")
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    assert last["outcome"]["done"]["merged"] == 1 and last["outcome"]["snapshot"] == "s1"
