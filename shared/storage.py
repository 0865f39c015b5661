"""The storage port: repositories grouped in one unit of work.

The caller owns the transaction: repositories never commit; the task adapter commits the unit of
work once the service function returns, and only then enqueues follow-up work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple, Protocol

from shared.api_keys import ApiKeyRepository
from shared.erasure import RowData
from shared.events import TurnPublished
from shared.insight import InsightRepository, TraceContextRepository
from shared.language.timeexpr import Span
from shared.lifecycle_repository import LifecycleRepository
from shared.models import Memory, MemoryStatus, MemoryType
from shared.transfer import TransferRepository

Outcome = Literal["accepted", "duplicate", "rejected"]


class TurnRow(NamedTuple):
    """A turn as the turn index sees it: its window's vector and model (None: never embedded) and
    the texts of the window's context turns, oldest first (``shared/indexing/turn_windows.py``)."""

    event: TurnPublished
    vector: list[float] | None
    model: str | None
    context: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoredEvent:
    event: TurnPublished
    stage: str
    importance: float | None = None
    happened: Span | None = None  # when what it tells happened (its time expressions), if it names one
    window: tuple[str, ...] = ()  # its context window's turns (ids, oldest first)


@dataclass(frozen=True)
class Receipt:
    event_id: str
    tenant_id: str
    user_id: str
    outcome: Outcome
    canonical_event_id: str | None = None
    reason: str | None = None
    payload: dict[str, Any] | None = None


@dataclass(frozen=True)
class DeadLetter:
    task_name: str
    task_id: str | None
    event_id: str | None
    args: list[Any]
    reason: str
    deliveries: int


