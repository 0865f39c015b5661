"""What recall is asked and what it answers, and the candidate every path of the cascade scores.

A candidate is one memory or one raw turn on its way to an answer: the paths that found it add
their scores to it, fusion orders the candidates, and the chosen ones give their item.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from shared.events import TurnPublished
from shared.language.speakers import without_assistant_lines
from shared.models import RECALLABLE_STATUSES, Memory, MemoryStatus
from shared.public import public_fields

# What a turn's citing memories are read in: a turn cited only by a memory recall must not return
# (superseded, forgotten...) must not come back either, so every status has to be seen.
EVERY_STATUS = frozenset(MemoryStatus)


@dataclass(frozen=True)
class RecallRequest:
    tenant_id: str
    user_id: str
    query: str
    now: datetime
    k: int = 5
    session_id: str | None = None
    statuses: frozenset[MemoryStatus] = RECALLABLE_STATUSES
    candidates: int = 50
    # How many recent turns the working memory offers: the number it keeps
    # (``Settings.working_memory_turns``, passed by ``service.operations.recall``).
    working_turns: int = 20
    # The relevance floor: the least probability of relevance an item needs
    # (``Settings.recall_min_relevance``; None: the relevance model's own default). 0 turns it off.
    min_relevance: float | None = None
    # A query of several lines (a dialogue so far) is searched by its last ``query_lines`` lines
    # only (``Settings.recall_query_lines``; 0: the whole query).
    query_lines: int = 0

    @property
    def is_dialogue(self) -> bool:
        """The searched text holds several lines: a dialogue so far, not one question."""
        return sum(1 for line in self.searched.splitlines() if line.strip()) > 1

    @cached_property
    def searched(self) -> str:
        """The text the paths search for: the query without the lines an assistant said in it
        (``shared.language.speakers``: a dialogue so far is read by what the user said), or the
        last ``query_lines`` lines of that."""
        said = without_assistant_lines(self.query)
        if self.query_lines <= 0:
            return said
        lines = [line for line in said.splitlines() if line.strip()]
        return "\n".join(lines[-self.query_lines :]) if len(lines) > self.query_lines else said


@dataclass
class RecallItem:
    id: str
    content: str
    type: str
    score: float
    status: str
    sources: list[dict[str, Any]]
    explanation: dict[str, Any]
    created_at: str
    importance: float | None = None
    slot: str | None = None
    role: str | None = None  # who said it, for a raw turn ("user", "assistant"...); None: a memory

    def to_public(self) -> dict[str, Any]:
        return public_fields(
            self,
            "id content type status score importance created_at sources explanation",
            score=round(self.score, 6),
        )


@dataclass
class RecallResult:
    stage: str
    items: list[RecallItem]
    trace: dict[str, Any] = field(default_factory=dict)

    def to_public(self) -> dict[str, Any]:
        return {"stage": self.stage, "items": [i.to_public() for i in self.items], "trace": self.trace}


@dataclass
class Candidate:
    item: RecallItem
    cue_score: float = 0.0
    matched: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    memory: Memory | None = None
    # The score each search gave it, by path ("vector", "keyword", "turn_vector", "turn_keyword").
    scores: dict[str, float] = field(default_factory=dict)

    def tie(self) -> tuple[float, float]:
        """Between equal matches: the more important first, then the newer statement (a halved,
        older preference ranks after the one that replaced it)."""
        return (-(self.item.importance or 0.0), -datetime.fromisoformat(self.item.created_at).timestamp())


class Pool(dict[str, Candidate]):
    """Every candidate of one recall by item id: a memory or a turn found by several paths is one
    candidate, which each of them marks. ``cue_df``: how many of the user's memories hold each
    of the query's cue keys (stage 1 reads it; a query about what the user never mentioned
    holds cues no memory has)."""

    def __init__(self) -> None:
        super().__init__()
        self.cue_df: dict[str, int] = {}

    def of_memory(self, memory: Memory) -> Candidate:
        cand = self.get(memory.id)
        if cand is None:
            cand = self[memory.id] = Candidate(memory_item(memory), memory=memory)
        return cand

    def of_turn(self, turn: TurnPublished) -> Candidate:
        """A turn of the conversation log, as an item of type ``turn``."""
        key = f"event:{turn.event_id}"
        cand = self.get(key)
        if cand is None:
            cand = self[key] = Candidate(turn_item(turn, "turn"))
        return cand


def memory_item(memory: Memory) -> RecallItem:
    return RecallItem(
        id=memory.id,
        content=memory.content,
        type=memory.type.value,
        score=0.0,
        status=memory.status.value,
        sources=list(memory.sources),
        explanation={},
        created_at=(memory.valid_from or memory.created_at).isoformat(),
        importance=memory.importance,
        slot=memory.slot,
    )


def turn_item(turn: TurnPublished, kind: str = "working") -> RecallItem:
    """A raw turn as an item: ``working`` (this conversation, maybe not processed yet) or ``turn``
    (found in the conversation log)."""
    return RecallItem(
        id=f"event:{turn.event_id}",
        content=turn.content,
        type=kind,
        score=0.0,
        status=kind if kind == "working" else "log",
        sources=[
            {
                "event_id": turn.event_id,
                "session_id": turn.session_id,
                "seq": turn.seq,
                "at": turn.at.isoformat(),
            }
        ],
        explanation={},
        created_at=turn.at.isoformat(),
        role=turn.role.value,
    )
