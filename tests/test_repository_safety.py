"""A repository is untrusted input: symlinks planted in a clone and odd project roots must never make
threadloom read or write outside the repository (or its home). Driven through the public surfaces:
the CLI in a subprocess and the MCP server through a real client, in real git repositories.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import ListRootsResult, Root

from tests.helpers import PY, env_for, serve_params, structured

SECRET = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-marker-6f1d\n-----END OPENSSH PRIVATE KEY-----\n"
VICTIM = "title: the victim's own file\n"
STOLEN_THREAD = (
    "---\nid: search\ntitle: planted outside\nparent: main\nstatus: active\nauthor: x\n"
    "created: 2026-01-01T00:00:00Z\nupdated: 2026-01-01T00:00:00Z\n---\n## State\n- stolen-thread-marker\n"
)


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    path.chmod(0o755)  # as a clone under umask 022 would be
    return path


def make_decoy(path: Path) -> Path:
    """Files and folders outside the repository that a planted link points at."""
    (path / "dir").mkdir(parents=True)
    (path / "dir" / "keep.txt").write_text("keep me\n")
    (path / "cursor").mkdir()
    (path / "threads").mkdir()
    (path / "threads" / "search.md").write_text(STOLEN_THREAD)
    (path / "victim.yaml").write_text(VICTIM)
    (path / "id_rsa").write_text(SECRET)
    (path / "id_rsa").chmod(0o600)
    (path / "search.md").write_text(STOLEN_THREAD)
    return path


def fingerprint(root: Path) -> dict[str, str]:
    """Every entry under `root` (links not followed): its kind, mode and, for a file, its sha256."""
    found = {".": oct(root.lstat().st_mode)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                found[rel] = f"link {os.readlink(path)}"
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = f"dir {oct(st.st_mode)}"
            else:
                found[rel] = f"file {oct(st.st_mode)} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return found


def repo_texts(repo: Path) -> str:
    """All the repository's regular files (outside .git), links not followed."""
    chunks = []
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                chunks.append(path.read_text(errors="replace"))
    return "\n".join(chunks)


