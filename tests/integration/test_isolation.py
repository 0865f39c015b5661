"""Isolation, adversarially (issue 8, item 4): one tenant's or user's memory never reaches another,
on every read path: the library (``recall_for`` with ``tenant_id=``), the CLI (`recall`,
`memories`, `timeline`, `history`), the HTTP API, the MCP server's tools; and the inspector, which
only calls the API (its user list is tenant-scoped:
tests/integration/test_inspector_api.py::test_users_lists_only_the_keys_tenant_with_counts_and_pages).

Every stored memory and turn carries a marker unique to its (tenant, user); a read for anyone else
may return nothing of it. The attacks: look-alike user ids, wildcard and filter-injection strings
as ids and as queries, and exact-key recall with another user's memory ids and event ids.
Already covered elsewhere and not repeated here: the API's guessed-id reads and writes on every
memory route (tests/integration/test_api.py::test_a_key_never_reaches_another_tenants_users) and
each index adapter's scoping (tests/contract/test_index_contract.py).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import anyio
import pytest

from producers.publisher import Publisher
from service.operations.recall import recall_for
from shared.events import validate_turn
from shared.models import Memory
from shared.queues import IndexKind
from shared.settings import Settings
from tests.support.api import AT, INDEXES, ApiEnv, api_settings, build_env, seed_memory
from tests.support.services import cuemem_in_process

A, B = "tenant-a", "tenant-b"
# (tenant, user) -> a marker found in nothing else. The victims are alice and bob of tenant A;
# tenant B has its own "alice" (same id, other tenant).
OWNERS = [(A, "alice"), (A, "bob"), (B, "alice")]
LOOK_ALIKES = [
    "alice ", " alice", "ALICE", "Alice", "alice\u200b", "\u200balice", "alice%", "alice*", "*", "%",
    "alice' OR '1'='1", "' OR 1=1 --", "../alice", "alice/..", "alice\x00", "alice\n", "alice.", "alice:",
    "tenant-a:alice", "tenant-a/alice", "alice@tenant-a", "alic", "alicee", "аlice",  # Cyrillic а
    '{"$ne": null}', "user_id:alice", "alice OR user_id:bob", "",
]  # fmt: skip
INJECTION_QUERIES = [
    "*", "%", "' OR '1'='1", "\" OR \"\"=\"", "alice' OR user_id LIKE '%", "user_id:* tenant_id:*",
    '{"must": []}', "1; SELECT * FROM memories --", "\\", "..", "银行卡密码 OR 1=1",
]  # fmt: skip


def marker(tenant: str, user: str) -> str:
    return f"ISO{tenant[-1].upper()}{user.upper()}Q7"


@dataclass
class World:
    env: ApiEnv
    memories: dict[tuple[str, str], list[Memory]]
    event_ids: dict[tuple[str, str], list[str]]

    def foreign_markers(self, tenant: str, user: str) -> list[str]:
        return [marker(t, u) for t, u in OWNERS if (t, u) != (tenant, user)]


def _no_marker(found: Any, markers: list[str], what: str) -> None:
    text = json.dumps(found, ensure_ascii=False) if not isinstance(found, str) else found
    leaked = [m for m in markers if m in text]
    assert not leaked, f"{what} leaked {leaked}: {text[:400]}"


def _visible(out: dict[str, Any]) -> dict[str, Any]:
    # What a reader gets back as memory: items and the prompt block. The trace echoes the query
    # (its cues), and the queries below deliberately hold other users' content.
    return {"items": out["items"], "prompt": out.get("prompt", "")}


@pytest.fixture(params=INDEXES)
def world(it_settings: Settings, request: pytest.FixtureRequest) -> Iterator[World]:
    # Every attack on the fake index and on the embedded engine: the engine's own filters, not a
    # synchronous copy of what the test wrote, then Postgres's re-read of what it found.
    # Rate limits off: the attacks send hundreds of recalls a second as one tenant, which is what
    # a budget refuses (tests/integration/test_rate_limits.py); here every answer must be read.
    isolated = api_settings(it_settings).model_copy(update={"tenant_id": A, "rate_limits": False})
    env = build_env(isolated, index=request.param)
    c = env.container
    memories: dict[tuple[str, str], list[Memory]] = {}
    events: dict[tuple[str, str], list[str]] = {}
    for i, (tenant, user) in enumerate(OWNERS):
        mark = marker(tenant, user)
        memories[(tenant, user)] = [
            seed_memory(c, tenant, user, f"我的银行卡密码是{mark}", n=10 * i),
            seed_memory(c, tenant, user, f"I live in Berlin, door code {mark}", n=10 * i + 1),
        ]
        # Recorded turns (timeline, the conversation log) of the same users, with the marker too.
        with c.uow() as uow:
            for seq in (1, 2):
                turn = validate_turn(
                    {
                        "event_id": f"iso-{tenant}-{user}-{seq}",
                        "tenant_id": tenant,
                        "user_id": user,
                        "session_id": "s1",
                        "seq": seq,
                        "role": "user",
                        "content": f"turn {seq} of {mark}: 我住在柏林",
                        "at": (AT + timedelta(minutes=seq)).isoformat(),
                    }
                )
                uow.events.insert_if_absent(turn, "done")
            uow.commit()
        events[(tenant, user)] = [f"iso-{tenant}-{user}-1", f"iso-{tenant}-{user}-2"]
        events[(tenant, user)] += [s["event_id"] for m in memories[(tenant, user)] for s in m.sources]
    # Working memory (read-your-writes) is another store: publish one turn per owner into it.
    with Publisher.from_settings(env.container.settings) as pub:
        for tenant, user in OWNERS:
            pub.publish(
                tenant_id=tenant,
                user_id=user,
                session_id="s1",
                role="user",
                content=f"工作记忆 {marker(tenant, user)}",
            )
    yield World(env, memories, events)
    env.client.app.state.close()  # type: ignore[attr-defined]
    env.container.close()


def _attacks(world: World, tenant: str, user: str) -> list[str]:
    """Queries aimed at everyone else's data: their content, ids, event ids, and injections."""
    queries = list(INJECTION_QUERIES)
    for owner, mems in world.memories.items():
        if owner == (tenant, user):
            continue
        queries += [m.content for m in mems] + [m.id for m in mems] + [m.id.upper() for m in mems]
        queries += [marker(*owner), "银行卡密码", "door code Berlin", "工作记忆"]
        queries += [e for e in world.event_ids[owner]] + [f"event:{e}" for e in world.event_ids[owner]]
    return list(dict.fromkeys(queries))


