"""The turn index's port: each recorded turn's context-window vector and which turns the
conversation-log index holds (``workers/db/turn_index.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

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
