"""What recall is asked and what it answers, and the candidate every path of the cascade scores.

:func:`parse_recall` is the one place a caller's recall is checked: the HTTP API (``POST
/v1/recall``), the agent tools and the MCP server (``search_memory``), ``cuemem recall`` and the
library's ``recall_for`` all build their :class:`RecallAsk` with it, so one bad value gets one
answer, naming its field, wherever it comes from. Each entry point only decodes its own shape
(JSON types, command-line options) and names the fields its own way (``--k``, ``k``).

A candidate is one memory or one raw turn on its way to an answer: the paths that found it add
their scores to it, fusion orders the candidates, and the chosen ones give their item.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from shared.events import FieldError, InvalidInput, TurnPublished, bounded_at, id_problem, text_problem
from shared.language.speakers import lines_of, without_assistant_lines
from shared.models import HISTORICAL_STATUSES, RECALLABLE_STATUSES, Memory, MemoryStatus
from shared.public import public_fields

# The bounds of what a recall may ask. A query is a question or a dialogue so far, not a document;
# k and the budget are what a prompt can hold, and they bound the work one request can cause.
MAX_QUERY_CHARS = 4000
MAX_K = 200
MAX_BUDGET_TOKENS = 100_000
# The ids' length limit when the caller has no settings at hand (``Settings.max_id_chars``).
DEFAULT_MAX_ID_CHARS = 128

# What a turn's citing memories are read in: a turn cited only by a memory recall must not return
# (superseded, forgotten...) must not come back either, so every status has to be seen.
EVERY_STATUS = frozenset(MemoryStatus)


def statuses_for(include_archived: bool, include_history: bool = False) -> frozenset[MemoryStatus]:
    """What a recall returns: active memories, plus archived ones on request, or with
    ``include_history`` every past statement too (superseded, archived, expired); each item
    carries its status, so the caller can tell them apart."""
    wanted = set(RECALLABLE_STATUSES)
    if include_archived:
        wanted.add(MemoryStatus.ARCHIVED)
    if include_history:
        wanted |= HISTORICAL_STATUSES
    return frozenset(wanted)


@dataclass(frozen=True)
class RecallAsk:
    """A recall as a caller asked it, every rule checked (:func:`parse_recall`). ``now`` None:
    the answering service's clock; ``tenant_id`` None: the deployment's (``CUEMEM_TENANT_ID``)."""

    user_id: str
    query: str
    k: int = 5
    now: datetime | None = None
    session_id: str | None = None
    budget_tokens: int | None = None
    statuses: frozenset[MemoryStatus] = RECALLABLE_STATUSES
    reinforce: bool = False
    tenant_id: str | None = None


def _query_problem(query: str) -> str | None:
    if not query.strip():
        return "must not be empty"
    if len(query) > MAX_QUERY_CHARS:
        return f"is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}"
    return text_problem(query)


def _between(value: int, low: int, high: int) -> str | None:
    return None if low <= value <= high else f"must be between {low} and {high}, got {value}"


def parse_recall(
    *,
    user_id: str,
    query: str,
    k: int = 5,
    now: str | datetime | None = None,
    session_id: str | None = None,
    budget_tokens: int | None = None,
    include_archived: bool = False,
    include_history: bool = False,
    reinforce: bool = False,
    tenant_id: str | None = None,
    max_id_chars: int = DEFAULT_MAX_ID_CHARS,
    max_k: int = MAX_K,
) -> RecallAsk:
    """Check a recall's every value and return it as a :class:`RecallAsk`, or raise
    :class:`shared.events.InvalidInput` with every problem found, each naming its field
    (``user_id``, ``tenant_id``, ``session_id``, ``query``, ``k``, ``now``, ``budget_tokens``).

    Ids are checked as a published turn's are (no stored row can have another id; refusing here
    names the field instead of failing in Postgres). ``now`` is an ISO 8601 text or a datetime,
    with a time zone, between 1970 and 2200 (near year 1 or 9999 recall's time arithmetic
    overflowed). ``max_k`` lowers the bound of k for a caller that promises less (the agent tools'
    schema offers a model at most 20)."""
    errors: list[FieldError] = []
    for name, value in (("user_id", user_id), ("tenant_id", tenant_id), ("session_id", session_id)):
        if value is not None and (problem := id_problem(value, max_id_chars)) is not None:
            errors.append(FieldError(name, problem))
    if (problem := _query_problem(query)) is not None:
        errors.append(FieldError("query", problem))
    if (problem := _between(k, 1, max_k)) is not None:
        errors.append(FieldError("k", problem))
    at = None
    if now is not None:
        try:
            at = bounded_at(now)
        except ValueError as exc:
            errors.append(FieldError("now", str(exc)))
    if budget_tokens is not None and (problem := _between(budget_tokens, 1, MAX_BUDGET_TOKENS)) is not None:
        errors.append(FieldError("budget_tokens", problem))
    if errors:
        raise InvalidInput(errors)
    return RecallAsk(
        user_id=user_id,
        query=query,
        k=k,
        now=at,
        session_id=session_id,
        budget_tokens=budget_tokens,
        statuses=statuses_for(include_archived, include_history),
        reinforce=reinforce,
        tenant_id=tenant_id,
    )


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
    # Score each candidate by its turns embedded alone too (``Settings.turn_alone_vector``;
    # ``shared.recall.alone``).
    turn_alone: bool = False

    @property
    def is_dialogue(self) -> bool:
        """The searched text holds several lines: a dialogue so far, not one question."""
        return len(lines_of(self.searched)) > 1

    @cached_property
    def searched(self) -> str:
        """The text the paths search for: the query without the lines an assistant said in it
        (``shared.language.speakers``: a dialogue so far is read by what the user said), or the
        last ``query_lines`` lines of that."""
        said = without_assistant_lines(self.query)
        if self.query_lines <= 0:
            return said
        lines = lines_of(said)
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
