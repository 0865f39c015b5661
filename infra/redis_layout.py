"""cuemem's Redis layout, in one place: every key name, and the publish ledger's and the
conversations' entries (seq counter, working memory, session list) with the Lua scripts that write
them. The producer writes them (``producers/publisher.py``); the workers, recall and the API read,
settle and erase them (``workers/redis/``). Both sides go through this module, so a writer and a
reader cannot disagree on a key, a member or a script's arguments.

A user's keys carry the hash tag ``{<tenant>:<user>}`` with each id percent-encoded (``part``):
an encoded id holds no ``:``, ``{``, ``}`` or ``%`` of its own, so the tag names exactly one
(tenant, user) and every key names exactly one (tenant, user, session): no two triples share a
key, whatever the ids hold (tenant ``ac`` with user ``me:bob`` is ``{ac:me%3Abob}``, tenant
``ac:me`` with user ``bob`` is ``{ac%3Ame:bob}``). The tag is the same for every key of one user,
so they stay in one Redis Cluster slot and the producer's Lua script (seq + working memory in one
atomic step) stays legal on a cluster. Ids made of letters, digits and ``. _ - @ ~`` are left as
they are, so most keys read as before; keys written before this encoding (raw ids) are renamed at
upgrade by ``workers/redis/key_migration.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import redis

from shared.events import MAX_SEQ, Role, TurnPublished

PREFIX = "cuemem"

# The families of per-user keys: a conversation's seq counter and working memory (a session id
# follows the tag) and the user's session list (nothing follows the tag).
SEQ, WORKING_MEMORY, SESSIONS = "seq", "wm", "sessions"
CONVERSATION_FAMILIES = (SEQ, WORKING_MEMORY)
USER_FAMILIES = (*CONVERSATION_FAMILIES, SESSIONS)


def part(value: str, keep: str = "@") -> str:
    """One id as it appears in a key: percent-encoded as UTF-8, RFC 3986's unreserved characters
    and ``keep`` left as they are (a lone surrogate is encoded too, never refused). Injective, and
    the result holds no ``:``, ``{``, ``}``, ``\\x1f`` or glob character (``* ? [ ] \\``), so it
    can be joined with ``:`` and scanned for with ``SCAN MATCH`` as it is."""
    return quote(value, safe=keep, errors="surrogatepass")


def user_tag(tenant_id: str, user_id: str) -> str:
    """The user's hash tag: the one cluster slot of all its keys."""
    return f"{{{part(tenant_id)}:{part(user_id)}}}"


def family_key(family: str, tenant_id: str, user_id: str, session_id: str | None) -> str:
    """The key of one family for a user (``session_id`` None for ``SESSIONS``)."""
    base = f"{PREFIX}:{family}:{user_tag(tenant_id, user_id)}"
    return base if session_id is None else f"{base}:{part(session_id)}"


def user_pattern(family: str, tenant_id: str, user_id: str) -> str:
    """``SCAN MATCH`` pattern of every key of one family of one user, and of no one else's: the
    encoded ids hold no glob character, and the tag's ``}`` ends the user id."""
    tail = ":*" if family in CONVERSATION_FAMILIES else ""
    return f"{PREFIX}:{family}:{user_tag(tenant_id, user_id)}{tail}"


def tenant_pattern(family: str, tenant_id: str) -> str:
    """``SCAN MATCH`` pattern of every key of one family of one tenant's users, and of no other
    tenant's: the encoded tenant id holds no ``:``, so the tag's first ``:`` ends it."""
    return f"{PREFIX}:{family}:{{{part(tenant_id)}:*"


def seq_key(tenant_id: str, user_id: str, session_id: str) -> str:
    return family_key(SEQ, tenant_id, user_id, session_id)


def working_memory_key(tenant_id: str, user_id: str, session_id: str) -> str:
    return family_key(WORKING_MEMORY, tenant_id, user_id, session_id)


def user_sessions_key(tenant_id: str, user_id: str) -> str:
    return family_key(SESSIONS, tenant_id, user_id, None)


def deliveries_key(task_id: str, attempt: int) -> str:
    """How often this attempt of this task started. Task ids are the broker's (one namespace for
    the deployment); the attempt, an int, holds no ``:``, so the last ``:`` ends the task id."""
    return f"{PREFIX}:deliveries:{task_id}:{int(attempt)}"


def redrives_key(event_ref: str, stage: str) -> str:
    """How often the stalled sweep re-drove this event at this stage (a new stage counts anew).
    ``event_ref`` is the pipeline's key of the turn (``shared.events.event_ref``: tenant and event
    id, as event ids are unique per tenant only); the encoded stage holds no ``:``, so the key
    splits back into one (stage, event) pair. The pipeline's stage names read as they are."""
    return f"{PREFIX}:redrives:{part(stage)}:{event_ref}"


# The publish ledger: turns sent to the broker whose `memory.record` has not committed yet.
# A zset (event id -> publish time, ms) and a hash (event id -> the record message as JSON).
UNRECORDED = f"{PREFIX}:unrecorded"
UNRECORDED_MESSAGES = f"{PREFIX}:unrecorded:messages"


def ledger_member(tenant_id: str, event_id: str) -> str:
    """A turn's key in the publish ledger: producers choose event ids, so two tenants may pick the
    same one; neither may overwrite or settle the other's entry. The tenant is encoded (``:``
    kept, so every valid tenant id reads as it is) and holds no ``\\x1f``: the first ``\\x1f``
    ends it, and no two (tenant, event id) pairs share a member."""
    return f"{part(tenant_id, keep='@:')}\x1f{event_id}"


