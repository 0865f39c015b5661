"""Request and response bodies: what the OpenAPI spec shows. Types are checked here; values
(ids, roles, content, times) by the same functions the producer and the CLI use, so the same bad
input gets the same reason everywhere."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.events import SAFE_ID_TEXT, Role
from shared.models import MemoryStatus, MemoryType

_ROLES: list[Any] = [r.value for r in Role]
_TYPES: list[Any] = [t.value for t in MemoryType]
_STATUSES: list[Any] = [s.value for s in MemoryStatus]
MAX_BATCH = 1000


class Strict(BaseModel):
    """A request body: no unknown field, and no coercion: ``"5"`` is not a number, ``"yes"`` or
    ``1`` not a boolean, ``5`` not a string (422 naming the field), as the event routes always were."""

    model_config = ConfigDict(extra="forbid", strict=True)


class EventIn(Strict):
    user_id: str = Field(description=f"whose turn: {SAFE_ID_TEXT}")
    session_id: str = Field(description="the conversation")
    role: str = Field(json_schema_extra={"enum": _ROLES})
    content: str
    at: str | None = Field(None, description="ISO 8601 with a timezone; default: now")
    # Strict, as the batch is (shared.events.validate_turn): "5", true or 5.0 is not a seq.
    seq: int | None = Field(None, description="explicit position in the conversation (replaying a log)")
    event_id: str | None = Field(
        None, description="your id for the turn: publishing it again changes nothing"
    )
    metadata: dict[str, Any] | None = None


class PublishedOut(BaseModel):
    event_id: str
    seq: int
    session_id: str
    user_id: str


class BatchIn(Strict):
    events: list[Any] = Field(max_length=MAX_BATCH, description="turns, each as the body of POST /v1/events")


class FieldProblem(BaseModel):
    field: str
    problem: str


class BatchError(BaseModel):
    index: int
    fields: list[FieldProblem]


class BatchOut(BaseModel):
    published: list[PublishedOut]
    errors: list[BatchError]


class RecallIn(Strict):
    user_id: str
    query: str
    k: int = 5
    now: str | None = Field(None, description="ISO 8601 time to recall at; default: now")
    session_id: str | None = None
    budget_tokens: int | None = None
    include_archived: bool = False
    include_history: bool = False
    reinforce: bool = Field(
        False,
        description="count the returned memories as used (access count + 1, score up; applied "
        "asynchronously, answered with trace.recall_id): send it when the answer is put to use. "
        "Without it a recall changes nothing",
    )


class RecallOut(BaseModel):
    """A recall, as `cuemem recall --json` shows it."""

    model_config = ConfigDict(extra="allow")

    stage: str
    items: list[dict[str, Any]] = Field(description="the recalled items, best first; times are UTC instants")
    trace: dict[str, Any]
    prompt: str = Field(description="the items as a prompt block, dated in the user's zone")
    user_offset_s: int | None = Field(
        description="the user's zone, the one the prompt block's dates are in (a client building its "
        "own block from the items dates them in it): the UTC offset, in seconds, of their latest "
        "turn of role user; null when they have none"
    )


class MemoryOut(BaseModel):
    """A memory as `cuemem memories --json` shows it."""

    model_config = ConfigDict(extra="allow")

    id: str
    tenant_id: str
    user_id: str
    content: str
    type: str = Field(json_schema_extra={"enum": _TYPES})
    status: str = Field(json_schema_extra={"enum": _STATUSES})
    importance: float
    access_count: int
    score: float
    tags: list[str]
    entities: list[str]
    sources: list[dict[str, Any]]
    created_at: str
    updated_at: str
    last_accessed_at: str
    valid_from: str | None
    valid_to: str | None
    superseded_by: str | None
    slot: str | None
    status_reason: str | None
    due_at: str | None
    happened_from: str | None = Field(None, description="event time: when what it tells happened, from")
    happened_to: str | None = Field(None, description="event time, until (exclusive)")
    embedding_model: str | None


class MemoryPage(BaseModel):
    items: list[MemoryOut]
    total: int
    user_offset_s: int | None = Field(
        description="the user's zone, to show the items' UTC times in: the UTC offset, in seconds, "
        "of their latest turn of role user; null when they have none"
    )


class UserOut(BaseModel):
    user_id: str
    memories: int = Field(description="the user's memories of any status")
    active: int = Field(description="the user's active memories")


class UserPage(BaseModel):
    items: list[UserOut]
    total: int


class EditIn(Strict):
    content: str | None = None
    type: str | None = Field(None, json_schema_extra={"enum": _TYPES})
    tags: list[str] | None = None


class InvalidateIn(Strict):
    reason: str


class DeletedOut(BaseModel):
    deleted: list[str]
    hard: bool


class HealthOut(BaseModel):
    status: str
