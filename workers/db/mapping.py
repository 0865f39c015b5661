"""Row <-> domain conversions."""

from __future__ import annotations

from shared.events import Role, TurnPublished
from shared.models import Memory, MemoryStatus, MemoryType
from shared.storage import StoredEvent
from workers.db.tables import EventRow, MemoryRow


def event_from_row(row: EventRow) -> StoredEvent:
    return StoredEvent(
        event=TurnPublished(
            event_id=row.event_id,
            tenant_id=row.tenant_id,
            user_id=row.user_id,
            session_id=row.session_id,
            seq=row.seq,
            role=Role(row.role),
            content=row.content,
            at=row.at,
            metadata=dict(row.metadata_ or {}),
        ),
        stage=row.stage,
        importance=row.importance,
    )


def memory_from_row(row: MemoryRow, with_embedding: bool = True) -> Memory:
    """``with_embedding=False`` for rows read with the vector column deferred (recall reads):
    decoding 384 floats per row was most of a recall's Postgres time."""
    return Memory(
        id=row.id,
        tenant_id=row.tenant_id,
        user_id=row.user_id,
        type=MemoryType(row.type),
        content=row.content,
        importance=row.importance,
        status=MemoryStatus(row.status),
        created_at=row.created_at,
        updated_at=row.updated_at,
        last_accessed_at=row.last_accessed_at,
        access_count=row.access_count,
        score=row.score,
        tags=list(row.tags or []),
        entities=list(row.entities or []),
        cues=list(row.cues or []),
        sources=list(row.sources or []),
        content_hash=row.content_hash,
        embedding=list(row.embedding) if with_embedding and row.embedding is not None else None,
        embedding_model=row.embedding_model,
        version=row.version,
        indexed_version=row.indexed_version,
        valid_from=row.valid_from,
        valid_to=row.valid_to,
        superseded_by=row.superseded_by,
        slot=row.slot,
        status_reason=row.status_reason,
        due_at=row.due_at,
    )


def memory_values(memory: Memory) -> dict[str, object]:
    return {
        "id": memory.id,
        "tenant_id": memory.tenant_id,
        "user_id": memory.user_id,
        "type": memory.type.value,
        "content": memory.content,
        "content_hash": memory.content_hash,
        "importance": memory.importance,
        "status": memory.status.value,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
        "last_accessed_at": memory.last_accessed_at,
        "access_count": memory.access_count,
        "score": memory.score,
        "tags": list(memory.tags),
        "entities": list(memory.entities),
        "cues": list(memory.cues),
        "sources": list(memory.sources),
        "origin_event_id": memory.sources[0]["event_id"] if memory.sources else "",
        "embedding": memory.embedding,
        "embedding_model": memory.embedding_model,
        "version": memory.version,
        "indexed_version": memory.indexed_version,
        "valid_from": memory.valid_from or memory.created_at,
        "valid_to": memory.valid_to,
        "superseded_by": memory.superseded_by,
        "slot": memory.slot,
        "status_reason": memory.status_reason,
        "due_at": memory.due_at,
    }
