"""Redis key names shared by the producer (writer) and recall (reader).

The ``{tenant:user}`` hash tag keeps one user's keys in one Redis Cluster slot, so the
producer's Lua script (seq + working memory in one atomic step) stays legal on a cluster.
"""

from __future__ import annotations

PREFIX = "cuemem"


def _tag(tenant_id: str, user_id: str) -> str:
    return f"{{{tenant_id}:{user_id}}}"


def tag_is_ambiguous(tenant_id: str, user_id: str) -> bool:
    """Ids may hold ``:``, so ``{a:b:c}`` is both tenant ``a`` user ``b:c`` and tenant ``a:b`` user
    ``c``: such a user's keys cannot be told from the other's (deleting a user leaves them)."""
    return ":" in tenant_id or ":" in user_id


def seq_key(tenant_id: str, user_id: str, session_id: str) -> str:
    return f"{PREFIX}:seq:{_tag(tenant_id, user_id)}:{session_id}"


def working_memory_key(tenant_id: str, user_id: str, session_id: str) -> str:
    return f"{PREFIX}:wm:{_tag(tenant_id, user_id)}:{session_id}"


def user_sessions_key(tenant_id: str, user_id: str) -> str:
    return f"{PREFIX}:sessions:{_tag(tenant_id, user_id)}"


def deliveries_key(task_id: str, attempt: int) -> str:
    return f"{PREFIX}:deliveries:{task_id}:{attempt}"


def redrives_key(event_id: str, stage: str) -> str:
    """How often the stalled sweep re-drove this event at this stage (a new stage counts anew)."""
    return f"{PREFIX}:redrives:{stage}:{event_id}"


# The publish ledger: turns sent to the broker whose `memory.record` has not committed yet.
# A zset (event id -> publish time, ms) and a hash (event id -> the record message as JSON).
UNRECORDED = f"{PREFIX}:unrecorded"
UNRECORDED_MESSAGES = f"{PREFIX}:unrecorded:messages"


def ledger_member(tenant_id: str, event_id: str) -> str:
    """A turn's key in the publish ledger: producers choose event ids, so two tenants may pick the
    same one; neither may overwrite or settle the other's entry."""
    return f"{tenant_id}\x1f{event_id}"
