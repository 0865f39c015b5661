"""How a row becomes a point: the payload and point of a memory, and of a conversation turn.

The pipeline, reconciliation and reindex all build points here, so that the three agree on
what a point holds (reconciliation compares stored payloads with these).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.events import TurnPublished
from shared.indexing.turn_windows import window_text
from shared.language.sparse import sparse_document
from shared.models import Memory, turn_point_id
from shared.ports import IndexPoint


def memory_payload(memory: Memory) -> dict[str, Any]:
    return {
        "status": memory.status.value,
        "type": memory.type.value,
        "importance": memory.importance,
        "score": memory.score,
        "created_at": memory.created_at.isoformat(),
        "version": memory.version,
    }


def memory_point(memory: Memory) -> IndexPoint:
    """A memory's point in the memory index."""
    return IndexPoint(
        memory.id,
        memory.tenant_id,
        memory.user_id,
        memory.embedding or [],
        memory_payload(memory),
        sparse=sparse_document(memory.content),
    )


def turn_payload(event: TurnPublished) -> dict[str, Any]:
    return {
        "status": "active",
        "event_id": event.event_id,
        "session_id": event.session_id,
        "seq": event.seq,
        "role": event.role.value,
        "at": event.at.isoformat(),
    }


def turn_point(event: TurnPublished, vector: list[float], context: Sequence[str] = ()) -> IndexPoint:
    """A turn's point in the conversation-log index: the vector and the keyword terms of its
    context window (the texts of the turns before it that the window holds, then its own)."""
    return IndexPoint(
        turn_point_id(event.tenant_id, event.user_id, event.event_id),
        event.tenant_id,
        event.user_id,
        vector,
        turn_payload(event),
        sparse=sparse_document(window_text(event.content, context)),
    )