def plant(repo: Path, rel: str, target: Path | str) -> None:
    link = repo / rel
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def run(home: Path, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "threadloom", *args],
        env=env_for(home, **env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


# (where the link is planted, what it points at under the decoy, whether a project exists first)
PLANTS: list[tuple[str, str, bool]] = [
    (".threadloom", "dir", False),
    (".threadloom", "lookalike", True),
    (".threadloom/threads", "dir", False),
    (".threadloom/threads/shop", "threads", True),
    (".threadloom/projects/shop.yaml", "victim.yaml", False),
    (".threadloom/threads/shop/search.md", "search.md", True),
    (".threadloom/shop.lock", "victim.yaml", True),
    (".threadloom/.gitignore", "victim.yaml", False),
    (".threadloom/.gitignore", "ghost", False),
    ("AGENTS.md", "id_rsa", True),
    ("AGENTS.md", "ghost", True),
    (".cursor", "cursor", True),
    (".cursor/rules", "cursor", True),
    (".threadloom/instructions.md", "victim.yaml", True),
]

# Every repository-writing (and reading) operation an agent has.
OPS: list[tuple[str, dict[str, Any]]] = [
    ("thread_project", {"action": "create", "title": "Shop"}),
    ("thread_project", {"action": "list"}),
    ("thread_create", {"title": "Search", "parent": "main"}),
    ("thread_summary", {"text": "- Postgres", "section": "Decisions", "thread_id": "main"}),
    ("thread_summary", {"text": "- cart done", "section": "State", "thread_id": "search"}),
    ("thread_note", {"text": "a note", "thread_id": "search"}),
    ("thread_status", {"status": "idle", "thread_id": "search"}),
    ("thread_create", {"title": "Extra", "parent": "main"}),
    ("thread_rebase", {"thread_id": "extra", "new_parent": "search"}),
    ("thread_merge", {"parent_summary": "## State\n- merged", "thread_id": "extra"}),
    ("thread_delete", {"thread_id": "search"}),
    ("thread_init_files", {}),
    ("thread_context", {}),
    ("thread_stats", {}),
]


async def run_ops(client: Client, skip: int = 0) -> list[str]:
    """What each operation answered: its error, or `ok`, plus whatever it returned."""
    answers = []
    for name, args in OPS[skip:]:
        result = await client.call_tool(name, args)
        body = result.structured_content or {}
        answers.append(f"{name}: {body.get('error') if result.is_error else 'ok'} {body}")
    for uri in ("threadloom://tree", "threadloom://context", "threadloom://thread/search"):
        try:
            contents = (await client.read_resource(uri)).contents
            answers.append(f"{uri}: ok {[getattr(c, 'text', '') for c in contents]}")
        except MCPError as exc:
            answers.append(f"{uri}: {exc}")
    return answers


@pytest.mark.anyio
@pytest.mark.parametrize(("rel", "target", "with_project"), PLANTS, ids=[f"{p[0]}->{p[1]}" for p in PLANTS])
async def test_a_link_planted_out_of_the_repository_is_refused_by_name_and_nothing_outside_changes(
    home: Path, tmp_path: Path, rel: str, target: str, with_project: bool
) -> None:
    repo = git_repo(tmp_path / "repo")
    decoy = make_decoy(tmp_path / "decoy")
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        if with_project:
            for name, args in OPS[:3]:
                assert not (await client.call_tool(name, args)).is_error
        if target == "lookalike":  # a copy of the real folder, so that following the link would "work"
            shutil.copytree(repo / ".threadloom", decoy / "lookalike")
        before = fingerprint(decoy)
        plant(repo, rel, decoy / target)
        answers = await run_ops(client, skip=1 if with_project else 0)
    assert fingerprint(decoy) == before, "\n".join(answers)
    assert not (decoy / "ghost").exists()
    refusals = [a for a in answers if "outside the repository" in a]
    assert refusals, "\n".join(answers)
    assert all(f"{rel} is a symlink to" in a or "it is a symlink to" in a for a in refusals), "\n".join(refusals)
    assert any(rel in a for a in refusals), "\n".join(refusals)
    assert "secret-marker" not in repo_texts(repo) and "secret-marker" not in "\n".join(answers)
    assert "stolen-thread-marker" not in "\n".join(answers)
    assert not [a for a in answers if "internal error" in a], "\n".join(answers)


@pytest.mark.anyio
async def test_a_dangling_root_gitignore_and_links_inside_the_repository_are_left_alone(
    home: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    decoy = make_decoy(tmp_path / "decoy")
    before = fingerprint(decoy)
    plant(repo, ".gitignore", decoy / "ghost")
    (repo / "docs").mkdir()
    (repo / "docs" / "AGENTS.md").write_text("# Our rules\n")
    plant(repo, "AGENTS.md", "docs/AGENTS.md")  # a common layout: one file, two names
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        answers = await run_ops(client)
    assert not [a for a in answers if "error" in a.split(" ", 2)[1]], "\n".join(answers)
    assert fingerprint(decoy) == before and not (decoy / "ghost").exists()
    assert (repo / "AGENTS.md").is_symlink() and "threadloom:begin" in (repo / "docs" / "AGENTS.md").read_text()


@pytest.mark.anyio
async def test_a_link_into_the_repositorys_git_folder_is_refused(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    config = (repo / ".git" / "config").read_bytes()
    plant(repo, "AGENTS.md", ".git/config")
    plant(repo, ".cursor", ".git/hooks")
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        agents = await client.call_tool("thread_init_files", {"targets": ["agents"]})
        cursor = await client.call_tool("thread_init_files", {"targets": ["cursor"]})
    assert agents.is_error and "AGENTS.md" in structured(agents)["error"] and ".git" in structured(agents)["error"]
    assert cursor.is_error and ".cursor" in structured(cursor)["error"]
    assert (repo / ".git" / "config").read_bytes() == config and not (repo / ".git/hooks/rules").exists()


@pytest.mark.anyio
async def test_a_pipe_a_huge_file_or_binary_text_is_reported_not_read(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        assert not (await client.call_tool("thread_project", {"action": "create", "title": "Shop"})).is_error
        os.mkfifo(repo / ".threadloom/threads/shop/pipe.md")  # reading it would block forever
        (repo / ".threadloom/threads/shop/huge.md").write_bytes(b"-" * (5 * 2**20))
        (repo / "AGENTS.md").write_bytes(b"\xff\xfe rules in UTF-16\n")
        context = structured(await client.call_tool("thread_context", {}))
        init = await client.call_tool("thread_init_files", {"targets": ["agents"]})
    assert {p["path"]: p["error"] for p in context["problems"]} == {
        ".threadloom/threads/shop/huge.md": "cannot read .threadloom/threads/shop/huge.md: it is larger than 4 MiB",
        ".threadloom/threads/shop/pipe.md": "cannot read .threadloom/threads/shop/pipe.md: it is not a regular file",
    }
    assert init.is_error and structured(init)["error"] == "cannot read AGENTS.md: it is not UTF-8 text"


# Nine lists of nine, nested nine deep through aliases: tiny on disk, 9**9 items once printed.
ALIAS_BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]\n" for n in range(1, 9)
)


@pytest.mark.anyio
async def test_yaml_aliases_cannot_make_a_thread_or_project_file_enormous(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    params = serve_params(home, "--in-process", THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full")
    async with Client(params, mode="legacy") as client:
        assert not (await client.call_tool("thread_project", {"action": "create", "title": "Shop"})).is_error
        (repo / ".threadloom/threads/shop/bomb.md").write_text(
            f"---\n{ALIAS_BOMB}id: bomb\ntitle: *a8\nparent: main\ncreated: 2026-01-01\nupdated: 2026-01-01\n---\n"
        )
        (repo / ".threadloom/threads/shop/bomb-id.md").write_text(f"---\n{ALIAS_BOMB}id: *a8\n---\n")
        (repo / ".threadloom/projects/boom.yaml").write_text(f"{ALIAS_BOMB}title: *a8\n")
        context = structured(await client.call_tool("thread_context", {}))
        projects = structured(await client.call_tool("thread_project", {}))
    assert {p["path"]: p["error"] for p in context["problems"]} == {
        ".threadloom/threads/shop/bomb.md": "title must be text, not a list",
        ".threadloom/threads/shop/bomb-id.md": "id must be text, not a list",
    }
    assert "skipped .threadloom/projects/boom.yaml: title must be text, not a list" in projects["caveats"]


def test_creating_a_project_never_replaces_a_file_already_there(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    (repo / ".threadloom/projects").mkdir(parents=True)
    (repo / ".threadloom/projects/shop.yaml").write_text("title: [hand-broken\n")
    done = run(home, "thread", "project", "--create", "Shop", THREADLOOM_ROOT=str(repo))
    assert done.returncode == 0, done.stderr
    assert '"id": "shop-2"' in done.stdout and "skipped .threadloom/projects/shop.yaml" in done.stdout
    assert (repo / ".threadloom/projects/shop.yaml").read_text() == "title: [hand-broken\n"


@pytest.mark.parametrize(
    ("rel", "target", "command"),
    [
        ("AGENTS.md", "id_rsa", ["init"]),
        (".cursor", "cursor", ["init", "--target", "cursor"]),
        (".threadloom", "dir", ["init", "--target", "generic"]),
        (".threadloom/projects/shop.yaml", "victim.yaml", ["thread", "project", "--create", "Shop"]),
        (".threadloom/threads", "dir", ["thread", "project", "--create", "Shop"]),
    ],
)
def test_the_cli_refuses_a_planted_link_by_name(
    home: Path, tmp_path: Path, rel: str, target: str, command: list[str]
) -> None:
    repo = git_repo(tmp_path / "repo")
    decoy = make_decoy(tmp_path / "decoy")
    before = fingerprint(decoy)
    plant(repo, rel, decoy / target)
    done = run(home, *command, THREADLOOM_ROOT=str(repo))
    assert done.returncode == 2, done.stdout + done.stderr
    assert rel in done.stderr and "outside the repository" in done.stderr, done.stderr
    assert fingerprint(decoy) == before
    assert "secret-marker" not in repo_texts(repo)


def test_the_cli_tree_lists_a_thread_file_it_refused(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    decoy = make_decoy(tmp_path / "decoy")
    env = {"THREADLOOM_ROOT": str(repo)}
    assert run(home, "thread", "project", "--create", "Shop", **env).returncode == 0
    plant(repo, ".threadloom/threads/shop/search.md", decoy / "search.md")
    tree = run(home, "thread", "tree", **env)
    assert tree.stdout.startswith("main  <- active\n! .threadloom/threads/shop/search.md: "), tree.stdout
    assert " ".join(tree.stdout.split()).endswith(  # the terminal may wrap the long line
        f"refusing to read .threadloom/threads/shop/search.md: it is a symlink to {decoy / 'search.md'} "
        "outside the repository"
    )


# roots


@pytest.fixture
def filesystem_root_guard() -> Iterator[None]:
    """Whatever a broken threadloom would write into / is removed again (these tests may run as root)."""
    names = ("AGENTS.md", ".threadloom", ".cursor", "repo")
    existed = {n for n in names if os.path.lexists(f"/{n}")}
    yield
    for name in set(names) - existed:
        path = Path("/") / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            path.unlink()


@pytest.mark.usefixtures("filesystem_root_guard")
def test_the_filesystem_root_is_refused_as_a_repository(home: Path) -> None:
    existed = {n: os.path.lexists(f"/{n}") for n in ("AGENTS.md", ".threadloom", ".cursor")}
    for command in (["init"], ["thread", "project", "--create", "Shop"], ["thread", "tree"]):
        done = run(home, *command, THREADLOOM_ROOT="/")
        assert done.returncode == 2 and "refusing to use / as a repository" in done.stderr, done.stderr
    assert {n: os.path.lexists(f"/{n}") for n in existed} == existed


@pytest.mark.anyio
@pytest.mark.usefixtures("filesystem_root_guard")
@pytest.mark.parametrize("setting", [{}, {"THREADLOOM_ROOT": "/"}], ids=["started-there", "THREADLOOM_ROOT"])
async def test_an_agent_in_the_filesystem_root_keeps_its_memory_but_writes_nothing_there(
    home: Path, setting: dict[str, str]
) -> None:
    existed = {n: os.path.lexists(f"/{n}") for n in ("AGENTS.md", ".threadloom", ".cursor")}
    params = serve_params(home, "--in-process", THREADLOOM_TOOLSET="full", **setting)
    params.cwd = "/"
    async with Client(params, mode="legacy") as client:
        stored = await client.call_tool("memory_store", {"content": "Tests run with make test"})
        init = await client.call_tool("thread_init_files", {})
        created = await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
    assert not stored.is_error
    assert init.is_error and "refusing to use / as a repository" in structured(init)["error"]
    assert created.is_error and "refusing to use / as a repository" in structured(created)["error"]
    assert {n: os.path.lexists(f"/{n}") for n in existed} == existed


def test_the_home_folder_is_refused_as_a_repository(home: Path, tmp_path: Path) -> None:
    user_home = tmp_path / "user"
    user_home.mkdir()
    for root in (str(user_home), "~"):
        done = run(home, "init", THREADLOOM_ROOT=root, HOME=str(user_home))
        assert done.returncode == 2 and f"refusing to use {user_home} as a repository" in done.stderr, done.stderr
    assert list(user_home.iterdir()) == []


def test_a_missing_root_is_refused_and_not_created(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "repo"
    for command in (["init"], ["thread", "project", "--create", "Shop"]):
        done = run(home, *command, THREADLOOM_ROOT=str(missing))
        assert done.returncode == 2 and f"{missing} does not exist" in done.stderr, done.stderr
    assert not (tmp_path / "typo").exists()


@pytest.mark.anyio
async def test_a_root_that_is_a_file_or_missing_gets_a_clear_error_over_mcp(home: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder\n")
    hello = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    hello += b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
    for root, expected in ((a_file, f"{a_file} is not a folder"), (tmp_path / "nope", "does not exist")):
        for mode in (("--in-process",), ()):  # a per-session setting is checked when the session starts
            done = subprocess.run(
                [PY, "-m", "threadloom", "serve", *mode],
                input=hello,
                env=env_for(home, THREADLOOM_ROOT=str(root), THREADLOOM_TOOLSET="full"),
                capture_output=True,
                timeout=60,
            )
            stderr = done.stderr.decode()
            assert done.returncode == 2 and expected in stderr, (mode, done.returncode, stderr)
            assert "internal error" not in stderr and "Traceback" not in stderr
    assert not (tmp_path / "nope").exists() and a_file.read_text() == "not a folder\n"


@pytest.mark.anyio
@pytest.mark.usefixtures("filesystem_root_guard")
async def test_a_relative_root_is_resolved_against_the_agents_working_directory(home: Path, tmp_path: Path) -> None:
    agent_dir = tmp_path / "work"
    repo = git_repo(agent_dir / "repo")
    params = serve_params(home, THREADLOOM_ROOT="repo", THREADLOOM_TOOLSET="full")  # through the daemon
    params.cwd = str(agent_dir)
    async with Client(params, mode="legacy") as client:
        created = await client.call_tool("thread_project", {"action": "create", "title": "Shop"})
        status = structured(await client.call_tool("status", {}))
    assert not created.is_error, structured(created)
    assert status["session"]["project"] == str(repo)
    assert (repo / ".threadloom/threads/shop/main.md").is_file() and not Path("/repo").exists()  # the daemon's cwd
    cli_created = run(home, "thread", "project", "--create", "Admin", cwd=agent_dir, THREADLOOM_ROOT="repo")
    assert cli_created.returncode == 0, cli_created.stderr
    assert (repo / ".threadloom/projects/admin.yaml").is_file()


def test_the_cli_in_a_subdirectory_works_in_the_repository_root(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    deep = repo / "src" / "deep"
    deep.mkdir(parents=True)
    assert run(home, "thread", "project", "--create", "Shop", cwd=deep).returncode == 0
    assert run(home, "init", "--target", "agents", cwd=deep).returncode == 0
    assert (repo / ".threadloom/threads/shop/main.md").is_file() and (repo / "AGENTS.md").is_file()
    assert list(deep.iterdir()) == []
    tree = run(home, "thread", "tree", cwd=repo / "src")
    assert tree.stdout.strip() == "main  <- active", tree.stderr


@pytest.mark.anyio
async def test_client_roots_are_checked_and_lead_to_the_repository_root(home: Path, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    (repo / "pkg").mkdir()
    offered = [(repo / "pkg").as_uri()]

    async def roots(_ctx: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=uri) for uri in offered])  # type: ignore[arg-type]

    async with Client(serve_params(home, "--in-process"), mode="legacy", list_roots_callback=roots) as client:
        st = structured(await client.call_tool("status", {}))
    assert st["session"]["project"] == str(repo)
    offered = [(tmp_path / "gone").as_uri()]
    async with Client(serve_params(home, "--in-process"), mode="legacy", list_roots_callback=roots) as client:
        refused = await client.call_tool("status", {})
    assert refused.is_error and "does not exist" in structured(refused)["error"]
    assert not (tmp_path / "gone").exists()


# permissions


@pytest.mark.anyio
async def test_repository_files_get_the_repositorys_permissions_and_the_home_stays_private(
    home: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo")
    params = serve_params(home, THREADLOOM_ROOT=str(repo), THREADLOOM_TOOLSET="full")  # the daemon: umask 077
    async with Client(params, mode="legacy") as client:
        assert not (await client.call_tool("thread_project", {"action": "create", "title": "Shop"})).is_error
        assert not (await client.call_tool("thread_create", {"title": "Search"})).is_error
        assert not (await client.call_tool("thread_init_files", {})).is_error
    modes = {
        str(p.relative_to(repo)): stat.S_IMODE(p.lstat().st_mode)
        for p in [*repo.rglob("*")]
        if ".git" not in p.relative_to(repo).parts
    }
    assert modes == {
        ".threadloom": 0o755,
        ".threadloom/.gitignore": 0o644,
        ".threadloom/projects": 0o755,
        ".threadloom/projects/shop.yaml": 0o644,
        ".threadloom/threads": 0o755,
        ".threadloom/threads/shop": 0o755,
        ".threadloom/threads/shop/main.md": 0o644,
        ".threadloom/threads/shop/search.md": 0o644,
        ".threadloom/shop.lock": 0o644,
        ".threadloom/instructions.md": 0o644,
        ".cursor": 0o755,
        ".cursor/rules": 0o755,
        ".cursor/rules/threadloom.mdc": 0o644,
        "AGENTS.md": 0o644,
    }
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "threadloom.db").stat().st_mode) == 0o600
