"""Redis key names shared by the producer (writer) and recall (reader).

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

from urllib.parse import quote

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
