"""`threadloom hook ...` run as an agent CLI runs it: a process with the client's JSON on stdin, against a
real daemon in a temporary home."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import PY, RawSession, daemon_pid, env_for
from threadloom.daemon import control
from threadloom.store.sqlite import SqliteStore


def hook(
    home: Path, event: str, stdin: bytes | dict[str, Any], *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    done = subprocess.run(
        [PY, "-m", "threadloom", "hook", event, *args],
        input=data,
        env=env_for(home, **env),
        cwd=cwd or "/",
        capture_output=True,
        timeout=60,
    )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def set_core(home: Path, repo: Path, user: str, key: str, text: str) -> None:
    done = subprocess.run(
        [PY, "-m", "threadloom", "memory", "core", key, "--set", text],
        env=env_for(home, THREADLOOM_USER=user),
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def events(home: Path, kind: str) -> list[dict[str, Any]]:
    store = SqliteStore(home / "threadloom.db")
    try:
        rows = store.read(
            lambda r: r.rows(
                "SELECT session_id, vendor, project, origin, detail FROM events WHERE kind = :k ORDER BY id",
                {"k": kind},
            )
        )
    finally:
        store.close()
    return [row | {"detail": json.loads(row["detail"])} for row in rows]


def ended_at(home: Path, session: str) -> int | None:
    store = SqliteStore(home / "threadloom.db")
    try:
        found = store.read(lambda r: r.scalar("SELECT ended_at FROM sessions WHERE id = :id", {"id": session}))
        return None if found is None else int(found)
    finally:
        store.close()


def claude_start(repo: Path, session: str = "c-1", source: str = "startup") -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": f"/tmp/{session}.jsonl",
        "cwd": str(repo),
        "hook_event_name": "SessionStart",
        "source": source,
    }


def test_claude_code_session_start_injects_the_brief_of_its_folder(home: Path, tmp_path: Path) -> None:
    repo = repository(tmp_path)
    set_core(home, repo, "alice", "style", "alice prefers tabs over spaces")
    assert daemon_pid(home) is None
    done = hook(home, "session-start", claude_start(repo), "--client", "claude", THREADLOOM_USER="alice")
    assert done.returncode == 0, done.stderr
    assert daemon_pid(home) is not None  # the hook started the daemon
    out = json.loads(done.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = out["hookSpecificOutput"]["additionalContext"]
    assert "threadloom brief" in context and f"project {repo.resolve()}" in context
    assert "alice prefers tabs over spaces" in context
    [started] = events(home, "client.session_started")
    assert started["vendor"] == "claude" and started["origin"] == "hook"
    assert started["project"] == str(repo.resolve())
    assert started["detail"]["client_session"] == "c-1" and started["detail"]["source"] == "startup"


def test_a_hook_run_by_another_user_never_shows_the_first_users_memories(home: Path, tmp_path: Path) -> None:
    repo = repository(tmp_path)
    set_core(home, repo, "alice", "secret", "alice-private-7f3a9")
    set_core(home, repo, "bob", "style", "bob-own-core-2c1d")
    as_bob = hook(home, "session-start", claude_start(repo, "b-1"), "--client", "claude", THREADLOOM_USER="bob")
    as_alice = hook(home, "session-start", claude_start(repo, "a-1"), "--client", "claude", THREADLOOM_USER="alice")
    bob_context = json.loads(as_bob.stdout)["hookSpecificOutput"]["additionalContext"]
    alice_context = json.loads(as_alice.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "bob-own-core-2c1d" in bob_context and "alice-private-7f3a9" not in bob_context
    assert "alice-private-7f3a9" in alice_context and "bob-own-core-2c1d" not in alice_context
    assert "user bob" in bob_context and "user alice" in alice_context


def test_each_client_gets_its_own_shape_and_nothing_where_it_cannot_inject(home: Path, tmp_path: Path) -> None:
    repo = repository(tmp_path)
    cursor = hook(
        home,
        "session-start",
        {"conversation_id": "cur-1", "workspace_roots": [str(repo)], "hook_event_name": "sessionStart"},
        "--client",
        "cursor",
    )
    assert "threadloom brief" in json.loads(cursor.stdout)["additional_context"]
    gemini = hook(home, "session-start", claude_start(repo, "g-1"), "--client", "gemini")
    assert "threadloom brief" in json.loads(gemini.stdout)["hookSpecificOutput"]["additionalContext"]
    # Copilot CLI does not read sessionStart's output; Claude Code's PreCompact cannot add context.
    copilot = hook(
        home, "session-start", {"sessionId": "p-1", "cwd": str(repo), "source": "new"}, "--client", "copilot"
    )
    compact = {"session_id": "c-9", "cwd": str(repo), "hook_event_name": "PreCompact", "trigger": "auto"}
    pre_compact = hook(home, "pre-compact", compact, "--client", "claude")
    for done in (copilot, pre_compact):
        assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    assert [e["detail"]["client_session"] for e in events(home, "client.session_started")] == ["cur-1", "g-1", "p-1"]
    assert [e["vendor"] for e in events(home, "client.session_started")] == ["cursor", "gemini", "copilot"]
    [compacting] = events(home, "client.compacting")
    assert compacting["detail"]["trigger"] == "auto" and compacting["detail"]["client_session"] == "c-9"


@pytest.mark.parametrize(
    ("stdin", "why"),
    [
        (b"this is not json", "stdin is not JSON"),
        (b"", "stdin was empty"),
        (b"[1, 2]", "not an object"),
        (b"\xff\xfe{", "stdin is not JSON"),
    ],
)
def test_bad_stdin_injects_nothing_and_says_why(home: Path, stdin: bytes, why: str) -> None:
    done = hook(home, "session-start", stdin, "--client", "claude")
    assert (done.returncode, done.stdout) == (0, "")
    assert why in done.stderr and "nothing injected" in done.stderr


def test_no_daemon_and_a_home_that_cannot_be_made_injects_nothing(home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = hook(home, "session-start", {"session_id": "x", "cwd": str(tmp_path)}, THREADLOOM_HOME=str(blocker / "home"))
    assert (done.returncode, done.stdout) == (0, "")
    assert "cannot start the daemon" in done.stderr and "nothing injected" in done.stderr
    wrong = hook(home, "session-start", {"session_id": "x"}, "--client", "nope")
    assert (wrong.returncode, wrong.stdout) == (0, "") and "unexpected arguments" in wrong.stderr


def test_session_end_is_journaled_and_ties_to_the_agents_threadloom_session(home: Path, tmp_path: Path) -> None:
    repo = repository(tmp_path)
    # A session served in process, as a bridge's would be: its recorded agent pid is this test process, which
    # is the hook's parent just as the agent CLI is its hook's ancestor. The daemon does not serve it.
    server = RawSession(home, "--in-process")
    try:
        server.initialize()
        reply = server.request("tools/call", {"name": "status", "arguments": {}})
        session = reply["result"]["structuredContent"]["session"]["id"]
        start = hook(home, "session-start", claude_start(repo, "c-7"), "--client", "claude")
        assert start.returncode == 0 and json.loads(start.stdout)
        # With no ancestor to go by (say, the agent process has gone), the journal's earlier hook ties it.
        compacting: dict[str, Any] = {"event": "pre-compact", "client": "claude", "vendor": "claude"}
        compacting["client_session"] = "c-7"
        compacting |= {"cwd": str(repo), "ancestors": "not a list", "env": {}}
        assert control.request(home / "daemon.sock", "hook", **compacting) == {
            "ok": True,
            "text": None,
            "session": session,
        }
        end = {"session_id": "c-7", "cwd": str(repo), "hook_event_name": "SessionEnd", "reason": "prompt_input_exit"}
        done = hook(home, "session-end", end, "--client", "claude")
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        assert ended_at(home, session) is not None  # ended by the hook, before its server closed
    finally:
        server.close()
    [started] = events(home, "client.session_started")
    [ended] = events(home, "client.session_ended")
    assert started["session_id"] == ended["session_id"] == session
    assert ended["vendor"] == "claude" and ended["project"] == str(repo.resolve())
    assert ended["detail"] == {
        "client": "claude",
        "client_session": "c-7",
        "cwd": str(repo),
        "reason": "prompt_input_exit",
        "ended": True,
    }
    assert session in [e["session_id"] for e in events(home, "session.ended")]


def test_the_hook_process_imports_only_the_standard_library(home: Path, tmp_path: Path) -> None:
    repo = repository(tmp_path)
    code = (
        "import sys\n"
        "from threadloom.entry import main\n"
        "sys.argv = ['threadloom', 'hook', 'session-start', '--client', 'claude']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "top = {m.split('.')[0] for m in sys.modules}\n"
        "print(sorted(top - set(sys.stdlib_module_names) - {'threadloom', '__main__'}), file=sys.stderr)\n"
    )
    # -S: no site hooks (the editable install's finder) muddying the list; the package comes from PYTHONPATH.
    done = subprocess.run(
        [PY, "-S", "-c", code],
        input=json.dumps(claude_start(repo)).encode(),
        env=env_for(home, PYTHONPATH=str(Path(__file__).parent.parent)),
        capture_output=True,
        timeout=60,
    )
    assert "threadloom brief" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert done.stderr.decode().strip().splitlines()[-1] == "[]"


def test_a_hook_its_client_killed_before_the_reply_leaves_the_daemon_serving(home: Path, tmp_path: Path) -> None:
    repo = repository(tmp_path)
    assert hook(home, "session-start", claude_start(repo), "--client", "claude").returncode == 0
    pid = daemon_pid(home)
    request: dict[str, Any] = {"kind": "control", "op": "hook", "event": "session-start", "client": "claude"}
    request["vendor"] = "claude"
    request |= {"cwd": str(repo), "render": True, "env": {}}
    for _ in range(10):  # sent, then the connection reset at once (SO_LINGER 0), as a killed hook leaves it
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(home / "daemon.sock"))
        sock.sendall(json.dumps(request).encode() + b"\n")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    again = hook(home, "session-start", claude_start(repo), "--client", "claude")
    assert "threadloom brief" in json.loads(again.stdout)["hookSpecificOutput"]["additionalContext"]
    assert daemon_pid(home) == pid


def test_the_end_of_a_client_session_whose_bridge_still_serves_leaves_the_session_to_it(
    home: Path, tmp_path: Path
) -> None:
    repo = repository(tmp_path)
    bridge = RawSession(home)  # through the daemon: its agent pid is this test process, the hooks' parent
    try:
        bridge.initialize()
        reply = bridge.request("tools/call", {"name": "status", "arguments": {}})
        session = reply["result"]["structuredContent"]["session"]["id"]
        end = {"session_id": "c-8", "cwd": str(repo), "hook_event_name": "SessionEnd", "reason": "clear"}
        assert hook(home, "session-end", end, "--client", "claude").returncode == 0
        assert ended_at(home, session) is None  # /clear: the MCP server, and its session, go on
        [ended] = events(home, "client.session_ended")
        assert ended["session_id"] == session and ended["detail"]["ended"] is False
        # Another user's hook from the same agent process is never tied to this user's session.
        assert hook(home, "session-end", end, "--client", "claude", THREADLOOM_USER="mallory").returncode == 0
        assert events(home, "client.session_ended")[1]["session_id"] is None
    finally:
        bridge.close()
    assert ended_at(home, session) is not None