# --- library ------------------------------------------------------------------------------------


def test_library_recall_never_crosses_tenants_or_users(world: World) -> None:
    c = world.env.container
    tried = 0
    # The owners themselves find their own data: the attacks below are not vacuous.
    for tenant, user in OWNERS:
        out = recall_for(c, user, "银行卡密码", tenant_id=tenant, reinforce=False, session_id="s1")
        assert marker(tenant, user) in json.dumps(_visible(out), ensure_ascii=False), (tenant, user)
        own = world.memories[(tenant, user)][0]
        assert [i["id"] for i in recall_for(c, user, own.id, tenant_id=tenant, reinforce=False)["items"]] == [
            own.id
        ]
    for tenant, user in OWNERS:
        foreign = world.foreign_markers(tenant, user)
        for query in _attacks(world, tenant, user):
            for session in (None, "s1"):
                out = recall_for(
                    c,
                    user,
                    query,
                    tenant_id=tenant,
                    reinforce=False,
                    include_history=True,
                    session_id=session,
                    k=50,
                )
                _no_marker(_visible(out), foreign, f"recall_for({tenant}/{user}, {query!r})")
                tried += 1
    # Look-alike users see nothing at all: not alice's, not anyone's.
    every = [marker(t, u) for t, u in OWNERS]
    for tenant in (A, B, "tenant-a ", "TENANT-A", "*", "tenant-a' OR '1'='1"):
        for user in [u for u in LOOK_ALIKES if u]:
            for query in ("银行卡密码", "door code Berlin", "工作记忆", world.memories[(A, "alice")][0].id):
                try:
                    out = recall_for(c, user, query, tenant_id=tenant, reinforce=False, session_id="s1")
                except ValueError:
                    continue  # refused as input: nothing returned
                _no_marker(_visible(out), every, f"recall_for({tenant!r}/{user!r})")
                tried += 1
    print("ISOLATION library recalls", tried)