class EventRepository(Protocol):
    def insert_if_absent(self, event: TurnPublished, stage: str) -> bool:
        """Insert unless the event id or the (conversation, seq) slot is taken; True if inserted."""

    def get(self, ref: str) -> StoredEvent | None:
        """The event a pipeline key names (``shared.events.event_ref``: tenant and event id)."""

    def at_seq(self, tenant_id: str, user_id: str, session_id: str, seq: int) -> StoredEvent | None: ...

    def max_seq(self, tenant_id: str, user_id: str, session_id: str) -> int:
        """The conversation's highest recorded seq (0 when it has none)."""

    def set_stage(
        self,
        ref: str,
        stage: str,
        *,
        importance: float | None = None,
        reasons: Sequence[str] = (),
        happened: Span | None = None,
    ) -> None:
        """Move the event to ``stage``; extraction also records its importance, the reasons and
        when what it tells happened (``happened``, kept only when given)."""

    def timeline(self, tenant_id: str, user_id: str, session_id: str) -> list[StoredEvent]:
        """The conversation in seq order."""

    def recent(
        self, tenant_id: str, user_id: str, limit: int, session_id: str | None = None
    ) -> list[StoredEvent]:
        """The user's latest turns (by event time, then seq), newest first."""

    def user_offset(self, tenant_id: str, user_id: str) -> int | None:
        """The user's zone: the UTC offset, in seconds, their latest turn of role ``user`` was
        sent with (by event time, then seq); None when they have none (``shared.zones``)."""

    def stages(self, refs: Sequence[str]) -> dict[str, str]:
        """The stage of each of the events these pipeline keys name (keyed as given)."""

    def stalled(self, stuck_before: datetime, limit: int) -> list[tuple[str, str]]:
        """(pipeline key, stage) of events not done that reached their stage before the given time,
        except those parked (a dead letter names them and was not replayed)."""

    def of_user(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[StoredEvent]:
        """Those of the events that belong to this user (others' ids are silently absent)."""

    def in_window(
        self, tenant_id: str, user_id: str, start: datetime, end: datetime, limit: int
    ) -> list[StoredEvent]:
        """The user's turns told (``at``) in [start, end), newest first (then by event id)."""

    def happened_in(
        self, tenant_id: str, user_id: str, start: datetime, end: datetime, limit: int
    ) -> list[StoredEvent]:
        """The user's turns whose event time (``happened``) overlaps [start, end), latest first
        (then by event id)."""

    def redact(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[tuple[str, str]]:
        """Privacy: blank these turns of the user (content, metadata, vector); the row stays so the
        sequence keeps its slot. Returns (event id, session id) of the turns redacted."""

    def set_turn_vector(
        self, ref: str, vector: Sequence[float], model: str, window: Sequence[str] | None = None
    ) -> None:
        """Keep the vector of the turn's context window and, when given, its context turns' ids."""

    def context_before(
        self, tenant_id: str, user_id: str, session_id: str, seq: int, limit: int
    ) -> list[StoredEvent]:
        """Up to ``limit`` unredacted turns of the conversation right before ``seq``, oldest first."""

    def unembed_windows(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[str]:
        """Privacy: drop the vectors of the user's turns whose window holds one of these; their ids."""

    def turn_rows(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[TurnRow]:
        """Those of the user's turns that have a vector, as the turn index sees them."""

    def turns_to_index(
        self, tenant_id: str, user_id: str, limit: int, after_event_id: str = ""
    ) -> list[TurnRow]:
        """One user's turns with a vector not yet in the turn index, in event-id order after
        ``after_event_id``."""

    def mark_turns_indexed(self, refs: Sequence[str], indexed: bool = True) -> None:
        """Set the turn-index flag of the events these pipeline keys name."""

    def page_turns(self, after: str, limit: int) -> list[TurnRow]:
        """Every recorded turn with its vector and model (None when never embedded), in pipeline
        key order (tenant, then event id) after the key ``after``."""

    def reset_turns_indexed(self) -> None:
        """Mark every turn as not in the turn index (reindex rebuilds it)."""

    def turn_states(self, tenant_id: str, user_id: str) -> list[TurnState]:
        """One user's recorded turns as the turn index should reflect them, by event id (no
        vectors loaded)."""

    def turn_vectors(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors of those of the user's turns that have one, by event id."""

    def users_page(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        """(tenant, user) pairs that have recorded turns, in order, after ``after`` (keyset paging)."""


class ReceiptRepository(Protocol):
    def add_if_absent(self, receipt: Receipt) -> bool: ...

    def get_many(self, tenant_id: str, event_ids: Sequence[str]) -> dict[str, Receipt]:
        """The tenant's receipts of these event ids (event ids are unique per tenant only)."""

    def rejected(self, limit: int = 100) -> list[Receipt]: ...


class MemoryRepository(Protocol):
    """Memory rows: what the pipeline, recall and curation add, read and save."""

    def lock_user(self, tenant_id: str, user_id: str) -> None:
        """Serialise writers of one user's memories until the transaction ends."""

    def add(self, memory: Memory) -> None:
        """Insert; a memory with the same id already present is left as it is (redelivery)."""

    def get(self, tenant_id: str, user_id: str, memory_id: str) -> Memory | None: ...

    def get_many(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> list[Memory]:
        """Memories by id, scoped to one user; the embedding is not loaded (None)."""

    def save(self, memory: Memory) -> None:
        """Write back a memory read from this repository."""

    def from_event(self, tenant_id: str, user_id: str, event_id: str) -> list[Memory]:
        """The user's memories drafted from this turn of theirs, in draft order (event ids are
        unique per tenant only)."""

    def active_with_hash(
        self, tenant_id: str, user_id: str, content_hash: str, exclude_id: str
    ) -> Memory | None: ...

    def delete(self, memory_id: str) -> None:
        """Remove a pending draft (never a persisted memory)."""

    def by_cues(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus], limit: int
    ) -> list[Memory]:
        """Memories holding any of the cues, scoped to one user."""

    def by_source(
        self, tenant_id: str, user_id: str, event_id: str, statuses: Iterable[MemoryStatus]
    ) -> list[Memory]:
        """Memories citing this event among their sources, scoped to one user."""

    def by_sources(
        self, tenant_id: str, user_id: str, event_ids: Sequence[str], statuses: Iterable[MemoryStatus]
    ) -> list[Memory]:
        """Memories citing any of these events, scoped to one user (vectors not loaded)."""

    def cue_counts(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus]
    ) -> tuple[int, dict[str, int]]:
        """How many memories the user has in those statuses, and how many of them hold each cue.
        Pending drafts (extracted, not yet persisted) are never counted: recall never reads them,
        and counting them would lock the user's counts for the whole of an ingest unit."""

    def in_window(
        self,
        tenant_id: str,
        user_id: str,
        start: datetime,
        end: datetime,
        statuses: Iterable[MemoryStatus],
        limit: int,
        with_embedding: bool = False,
    ) -> list[Memory]:
        """Memories whose validity began in [start, end), newest first; their embeddings are
        loaded only when asked (None otherwise)."""

    def happened_in(
        self,
        tenant_id: str,
        user_id: str,
        start: datetime,
        end: datetime,
        statuses: Iterable[MemoryStatus],
        limit: int,
        with_embedding: bool = False,
    ) -> list[Memory]:
        """Memories whose event time (``happened_from`` .. ``happened_to``) overlaps [start, end),
        latest first (then by id); embeddings as in :meth:`in_window`."""

    def for_user(
        self, tenant_id: str, user_id: str, statuses: Iterable[MemoryStatus] | None
    ) -> list[Memory]: ...

    def candidates(
        self,
        tenant_id: str,
        user_id: str,
        slot: str | None,
        cues: Sequence[str],
        exclude: Sequence[str],
        limit: int,
    ) -> list[Memory]:
        """Active memories of one user that share the slot or any cue: conflict candidates."""

    def recent_of_type(
        self, tenant_id: str, user_id: str, memory_type: MemoryType, since: datetime, limit: int
    ) -> list[Memory]:
        """Active memories of one type whose validity began after ``since``, oldest first."""

    def users_with_recent(
        self, memory_type: MemoryType, since: datetime, limit: int
    ) -> list[tuple[str, str]]:
        """(tenant, user) pairs with active memories of that type since then, in a stable order."""


class MemoryIndexRepository(Protocol):
    """The memories' index bookkeeping: which version (``indexed_version``) and score
    (``indexed_score``) of each memory the vector index holds."""

    def unindexed(self, tenant_id: str, user_id: str, limit: int, after_id: str = "") -> list[Memory]:
        """One user's persisted memories whose index copy is older than the row, in id order after
        ``after_id``."""

    def mark_indexed(self, memory_ids_versions: Sequence[tuple[str, int]]) -> None: ...

    def page_for_reindex(self, after_id: str, limit: int) -> list[Memory]:
        """The next page of non-pending memories of every user, in id order (keyset paging)."""

    def reset_indexed(self) -> None:
        """Mark every memory as absent from the index (before a rebuild)."""

    def index_states(self, tenant_id: str, user_id: str) -> list[IndexState]:
        """One user's memories as the index should reflect them (no vectors loaded)."""

    def stale_scores(self, after_id: str, limit: int, tolerance: float) -> list[ScoreState]:
        """Indexed memories (index copy current) whose payload score drifted from the row's score
        by more than ``tolerance``, by id after ``after_id``."""

    def mark_scores_indexed(self, scores: Sequence[tuple[str, float]]) -> None:
        """The index payloads now hold these scores."""

    def users_page(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        """(tenant, user) pairs that have memories, in order, after ``after`` (keyset paging)."""


@dataclass(frozen=True)
class ScoreState:
    memory_id: str
    tenant_id: str
    user_id: str
    score: float


@dataclass(frozen=True)
class IndexState:
    """What the vector index should know of one memory: the reconciliation's view of a row."""

    memory_id: str
    version: int
    indexed_version: int
    status: str
    score: float
    embedding_model: str | None
    has_embedding: bool


@dataclass(frozen=True)
class TurnState:
    """What the turn index should know of one recorded turn: the reconciliation's view of an event
    row (``embedding_model`` is None while the turn has no vector)."""

    event: TurnPublished
    stage: str
    embedding_model: str | None
    turn_indexed: bool


@dataclass(frozen=True)
class HistoryEntry:
    """One thing that happened to a memory, and why. History rows are never deleted."""

    memory_id: str
    tenant_id: str
    user_id: str
    # created | reinforced | superseded | supersedes | merged | merged_into | importance_halved | invalidated
    action: str
    reason: str
    judge: str  # rules | llm | pipeline
    at: datetime  # the event time that caused it
    related_id: str | None = None
    event_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


class HistoryRepository(Protocol):
    def add(self, entry: HistoryEntry) -> None: ...

    def for_memories(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> list[HistoryEntry]:
        """Entries of these memories, oldest first, scoped to one user."""


class LlmCallRepository(Protocol):
    def add(self, usage: Any, event_id: str | None) -> None: ...


class CurationRepository(Protocol):
    """What the HTTP API needs beyond the pipeline's repositories: paged listing, privacy
    deletes, and the counts the metrics endpoint reads on each scrape."""

    def page(
        self,
        tenant_id: str,
        user_id: str,
        statuses: Iterable[MemoryStatus],
        memory_type: MemoryType | None,
        limit: int,
        offset: int,
    ) -> tuple[list[Memory], int]:
        """One page of a user's memories (newest first, vectors not loaded) and the total."""

    def users(self, tenant_id: str, limit: int, offset: int) -> tuple[list[tuple[str, int, int]], int]:
        """One page of the tenant's users that have memories, by user id: (user id, memories of
        any status, active memories), and the number of such users."""

    def derived_from(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> set[str]:
        """Ids of the user's memories made from any of these (merged or consolidated from them)."""

    def purge(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> list[str]:
        """Delete these memories and their history rows for good; returns the ids deleted."""

    def status_counts(self) -> dict[str, int]: ...

    def stage_counts(self) -> dict[str, int]: ...

    def llm_totals(self) -> list[tuple[str, bool, int, int, int]]:
        """(operation, ok, calls, prompt tokens, completion tokens) over every recorded LLM call."""


class DeadLetterRepository(Protocol):
    def add(self, letter: DeadLetter) -> None: ...

    def for_events(self, event_ids: Sequence[str]) -> dict[str, str]:
        """event id -> reason, for dead letters that name an event."""


# The meta key naming the model every stored vector comes from: set by the first embedding and by
# a rebuild of the index, compared by whatever embeds (``shared.ports.EmbeddingModelMismatch``).
EMBEDDING_MODEL_KEY = "embedding_model"


class MetaRepository(Protocol):
    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


class UnitOfWork(Protocol):
    """One transaction and the repositories bound to it (an adapter types its own as these)."""

    events: EventRepository
    receipts: ReceiptRepository
    memories: MemoryRepository
    memory_index: MemoryIndexRepository
    lifecycle: LifecycleRepository
    dead_letters: DeadLetterRepository
    meta: MetaRepository
    history: HistoryRepository
    llm_calls: LlmCallRepository
    api_keys: ApiKeyRepository
    curation: CurationRepository
    erasure: RowData
    transfer: TransferRepository
    insight: InsightRepository
    traces: TraceContextRepository
    # The errors of this store that mean it is unreachable, not that a row is bad: a sweep that
    # skips a bad row must not skip every row because the database is restarting.
    outages: tuple[type[BaseException], ...]

    def __enter__(self) -> UnitOfWork: ...

    def __exit__(self, *exc: object) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


@dataclass(frozen=True)
class FollowUp:
    """A task to enqueue once the unit of work has committed."""

    task: str
    args: tuple[Any, ...]
