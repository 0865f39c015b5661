"""Per-user Redis keys on a real Redis: the upgrade of keys written before the injective encoding
(workers/redis/key_migration.py), and a user's delete (workers/redis/user_keys.py) beside users and
tenants whose ids are prefixes of its own (``u1``/``u10``, ``ac``/``ac:me``) or read the same once
joined by ``:`` (``ac`` + ``me:bob``, ``ac:me`` + ``bob``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from infra import redis_layout as layout
from shared.settings import Settings
from tests.support.services import run_cuemem
from workers.redis.key_migration import upgrade_keys
from workers.redis.seq_counter import RedisSeqCounter
from workers.redis.user_keys import RedisUserKeys
from workers.redis.working_memory import RedisWorkingMemory

AT = "2026-11-01T09:00:00+00:00"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _turn(event_id: str, content: str) -> str:
    return json.dumps({"event_id": event_id, "role": "user", "content": content, "at": AT}, sort_keys=True)


def _contents(client: redis.Redis, tenant: str, user: str, session: str | None) -> list[str]:
    return [t.content for t in RedisWorkingMemory(client).recent(tenant, user, session, 20)]


def _all_keys(client: redis.Redis) -> set[str]:
    return {k.decode() for k in client.scan_iter(match=f"{layout.PREFIX}:*")}


# --- the upgrade -------------------------------------------------------------------------------


def test_old_keys_are_moved_and_ambiguous_ones_given_to_no_one(client: redis.Redis) -> None:
    # Written by the old encoding ({tenant:user} raw, the session raw):
    # acme/u1 in session "s:1": a counter at 7, a working memory with a TTL, its session list;
    # a counter already under the new name at 3 (a new producer ran before the upgrade): merged.
    client.set("cuemem:seq:{acme:u1}:s:1", 7)
    client.zadd("cuemem:wm:{acme:u1}:s:1", {_turn("e7", "I moved to Lisbon"): 7})
    client.expire("cuemem:wm:{acme:u1}:s:1", 3600)
    client.zadd("cuemem:sessions:{acme:u1}", {"s:1": 1000})
    client.set("cuemem:seq:{acme:u1}:s%3A1", 3)
    client.set("cuemem:seq:{acme:u1}:t:2", 4)  # no new key yet: renamed
    client.zadd("cuemem:wm:{acme:u1}:s%3A1", {_turn("e8", "new turn"): 8})
    client.expire("cuemem:wm:{acme:u1}:s%3A1", 60)
    # acme/u10 in session s1: old and new names are one: nothing to do.
    client.set("cuemem:seq:{acme:u10}:s1", 5)
    # ac + me:bob or ac:me + bob: could be either user's; the PIN must reach neither.
    client.set("cuemem:seq:{ac:me:bob}:s1", 2)
    client.zadd("cuemem:wm:{ac:me:bob}:s1", {_turn("p1", "my bank PIN is 4321"): 1})
    client.zadd("cuemem:sessions:{ac:me:bob}", {"s1": 1000})

    report = upgrade_keys(client)

    assert report.to_public() == {"renamed": 1, "merged": 2, "ambiguous": 3, "left": 0}
    assert _all_keys(client) == {
        "cuemem:seq:{acme:u1}:s%3A1",
        "cuemem:seq:{acme:u1}:t%3A2",
        "cuemem:wm:{acme:u1}:s%3A1",
        "cuemem:sessions:{acme:u1}",
        "cuemem:seq:{acme:u10}:s1",
        "cuemem:seq:{ac:me:bob}:s1",
        "cuemem:wm:{ac:me:bob}:s1",
        "cuemem:sessions:{ac:me:bob}",
    }
    # The counter continues where it was (the larger of the two), the turns stay readable and
    # keep their time to live.
    seqs = RedisSeqCounter(client)
    assert seqs.next_after("acme", "u1", "s:1", 0) == 8
    assert seqs.next_after("acme", "u1", "t:2", 0) == 5
    assert seqs.next_after("acme", "u10", "s1", 0) == 6
    assert sorted(_contents(client, "acme", "u1", None)) == ["I moved to Lisbon", "new turn"]
    assert 60 < client.ttl(layout.working_memory_key("acme", "u1", "s:1")) <= 3600
    # Neither candidate owner of the ambiguous keys sees them; their counters start anew.
    for tenant, user in (("ac", "me:bob"), ("ac:me", "bob")):
        assert _contents(client, tenant, user, None) == []
        assert _contents(client, tenant, user, "s1") == []
        assert seqs.next_after(tenant, user, "s1", 0) == 1

    # Idempotent: a second run (another starter) moves nothing and loses nothing.
    before = {k: client.dump(k) for k in _all_keys(client)}
    again = upgrade_keys(client)
    assert again.to_public() == {"renamed": 0, "merged": 0, "ambiguous": 3, "left": 0}
    assert {k: client.dump(k) for k in _all_keys(client)} == before


# --- a user's delete ---------------------------------------------------------------------------

# (tenant, user) -> the sessions each holds keys in. The victim is acme/u1.
USERS = {
    ("acme", "u1"): ["s1", "s10"],
    ("acme", "u10"): ["s1"],
    ("acme", "u1x"): ["s1"],
    ("acme:u1", "x"): ["s1"],
    ("globex", "u1"): ["s1"],
    ("ac", "me:bob"): ["s1"],
    ("ac:me", "bob"): ["s1"],
}


def _seed(client: redis.Redis) -> None:
    for (tenant, user), sessions in USERS.items():
        for session in sessions:
            client.set(layout.seq_key(tenant, user, session), 3)
            client.zadd(layout.working_memory_key(tenant, user, session), {_turn(f"{user}-e", "hi"): 3})
            client.zadd(layout.user_sessions_key(tenant, user), {session: 1000})
    for tenant, user, event in (("acme", "u1", "e1"), ("acme", "u10", "e2"), ("globex", "u1", "e1")):
        member = layout.ledger_member(tenant, event)
        client.zadd(layout.UNRECORDED, {member: 1})
        client.hset(layout.UNRECORDED_MESSAGES, member, json.dumps({"tenant_id": tenant, "user_id": user}))


def _owned(tenant: str, user: str) -> set[str]:
    sessions = USERS[(tenant, user)]
    return {layout.user_sessions_key(tenant, user)} | {
        build(tenant, user, s) for s in sessions for build in (layout.seq_key, layout.working_memory_key)
    }


def test_deleting_u1_leaves_u10_and_every_look_alike_and_reports_only_its_tenant(
    client: redis.Redis,
) -> None:
    _seed(client)
    data = RedisUserKeys(client)
    before = _all_keys(client)

    # Counts: the victim's keys, and the other users' of its own tenant only (acme's u10 and
    # u1x; not acme:u1's x, not globex's u1, not ac's).
    assert data.count("acme", "u1") == {
        "seq_counters": (2, 2),
        "working_memory": (2, 2),
        "sessions": (1, 2),
        "ledger": (1, 1),
    }
    assert data.erase("acme", "u1") == {"ledger": 1, "seq_counters": 2, "working_memory": 2, "sessions": 1}
    assert _all_keys(client) == before - _owned("acme", "u1")
    assert set(client.hkeys(layout.UNRECORDED_MESSAGES)) == {
        layout.ledger_member("acme", "e2").encode(),
        layout.ledger_member("globex", "e1").encode(),
    }
    seqs = RedisSeqCounter(client)
    assert seqs.next_after("acme", "u10", "s1", 0) == 4  # u10's counter is where it was
    assert _contents(client, "acme", "u10", None) == ["hi"]

    # The colon pair: deleting ac/me:bob takes nothing of ac:me/bob.
    ac_before = _all_keys(client)
    assert data.erase("ac", "me:bob")["seq_counters"] == 1
    assert _all_keys(client) == ac_before - _owned("ac", "me:bob")
    assert seqs.next_after("ac:me", "bob", "s1", 0) == 4


def test_a_delete_takes_the_old_shared_keys_that_may_hold_the_users_turns(client: redis.Redis) -> None:
    """A key of the old form that two users may share (left by the upgrade) goes with either
    user's delete: it may hold the deleted user's words."""
    client.zadd("cuemem:wm:{ac:me:bob}:s1", {_turn("p1", "my bank PIN is 4321"): 1})
    client.set("cuemem:seq:{ac:me:bob}:s1", 1)
    client.set(layout.seq_key("ac:me", "bob", "s1"), 4)  # bob's own counter, new form: stays
    client.set("cuemem:seq:{ac:me:bobby}:s1", 1)  # an old key of ac/me:bobby: stays
    deleted = RedisUserKeys(client).erase("ac", "me:bob")
    assert deleted["working_memory"] == 1 and deleted["seq_counters"] == 1
    assert _all_keys(client) == {layout.seq_key("ac:me", "bob", "s1"), "cuemem:seq:{ac:me:bobby}:s1"}


def test_cuemem_migrate_moves_old_keys(it_settings: Settings, client: redis.Redis) -> None:
    """The upgrade runs where the schema's does: `cuemem migrate` (the compose and Kubernetes
    migrate step; every embedded start runs the same `upgrade_redis`)."""
    client.set("cuemem:seq:{acme:u1}:s:1", 7)
    client.set("cuemem:seq:{ac:me:bob}:s1", 2)
    done = run_cuemem(it_settings, "migrate")
    assert done.returncode == 0, done.stderr
    assert _all_keys(client) == {layout.seq_key("acme", "u1", "s:1"), "cuemem:seq:{ac:me:bob}:s1"}
    assert client.get(layout.seq_key("acme", "u1", "s:1")) == b"7"
    assert "name two possible users" in done.stderr


def test_a_report_counts_no_old_key_that_may_be_another_tenants(client: redis.Redis) -> None:
    """An old-form key `{ac:me:bob}` matches tenant `ac`'s pattern but may be tenant `ac:me`'s:
    tenant `ac`'s report leaves it out of everyone else's counts (it still goes with either
    candidate user's delete, above)."""
    client.set("cuemem:seq:{ac:me:bob}:s1", 1)
    client.zadd("cuemem:sessions:{ac:me:bob}", {"s1": 1000})
    client.set(layout.seq_key("ac", "u10", "s1"), 2)  # another user of tenant ac: counted
    counts = RedisUserKeys(client).count("ac", "u1")
    assert counts["seq_counters"] == (0, 1) and counts["sessions"] == (0, 0)
