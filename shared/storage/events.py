"""The event log's port: recorded turns, their stages and the receipts that say what became of
each published turn (``workers/db/events.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from shared.events import TurnPublished
from shared.language.timeexpr import Span

Outcome = Literal["accepted", "duplicate", "rejected"]


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

    def of_user(
        self, tenant_id: str, user_id: str, event_ids: Sequence[str], windows_of: Sequence[str] = ()
    ) -> list[StoredEvent]:
        """Those of the events that belong to this user (others' ids are silently absent), and
        the turns of the context windows of the user's events ``windows_of`` names, in the same
        read (recall's log hits and the turns the best of them lend their rank to)."""

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

    def context_before(
        self, tenant_id: str, user_id: str, session_id: str, seq: int, limit: int
    ) -> list[StoredEvent]:
        """Up to ``limit`` unredacted turns of the conversation right before ``seq``, oldest first."""


class ReceiptRepository(Protocol):
    def add_if_absent(self, receipt: Receipt) -> bool: ...

    def get_many(self, tenant_id: str, event_ids: Sequence[str]) -> dict[str, Receipt]:
        """The tenant's receipts of these event ids (event ids are unique per tenant only)."""

    def rejected(self, limit: int = 100) -> list[Receipt]: ...