# --- CLI ---------------------------------------------------------------------------------------


def _cli(settings: Settings, tenant: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cuemem_in_process(settings, *args, CUEMEM_TENANT_ID=tenant)


def test_cli_reads_never_cross_tenants_or_users(world: World) -> None:
    settings = world.env.container.settings
    if world.env.index == "edge":
        # The CLI opens the embedded indexes itself, as a second process would: this process
        # lets go of them first (one owner per shard), and the CLI then searches the seeded points.
        for kind in (IndexKind.MEMORIES, IndexKind.TURNS):
            opened = world.env.container.index(kind)
            if opened is not None:
                opened.close()
    alice_a = world.memories[(A, "alice")]
    every = [marker(t, u) for t, u in OWNERS]
    runs = 0
    # Tenant B's alice: same user id, other tenant; then tenant A's bob.
    for tenant, user in ((B, "alice"), (A, "bob")):
        foreign = world.foreign_markers(tenant, user)
        mine = marker(tenant, user)
        listed = _cli(settings, tenant, "memories", "--user", user, "--all", "--json")
        assert listed.returncode == 0, listed.stderr
        assert mine in listed.stdout
        _no_marker(listed.stdout, foreign, f"memories {tenant}/{user}")
        shown = _cli(settings, tenant, "timeline", "--user", user, "--session", "s1", "--json")
        assert shown.returncode == 0 and mine in shown.stdout, shown.stderr
        _no_marker(shown.stdout, foreign, f"timeline {tenant}/{user}")
        queries = [
            alice_a[0].id,
            f"event:{world.event_ids[(A, 'alice')][0]}",
            "银行卡密码",
            "*",
            "' OR '1'='1",
        ]
        for query in queries:
            out = _cli(settings, tenant, "recall", "--user", user, "--json", "--include-history", query)
            assert out.returncode == 0, out.stderr
            _no_marker(_visible(json.loads(out.stdout)), foreign, f"recall {tenant}/{user} {query!r}")
            runs += 1
        hist = _cli(settings, tenant, "history", alice_a[0].id, "--user", user, "--json")
        assert hist.returncode == 2 and "no memory" in hist.stderr, hist.stdout
        _no_marker(hist.stdout + hist.stderr, every, "history of alice's memory")
        runs += 3
    # Look-alike user ids: refused (exit 2 naming --user) or an empty answer.
    for user in ["ALICE", "alice%", "*", "alice' OR '1'='1", "../alice", "alice\u200b", "alice "]:
        for args in (
            ["memories", "--user", user, "--all", "--json"],
            ["recall", "--user", user, "--json", "银行卡密码"],
        ):
            out = _cli(settings, A, *args)
            runs += 1
            if out.returncode == 2:
                assert "--user" in out.stderr, out.stderr
                continue
            assert out.returncode == 0, out.stderr
            _no_marker(out.stdout, every, f"{args[0]} --user {user!r}")
    print("ISOLATION cli runs", runs)


# --- HTTP API ----------------------------------------------------------------------------------


def test_api_users_and_recall_paths_never_cross_tenants_or_users(world: World) -> None:
    client, env = world.env.client, world.env
    every = [marker(t, u) for t, u in OWNERS]
    requests = 0
    users_b = client.get("/v1/users", params={"limit": 500}, headers=env.auth(B)).json()
    assert users_b == {"items": [{"user_id": "alice", "memories": 2, "active": 2}], "total": 1}
    for tenant, user in ((B, "alice"), (A, "bob")):
        foreign = world.foreign_markers(tenant, user)
        # The control: through the same paths and keys the owner finds their own data, so the
        # attacks below are not vacuous (an empty answer to everything would pass them).
        own_body = {"user_id": user, "query": "银行卡密码", "k": 50, "reinforce": False}
        for path in ("/v1/recall", "/v1/recall/prompt"):
            r = client.post(path, json=own_body, headers=env.auth(tenant))
            assert r.status_code == 200 and marker(tenant, user) in r.text, (path, tenant, user, r.text[:400])
        for query in _attacks(world, tenant, user):
            body = {"user_id": user, "query": query, "k": 50, "include_history": True, "reinforce": False}
            for session in (None, "s1"):
                body["session_id"] = session
                r = client.post("/v1/recall", json=body, headers=env.auth(tenant))
                assert r.status_code == 200, r.text
                _no_marker(_visible(r.json()), foreign, f"/v1/recall {tenant}/{user} {query!r}")
                r = client.post("/v1/recall/prompt", json=body, headers=env.auth(tenant))
                assert r.status_code == 200, r.text
                _no_marker(r.text, foreign, f"/v1/recall/prompt {tenant}/{user} {query!r}")
                requests += 2
        own = client.get(
            f"/v1/users/{user}/memories", params={"status": "all"}, headers=env.auth(tenant)
        ).json()
        assert {m["id"] for m in own["items"]} == {m.id for m in world.memories[(tenant, user)]}
        requests += 1
    for user in LOOK_ALIKES:
        bodies: list[tuple[str, dict[str, Any]]] = [
            ("/v1/recall", {"user_id": user, "query": "银行卡密码", "session_id": "s1"}),
            ("/v1/recall/prompt", {"user_id": user, "query": "door code Berlin"}),
        ]
        for path, body in bodies:
            r = client.post(path, headers=env.auth(A), json=body)
            requests += 1
            assert r.status_code in (200, 422), r.text
            _no_marker(r.text, every, f"{path} user {user!r}")
        r = client.get(
            f"/v1/users/{quote(user, safe='')}/memories", params={"status": "all"}, headers=env.auth(A)
        )
        requests += 1
        assert r.status_code in (200, 404, 422), r.text
        _no_marker(r.text, every, f"memories of {user!r}")
    print("ISOLATION api requests", requests)


# --- ids joined by ":" and ids prefixing each other, in Redis ------------------------------------

# Redis keys once read {<tenant>:<user>}: tenant ac with user me:bob and tenant ac:me with user bob
# shared every key (issue 29). Prefix pairs: u1/u10, tenants ac/ac:me.
# (owner, other): the other is deleted, so the owner holds the longer id where one prefixes the other.
REDIS_PAIRS = [
    (("ac", "me:bob"), ("ac:me", "bob")),
    (("ac", "u10"), ("ac", "u1")),
    (("ac:me", "u1"), ("ac", "u1")),
]


def test_colon_and_prefix_pairs_share_nothing_in_redis_through_the_api(it_settings: Settings) -> None:
    """The issue's requests: ``ac:me``/``bob`` tells a PIN (seq 1), ``ac``/``me:bob`` speaks in a
    session of the same name (seq 1, not 2) and recalls nothing of the PIN, with or without a
    session, before and after ``ac`` deletes ``me:bob``; then each prefix pair, the same."""
    settings = api_settings(it_settings).model_copy(update={"rate_limits": False})
    env = build_env(settings, tenants=("ac", "ac:me"))
    client = env.client

    def publish(tenant: str, user: str, content: str) -> int:
        body = {"user_id": user, "session_id": "s1", "role": "user", "content": content}
        r = client.post("/v1/events", json=body, headers=env.auth(tenant))
        assert r.status_code == 202, r.text
        return int(r.json()["seq"])

    def recalled(tenant: str, user: str, session: str | None) -> str:
        body = {"user_id": user, "query": "bank PIN", "k": 20, "reinforce": False, "session_id": session}
        r = client.post("/v1/recall", json=body, headers=env.auth(tenant))
        assert r.status_code == 200, r.text
        return json.dumps(_visible(r.json()), ensure_ascii=False)

    try:
        for owner, other in REDIS_PAIRS:
            secret = f"my bank PIN is {marker(*owner)}"
            assert publish(*owner, secret) == 1
            assert publish(*other, "what is my bank PIN") == 1, (owner, other)
            for session in (None, "s1"):
                assert marker(*owner) not in recalled(*other, session), (other, session)
                assert marker(*owner) in recalled(*owner, session)  # the control
            r = client.delete(f"/v1/users/{quote(other[1], safe='')}", headers=env.auth(other[0]))
            assert r.status_code == 200 and r.json()["verified"], r.text
            for session in (None, "s1"):
                assert marker(*owner) not in recalled(*other, session), (other, session)
                assert marker(*owner) in recalled(*owner, session), "the other's delete took the owner's"
            # The owner's counter and working memory survived the other's delete; the other's
            # conversation starts anew.
            assert publish(*owner, "and my card ends in 11") == 2
            assert publish(*other, "hello again") == 1
            # Reset both for the next pair (the delete's own oracle is tests/integration/test_delete_user.py).
            for tenant, user in (owner, other):
                r = client.delete(f"/v1/users/{quote(user, safe='')}", headers=env.auth(tenant))
                assert r.status_code == 200, r.text
    finally:
        env.client.app.state.close()  # type: ignore[attr-defined]
        env.container.close()


# --- MCP -----------------------------------------------------------------------------------------


def test_mcp_tools_bound_to_one_user_never_reach_another(world: World) -> None:
    # mcp is a dev dependency: missing, this attack fails to run rather than skipping unseen.
    from mcp.server.mcpserver.exceptions import ToolError

    from producers.agent_tools import MemoryTools
    from service.mcp.serve import library_forget
    from service.mcp.server import build_server
    from service.operations.library_backend import LibraryBackend

    c = world.env.container  # tenant A, as `cuemem mcp --tenant tenant-a --user bob`
    alice = world.memories[(A, "alice")]
    foreign = world.foreign_markers(A, "bob")
    calls = 0
    with Publisher.from_settings(c.settings) as pub:
        backend = LibraryBackend(c, pub, forget=library_forget(c, A), reinforce=False)
        server = build_server(MemoryTools.over(backend, "bob", "s1"))

        async def call(tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
            try:
                result = await server.call_tool(tool, arguments)
            except ToolError as exc:  # in-process, a tool error is raised (over stdio: isError)
                return True, str(exc)
            content = getattr(result, "content", None) or []
            return bool(getattr(result, "isError", False)), "".join(getattr(p, "text", "") for p in content)

        async def run() -> int:
            n = 0
            is_error, own = await call("search_memory", {"query": "银行卡密码", "k": 20})
            assert not is_error and marker(A, "bob") in own, own
            for query in _attacks(world, A, "bob"):
                is_error, text = await call("search_memory", {"query": query, "k": 20})
                _no_marker(text, foreign, f"mcp search_memory {query!r}")
                n += 1
            # Tool arguments cannot name a user or tenant: extra arguments are not a way in.
            # A tool error (``call`` turns it into is_error) or bob's own answer; anything else
            # the server raises is a crash and fails the test.
            for extra in ({"user_id": "alice"}, {"tenant_id": B}, {"user": "alice", "tenant": B}):
                is_error, text = await call("search_memory", {"query": "银行卡密码", **extra})
                assert is_error or marker(A, "bob") in text, (extra, text[:400])
                _no_marker(text, foreign, f"mcp search_memory with {extra}")
                n += 1
            for memory in alice:
                is_error, text = await call("forget", {"memory_id": memory.id})
                assert is_error, text
                _no_marker(text, foreign, "mcp forget")
                n += 1
            return n

        calls = anyio.run(run)
    with c.uow() as uow:
        still = {m.id: m.status.value for m in uow.memories.for_user(A, "alice", None)}
    assert still == {m.id: "active" for m in alice}, "bob's server forgot alice's memory"
    print("ISOLATION mcp calls", calls)