def add_to_ledger(client: redis.Redis, entries: Mapping[str, Mapping[str, Any]], now_ms: int) -> None:
    """Note turns in the ledger before their message is sent: ``entries`` maps each turn's
    ``ledger_member`` to its record message. One transaction, so the zset and the hash agree."""
    pipe = client.pipeline(transaction=True)
    pipe.zadd(UNRECORDED, dict.fromkeys(entries, now_ms))
    pipe.hset(
        UNRECORDED_MESSAGES,
        mapping={m: json.dumps(message, ensure_ascii=False) for m, message in entries.items()},
    )
    pipe.execute()


def drop_from_ledger(client: redis.Redis, members: Sequence[str]) -> None:
    """Take turns out of the ledger (recorded, failed to send, or their user deleted)."""
    if not members:
        return
    pipe = client.pipeline(transaction=True)
    pipe.zrem(UNRECORDED, *members)
    pipe.hdel(UNRECORDED_MESSAGES, *members)
    pipe.execute()


# Claim the overdue entries atomically, so two sweeps (or a sweep and a settle) never both
# re-send one turn: read the overdue ids, move their time to now, return their messages.
# KEYS: UNRECORDED, UNRECORDED_MESSAGES. ARGV: published before (ms), limit, now (ms).
CLAIM_OVERDUE_SCRIPT = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(ids) do
  local msg = redis.call('HGET', KEYS[2], id)
  if msg then
    redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), id)
    table.insert(out, msg)
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
"""
CLAIM_OVERDUE_KEYS = (UNRECORDED, UNRECORDED_MESSAGES)


# --- a conversation: seq counter, working memory, the user's session list -----------------------

# Publish: the turn's seq (INCR, or "at least this" for an explicit seq replaying a log) and its
# place in the working memory, in one atomic step (read-your-writes before any worker ran).
# KEYS: seq key, working-memory zset, user's sessions zset
# ARGV: explicit seq or "", wm member, wm size, ttl seconds, session score (ms), session id, MAX_SEQ
ASSIGN_SEQ_SCRIPT = """
local seq
if ARGV[1] ~= '' then
  seq = tonumber(ARGV[1])
  local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
  if seq > cur then redis.call('SET', KEYS[1], seq) end
else
  -- Past 2^53 - 1 (ARGV[7]) Lua's doubles would hand out one seq twice: refuse, writing nothing.
  if tonumber(redis.call('GET', KEYS[1]) or '0') >= tonumber(ARGV[7]) then return -1 end
  seq = redis.call('INCR', KEYS[1])
end
redis.call('ZADD', KEYS[2], seq, ARGV[2])
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[3]) + 1))
redis.call('EXPIRE', KEYS[2], tonumber(ARGV[4]))
redis.call('ZADD', KEYS[3], tonumber(ARGV[5]), ARGV[6])
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[4]))
return seq
"""
SEQS_USED_UP = -1  # what ASSIGN_SEQ_SCRIPT answers when the counter reached MAX_SEQ


def assign_seq_call(
    event: TurnPublished, explicit_seq: int | None, turns_kept: int, ttl_s: int
) -> tuple[list[str], list[str | int]]:
    """The KEYS and ARGV of ``ASSIGN_SEQ_SCRIPT`` for one turn (``explicit_seq`` None: the
    counter chooses), keeping the conversation's last ``turns_kept`` turns for ``ttl_s``."""
    tenant, user, session = event.conversation
    keys = [
        seq_key(tenant, user, session),
        working_memory_key(tenant, user, session),
        user_sessions_key(tenant, user),
    ]
    args: list[str | int] = [
        "" if explicit_seq is None else str(int(explicit_seq)),
        working_memory_member(event),
        turns_kept,
        ttl_s,
        int(event.at.timestamp() * 1000),
        session,
        MAX_SEQ,
    ]
    return keys, args


# The recorder's renumbering (``workers/redis/seq_counter.py``): the next seq past both the
# counter and the conversation's highest recorded seq, which the counter then holds.
# KEYS: the seq key. ARGV: the floor (the conversation's highest recorded seq).
NEXT_SEQ_AFTER_SCRIPT = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if floor > cur then cur = floor end
local seq = cur + 1
redis.call('SET', KEYS[1], seq)
return seq
"""


def working_memory_member(event: TurnPublished) -> str:
    """A turn as an entry of its conversation's working memory. The seq is the zset score, so it
    is not repeated in the member."""
    return json.dumps(
        {
            "event_id": event.event_id,
            "role": event.role.value,
            "content": event.content,
            "at": event.at.isoformat(),
        },
        ensure_ascii=False,
        sort_keys=True,
    )


def working_memory_turn(
    member: bytes | str, score: float, tenant_id: str, user_id: str, session_id: str
) -> TurnPublished:
    """A working-memory entry read back as its turn; raises ValueError, KeyError or TypeError on
    a malformed one."""
    data = json.loads(member)
    return TurnPublished(
        event_id=data["event_id"],
        tenant_id=tenant_id,
        user_id=user_id,
        session_id=session_id,
        seq=int(score),
        role=Role(data["role"]),
        content=data["content"],
        at=datetime.fromisoformat(data["at"]),
        metadata={},
    )


def working_memory_event_id(member: bytes | str) -> Any:
    """The event id of a working-memory entry, as stored; raises ValueError, KeyError or TypeError
    on a malformed one."""
    return json.loads(member)["event_id"]
