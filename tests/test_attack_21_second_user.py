"""A second user of a team server, from outside: what the isolation matrix (tests/test_isolation_team.py) leaves
out (issue 21). Real `serve --http --accounts` over each backend (tests/backend_home.py), real MCP clients with
each user's own token.

dave is a `reader` of acme: `memory_link` refused him a link to alice's project memory, but `memory_store` with
`related`, the automatic links a stored memory gets to similar ones, and `memory_amend` with `by` (whose
supersedes edge starts at the shared memory) all made one. bob, a `member`, may do each.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.backend_home import home, open_home_store
from tests.team_server import call, make_team, team_client, team_server

__all__ = ["home"]
pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(600)]
ENV = {"THREADLOOM_MAINTENANCE_INTERVAL": "0", "THREADLOOM_TOOLSET": "full"}
FACT = "the payment gateway retries failed charges three times with exponential backoff"


def add_reader(home: Path, user: str, org: str) -> str:
    """A new account, a reader of `org` (the accounts service on the home's store, as make_team): its token."""
    from threadloom.accounts.service import Accounts

    store = open_home_store(home)
    try:
        accounts = Accounts(store)
        accounts.add_user(user)
        accounts.set_member(org, user, "reader")
        return accounts.create_token(user, "test").secret
    finally:
        store.close()


def linkers(home: Path, memory_id: str) -> list[str]:
    """The owners of the memories at the other end of each edge of `memory_id`, read from the store."""
    other = "CASE WHEN e.source = :m THEN e.target ELSE e.source END"
    sql = f"SELECT m.owner FROM memory_edges e JOIN memories m ON m.id = {other} WHERE :m IN (e.source, e.target)"
    store = open_home_store(home)
    try:
        return sorted(str(row["owner"]) for row in store.read(lambda r: r.rows(sql, {"m": memory_id})))
    finally:
        store.close()


async def link_three_ways(client: Client, shared: str, label: str) -> dict[str, Any]:
    """Each way a memory of the caller's gets an edge to `shared`: the answers, unchecked."""
    explicit = await client.call_tool(
        "memory_store", {"content": f"{label} reads it", "related": [{"id": shared, "type": "refines"}]}
    )
    similar = await client.call_tool("memory_store", {"content": f"{FACT} and jitter, says {label}"})
    own = await call(client, "memory_store", {"content": f"{label} thought the gateway never retried"})
    amended = await client.call_tool("memory_amend", {"memory_id": own["id"], "by": shared})
    return {"explicit": explicit, "similar": similar, "amended": amended, "own": own["id"]}


async def test_a_reader_gets_no_edge_to_a_shared_memory_by_store_or_amend(home: Path, tmp_path: Path) -> None:
    tokens = make_team(home) | {"dave": add_reader(home, "dave", "acme")}
    with team_server(home, tmp_path, **ENV) as team:
        team.tokens = tokens
        async with (
            team_client(team, "alice", "shop") as alice,
            team_client(team, "bob", "shop") as bob,
            team_client(team, "dave", "shop") as dave,
        ):
            shared = (await call(alice, "memory_store", {"content": FACT, "visibility": "project"}))["id"]
            member = await link_three_ways(bob, shared, "bob")
            reader = await link_three_ways(dave, shared, "dave")
            daves = await call(dave, "memory_search", {"query": "", "limit": 50})

    for what in ("explicit", "similar", "amended"):
        assert not member[what].is_error, (what, member[what].structured_content)
    assert [e["target"] for e in member["similar"].structured_content["auto_links"]] == [shared]

    refused = "you are a reader of organisation 'acme'"
    for what in ("explicit", "amended"):
        answer = reader[what]
        assert answer.is_error and refused in answer.structured_content["error"], (what, answer.structured_content)
    assert not reader["similar"].is_error and reader["similar"].structured_content["auto_links"] == []
    stored = {m["content"]: m for m in daves["memories"]}
    assert "dave reads it" not in stored  # the refused store wrote nothing
    assert "dave thought the gateway never retried" in stored  # a search leaves out superseded memories

    assert linkers(home, shared) == ["bob", "bob", "bob"]  # each of bob's ways, none of dave's


def figures(event: dict[str, Any]) -> dict[str, int]:
    """An event's numbers as catch_up gives them (its detail is the event's own)."""
    return {k: v for k, v in event.items() if isinstance(v, int) and not isinstance(v, bool)}


async def test_catch_up_shows_no_number_that_another_organisations_work_moves(home: Path, tmp_path: Path) -> None:
    """carol reads her other session's memory events in three rounds of the same calls; between the second and
    the third alice (acme) stores 5 memories. Each event's `id` was the store's event counter: its step grew by
    alice's 10 events (a stored memory and a tool call each)."""
    tokens = make_team(home)
    with team_server(home, tmp_path, **ENV) as team:
        team.tokens = tokens
        async with (
            team_client(team, "alice", "shop") as alice,
            team_client(team, "carol", "garden") as reading,
            team_client(team, "carol", "garden") as writing,
        ):
            await call(reading, "peers", {})  # her reading session starts before the first round
            rounds = []
            for n, busy in enumerate((False, False, True)):
                for i in range(5 if busy else 0):
                    await call(alice, "memory_store", {"content": f"acme's launch checklist, item {i}"})
                await call(writing, "memory_store", {"content": f"garden round {n}", "visibility": "project"})
                events = (await call(reading, "catch_up", {"peek": True}))["events"]
                assert [e["kind"] for e in events] == ["memory.stored"] * (n + 1), events
                rounds.append(figures(events[-1]))
    steps = [{k: later[k] - earlier.get(k, 0) for k in later} for earlier, later in pairwise(rounds)]
    assert steps[0] == steps[1], rounds


async def test_catch_up_shows_a_peer_no_private_memory_an_amend_corrected_nor_its_reason(
    home: Path, tmp_path: Path
) -> None:
    """alice corrects a private memory with a project one: bob, in her project, read the `memory.amended` event
    (shown for its new memory) with her private memory's id and her reason; and, of a project memory she linked
    to a private one, the `memory.stored` event's count of its edges (`edges: 1`, none of which he can see)."""
    tokens = make_team(home)
    with team_server(home, tmp_path, **ENV) as team:
        team.tokens = tokens
        async with team_client(team, "alice", "shop") as alice, team_client(team, "bob", "shop") as bob:
            await call(bob, "peers", {})  # his session starts before her work
            private = (await call(alice, "memory_store", {"content": "my draft: acme buys a rival in may"}))["id"]
            shared = await call(alice, "memory_store", {"content": "checkout uses gateway v2", "visibility": "project"})
            earlier = await call(
                alice, "memory_store", {"content": "checkout uses gateway v1", "visibility": "project"}
            )
            for old, reason in ((private, "the rival deal fell through"), (earlier["id"], "moved to v2")):
                await call(alice, "memory_amend", {"memory_id": old, "by": shared["id"], "reason": reason})
            doubt = (await call(alice, "memory_store", {"content": "my doubt: v2 drops refunds"}))["id"]
            linked = {
                "content": "refunds need a check",
                "visibility": "project",
                "related": [{"id": doubt, "type": "refines"}],
            }
            linked_id = (await call(alice, "memory_store", linked))["id"]
            seen = await call(bob, "catch_up", {"peek": True})
    amended = [e["detail"] for e in seen["events"] if e["kind"] == "memory.amended"]
    assert amended == [{"old": earlier["id"], "new": shared["id"], "reason": "moved to v2"}], seen
    assert private not in str(seen) and "rival" not in str(seen), seen
    stored = [e["detail"] for e in seen["events"] if e["kind"] == "memory.stored"]
    assert {"id": linked_id} in stored, stored  # no count of her edges: one ends at her private doubt


async def activation(client: Client, memory_id: str) -> float:
    """The memory's score as a traverse shows it (`activation`, the stored decay score)."""
    nodes = (await call(client, "memory_traverse", {"memory_id": memory_id, "depth": 1}))["nodes"]
    return float(next(n["activation"] for n in nodes if n["id"] == memory_id))


async def test_a_score_is_moved_by_no_edge_from_a_memory_its_viewers_cannot_see(home: Path, tmp_path: Path) -> None:
    """alice links three private memories to bob's project memory, and one to her own: each one's `activation`,
    which bob and the project read (and which ranks a recall), rose (0.15 to 0.35 for three edges) by edges hidden
    from them, while memory_explain counted none. An edge between two project memories still counts (so does a
    pass over every memory)."""
    tokens = make_team(home)
    with team_server(home, tmp_path, **ENV) as team:
        team.tokens = tokens
        async with team_client(team, "alice", "shop") as alice, team_client(team, "bob", "shop") as bob:
            shared = {"visibility": "project"}
            his = (await call(bob, "memory_store", {"content": "queues drain at night"} | shared))["id"]
            hers = (await call(alice, "memory_store", {"content": "retries back off"} | shared))["id"]
            before = {m: await activation(bob, m) for m in (his, hers)}
            for n, target in enumerate((his, his, his, hers)):
                private = (await call(alice, "memory_store", {"content": f"alice's private doubt {n}"}))["id"]
                await call(alice, "memory_link", {"source": private, "target": target, "type": "refines"})
            await call(alice, "memory_maintain", {"dry_run": False})
            after = {m: await activation(bob, m) for m in (his, hers)}
            explained = await call(bob, "memory_explain", {"memory_id": his})
            another = (await call(bob, "memory_store", {"content": "bob's note on the queues"} | shared))["id"]
            await call(bob, "memory_link", {"source": another, "target": his, "type": "refines"})
            linked = await activation(bob, his)
    # explain scores at its own moment, 6 places: 0.15 falls 4e-8 a second after bob's store, to 0.149999 from
    # 12.5 s on (a loaded machine gets there); `activation` shows 4 places, which that fall moves after 20 minutes
    assert explained["score"]["inputs"]["edges"] == 0, explained["score"]
    assert after == before and after[his] == round(explained["score"]["decay_score"], 4), (before, after, explained)
    assert linked > before[his]


async def test_a_shared_memory_erased_by_its_owner_is_not_replayed_to_another_user(home: Path, tmp_path: Path) -> None:
    """bob corrects his memory by alice's project memory with an idempotency key: the replay record keeps his
    answer, her text in it. She then erases her memory (`forget`); his replay still returned the text, and the
    store kept it. His records that do not hold her memory stay; her answer counts none of his."""
    tokens = make_team(home)
    with team_server(home, tmp_path, **ENV | {"THREADLOOM_TOOLSET": "full,erasure"}) as team:
        team.tokens = tokens
        async with team_client(team, "alice", "shop") as alice, team_client(team, "bob", "shop") as bob:
            text = {"content": "the vault code is tangerine 4711", "visibility": "project"}
            hers = (await call(alice, "memory_store", text))["id"]
            mine, other = [
                (await call(bob, "memory_store", {"content": t}))["id"] for t in ("bob's guess", "bob's aside")
            ]
            amend = {"memory_id": mine, "by": hers, "idempotency_key": "bob-amend-1"}
            link = {"source": mine, "target": other, "type": "related_to", "idempotency_key": "bob-link-1"}
            assert "tangerine" in str(await call(bob, "memory_amend", amend))
            await call(bob, "memory_link", link)
            erased = await call(alice, "forget", {"text": "tangerine", "kinds": ["memories"], "dry_run": False})
            again = await bob.call_tool("memory_amend", amend)
            kept = await call(bob, "memory_link", link)
    assert erased["erased"]["memories"] == 1 and erased["erased"]["replay_records"] == 0, erased
    assert "tangerine" not in again.model_dump_json(), again
    assert kept.get("replayed") is True, kept
    store = open_home_store(home)
    try:
        held = store.read(lambda r: r.scalar("SELECT count(*) FROM tool_requests WHERE result LIKE '%tangerine%'"))
    finally:
        store.close()
    assert held == 0


def set_role(home: Path, org: str, user: str, role: str | None) -> None:
    """Make `user` a `role` of `org`, or (None) take them out (the accounts service on the home's store)."""
    from threadloom.accounts.service import Accounts

    store = open_home_store(home)
    try:
        accounts = Accounts(store)
        if role is None:
            accounts.remove_member(org, user)
        else:
            accounts.set_member(org, user, role)
    finally:
        store.close()


async def test_no_replay_hands_back_a_memory_the_caller_no_longer_sees(home: Path, tmp_path: Path) -> None:
    """bob, in acme and globex, corrects his memories by two of alice's shop memories with idempotency keys. She
    deletes one; he is taken out of acme. A retry with each key replayed the first answer, her text in it."""
    tokens = make_team(home)
    set_role(home, "globex", "bob", "member")
    with team_server(home, tmp_path, **ENV) as team:
        team.tokens = tokens
        async with team_client(team, "alice", "shop") as alice, team_client(team, "bob", "shop") as bob:
            amends = []
            for word in ("tangerine", "quince"):
                hers = await call(alice, "memory_store", {"content": f"the {word} vault", "visibility": "project"})
                mine = await call(bob, "memory_store", {"content": f"bob's guess about the {word} vault"})
                amend = {"memory_id": mine["id"], "by": hers["id"], "idempotency_key": f"bob-{word}"}
                assert word in str(await call(bob, "memory_amend", amend))
                amends.append(amend)
            await call(alice, "memory_delete", {"memory_id": amends[0]["by"]})
            deleted = await bob.call_tool("memory_amend", amends[0])
            set_role(home, "acme", "bob", None)
        async with team_client(team, "bob", "garden") as bob:
            removed = await bob.call_tool("memory_amend", amends[1])
    for answer, word in ((deleted, "tangerine"), (removed, "quince")):
        assert answer.is_error and word not in answer.model_dump_json(), answer
        assert "no longer see" in answer.structured_content["error"], answer.structured_content
