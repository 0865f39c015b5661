"""Memory rows for the SQL tests: one numbered memory of a user, with the fields a query reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shared.models import Memory, MemoryStatus, MemoryType


def memory_row(
    i: int,
    tenant: str,
    user: str,
    at: datetime,
    *,
    cues: Sequence[str] = (),
    cited: Sequence[str] | None = None,
    status: MemoryStatus = MemoryStatus.ACTIVE,
) -> Memory:
    """Memory number ``i`` (its id, content and hash follow from ``i``), told at ``at``, holding
    ``cues`` and citing the events ``cited`` (default: its own event ``e<i>``)."""
    events = [f"e{i}"] if cited is None else list(cited)
    return Memory(
        id=f"00000000-0000-4000-8000-{i:012d}",
        tenant_id=tenant,
        user_id=user,
        type=MemoryType.FACT,
        content=f"memory {i}",
        importance=3.0,
        status=status,
        created_at=at,
        updated_at=at,
        last_accessed_at=at,
        cues=list(cues),
        sources=[
            {"event_id": e, "session_id": "s", "seq": n, "at": at.isoformat()}
            for n, e in enumerate(events, start=1)
        ],
        content_hash=f"{i:064x}",
    )
