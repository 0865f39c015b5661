"""What the API answers, typed as the client hands it back (JSON objects as TypedDicts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict


class FieldProblem(TypedDict):
    field: str
    problem: str


class Source(TypedDict):
    event_id: str
    session_id: str
    seq: int
    at: str


class RecallItem(TypedDict):
    """One recalled item, as ``cuemem recall --json`` prints it."""

    id: str
    content: str
    type: str
    status: str
    score: float
    importance: float
    created_at: str
    sources: list[Source]
    explanation: dict[str, Any]


class RecallResult(TypedDict):
    stage: str  # "deterministic" | "vector" | "none"
    items: list[RecallItem]
    trace: dict[str, Any]
    prompt: str  # the items as a prompt block, dated in the user's zone
    # The user's zone (seconds east of UTC; None: no turn of role user), the prompt block's, to
    # date the items in (shared.recall.prompt.prompt_block(items, offset_s=...)).
    user_offset_s: NotRequired[int | None]


class MemoryRecord(TypedDict):
    """A stored memory, as ``cuemem memories --json`` prints it (the API may add keys)."""

    id: str
    content: str
    type: str
    status: str
    importance: float
    access_count: int
    score: float
    tags: list[str]
    entities: list[str]
    sources: list[Source]
    created_at: str
    updated_at: str
    last_accessed_at: NotRequired[str]
    embedding_model: NotRequired[str | None]


class MemoryPage(TypedDict):
    items: list[MemoryRecord]
    total: int
    user_offset_s: NotRequired[int | None]  # the user's zone (seconds east of UTC), to show times in


class Deleted(TypedDict):
    deleted: list[str]
    hard: bool


class MemoryHistory(TypedDict):
    """A memory's chain, as ``cuemem history --json`` prints it."""

    memories: list[dict[str, Any]]
    history: list[dict[str, Any]]


@dataclass(frozen=True)
class Readiness:
    """``GET /v1/ready``: 503 is an answer here (not ready), not an error to retry."""

    ready: bool
    status_code: int
    detail: dict[str, Any] = field(default_factory=dict)
