"""Secrets never reach the disk: through the real server, a memory, its amendment, a thread's title and
summary, a note, a quote and a signal that hold credentials are stored scrubbed (the database file's
bytes and the thread files are searched for them), the tool results say what was scrubbed, and with
THREADLOOM_SCRUB_SECRETS=false the same text is kept verbatim."""

from __future__ import annotations

import secrets
import string
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import serve_params, structured

pytestmark = pytest.mark.anyio
ALNUM = string.ascii_letters + string.digits


def _random(n: int, alphabet: str = ALNUM) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _credentials() -> dict[str, str]:
    """Fresh synthetic credentials, so that a hit on disk can only come from this run."""
    return {
        "github": "ghp_" + _random(36),
        "aws": "AKIA" + _random(16, string.ascii_uppercase + "234567"),
        "stripe": "sk_live_" + _random(40),
        "password": _random(18),
        "slack": "xoxb-" + _random(12, string.digits) + "-" + _random(13, string.digits) + "-" + _random(24),
        "url": _random(20),
        "reason": "npm_" + _random(36),
    }


def _on_disk(home: Path, repo: Path) -> bytes:
    """Every byte threadloom persisted: the database with its WAL, and the repository's thread files."""
    files = [p for p in home.iterdir() if p.name.startswith("threadloom.db")]
    files += [p for p in (repo / ".threadloom").rglob("*") if p.is_file()]
    return b"".join(p.read_bytes() for p in files)


def _bodies(credentials: dict[str, str]) -> list[bytes]:
    """What must not be on disk: each credential, and the random part the full-text index would keep
    as a lower-case term."""
    found = []
    for value in credentials.values():
        body = value.rsplit("_", 1)[-1].rsplit("-", 1)[-1]
        found += [value.encode(), body.encode(), body.lower().encode()]
    return found


async def _write_everything(home: Path, repo: Path, credentials: dict[str, str], **env: str) -> list[dict[str, object]]:
    """Each write path, with credentials in its text; returns the tool results."""
    c = credentials

    def params(sid: str) -> object:
        return serve_params(
            home, "--in-process", THREADLOOM_SESSION_ID=sid, THREADLOOM_TOOLSET="full", THREADLOOM_ROOT=str(repo), **env
        )

    results = []
    async with Client(params("writer-1"), mode="legacy") as writer, Client(params("reader-1"), mode="legacy") as reader:
        await reader.call_tool("peers", {})

        async def call(client: Client, tool: str, args: dict[str, object]) -> dict[str, object]:
            result = await client.call_tool(tool, args)
            assert not result.is_error, result
            results.append(structured(result))
            return results[-1]

        stored = await call(
            writer,
            "memory_store",
            {
                "content": f"CI deploys with GITHUB_TOKEN={c['github']}",
                "summary": f"deploy key {c['aws']}",
                "entities": ["ci", f"postgres://app:{c['url']}@db.internal/app"],
                "idempotency_key": "store-1",
            },
        )
        memory_id = str(stored["id"])
        await call(
            writer,
            "memory_amend",
            {"memory_id": memory_id, "content": f"Stripe key is {c['stripe']}", "reason": f"rotated {c['reason']}"},
        )
        await call(writer, "thread_project", {"action": "create", "title": "Shop"})
        await call(writer, "thread_create", {"title": f"rotate {c['stripe']}"})
        await call(writer, "thread_summary", {"text": f"- AWS key {c['aws']} is read-only", "section": "Decisions"})
        await call(writer, "thread_note", {"text": f"db password: {c['password']}", "kind": "insight"})
        await call(writer, "thread_note", {"text": f"use {c['github']} for now", "quote": True})
        await call(writer, "signal_send", {"to": "reader-1", "text": f"the bot token is {c['slack']}"})
        inbox = structured(await reader.call_tool("signal_inbox", {}))
        results.append(inbox)
    return results


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    return repo


async def test_every_write_path_stores_credentials_scrubbed_and_says_so(home: Path, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    credentials = _credentials()
    results = await _write_everything(home, repo, credentials)
    disk = _on_disk(home, repo)
    for needle in _bodies(credentials):
        assert needle not in disk, f"{needle!r} was persisted"
    assert b"[secret:github-token]" in disk and b"[secret:aws-access-key-id]" in disk
    assert b"[secret:password]" in disk and b"[secret:slack-token]" in disk and b"[secret:url-password]" in disk
    said = [r.get("scrubbed") for r in results]
    assert said[:8] == [
        ["github-token", "aws-access-key-id", "url-password"],  # memory_store
        ["npm-token", "stripe-key"],  # memory_amend: its reason, then its content
        None,  # thread_project
        ["stripe-key"],  # thread_create
        ["aws-access-key-id"],  # thread_summary
        ["password"],  # thread_note
        ["github-token"],  # quote
        ["slack-token"],  # signal_send
    ]
    assert results[-1]["unread"][0]["body"] == "the bot token is [secret:slack-token]"  # type: ignore[index]
    assert (repo / ".threadloom/threads/shop/rotate-secret-stripe-key.md").is_file()


async def test_with_scrubbing_off_the_text_is_kept_verbatim(home: Path, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    credentials = _credentials()
    results = await _write_everything(home, repo, credentials, THREADLOOM_SCRUB_SECRETS="false")
    disk = _on_disk(home, repo)
    for value in credentials.values():
        assert value.encode() in disk
    assert b"[secret:" not in disk
    assert all("scrubbed" not in r for r in results)
