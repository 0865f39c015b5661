"""The turn index's port: each recorded turn's context-window vector and which turns the
conversation-log index holds (``workers/db/turn_index.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from shared.events import TurnPublished


class TurnRow(NamedTuple):
    """A turn as the turn index sees it: its window's vector and model (None: never embedded) and
    the texts of the window's context turns, oldest first (``shared/indexing/turn_windows.py``)."""

    event: TurnPublished
    vector: list[float] | None
    model: str | None
    context: tuple[str, ...] = ()


@dataclass(frozen=True)
class TurnState:
    """What the turn index should know of one recorded turn: the reconciliation's view of an event
    row (``embedding_model`` is None while the turn has no vector)."""

    event: TurnPublished
    stage: str
    embedding_model: str | None
    turn_indexed: bool


class TurnIndexRepository(Protocol):
    """The conversation-log index's bookkeeping, kept on the event rows: each turn's context-window
    vector and model (the window's context turns by id) and whether the turn index holds its point
    (``turn_indexed``), as ``MemoryIndexRepository`` keeps the memory index's. Rows are the events'
    (``EventRepository``); a turn is keyed by its pipeline key (tenant and event id) where every
    tenant's turns are read, by its event id within one user's."""

    def unindexed(self, tenant_id: str, user_id: str, limit: int, after_event_id: str = "") -> list[TurnRow]:
        """One user's turns with a vector not yet in the turn index, in event-id order after
        ``after_event_id``."""

    def mark_indexed(self, refs: Sequence[str], indexed: bool = True) -> None:
        """Set the turn-index flag of the events these pipeline keys name."""

    def page_for_reindex(self, after: str, limit: int) -> list[TurnRow]:
        """Every recorded turn with its vector and model (None when never embedded), in pipeline
        key order (tenant, then event id) after the key ``after``."""

    def reset_indexed(self) -> None:
        """Mark every turn as not in the turn index (reindex rebuilds it)."""

    def index_states(self, tenant_id: str, user_id: str) -> list[TurnState]:
        """One user's recorded turns as the turn index should reflect them, by event id (no
        vectors loaded)."""

    def users_page(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        """(tenant, user) pairs that have recorded turns, in order, after ``after`` (keyset paging)."""

    def set_vector(
        self,
        ref: str,
        vector: Sequence[float],
        model: str,
        window: Sequence[str] | None = None,
        alone: Sequence[float] | None = None,
    ) -> None:
        """Keep the vector of the turn's context window and, when given, its context turns' ids
        and the vector of the turn by itself (``alone``: None leaves the turn without one, so that
        no turn keeps an alone vector of another model than its window's); the turn's point is
        then out of date."""

    def without_alone(self, after: str, limit: int, model: str) -> list[TurnPublished]:
        """Turns whose window has a vector of ``model`` but which have none by themselves (embedded
        before ``turn_alone_vector`` was on, or by a rebuild), in pipeline key order after the key
        ``after`` (every tenant's: the rebuild's)."""

    def set_alone(self, ref: str, alone: Sequence[float], model: str) -> bool:
        """Keep the vector of the turn by itself, only while its window's vector is of ``model``
        (neither re-embedded for another model nor blanked by a privacy delete meanwhile); whether
        it was kept."""

    def alone_scores(
        self, tenant_id: str, user_id: str, event_ids: Sequence[str], query: Sequence[float]
    ) -> dict[str, float]:
        """The cosine of ``query`` to the vector of each of those of the user's turns embedded by
        itself, by event id (a turn without one is left out)."""

    def vectors(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors of those of the user's turns that have one, by event id."""

    def rows(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[TurnRow]:
        """Those of the user's turns that have a vector, as the turn index sees them."""

    def unembed_windows(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[str]:
        """Privacy: drop the vectors of the user's turns whose window holds one of these; their ids."""
