"""Recall: exact keys and cue matches answer first; vector and keyword search fill in.

An exact key (a memory id, an event id) answers alone. Stage 1 (deterministic) scores the user's
memories that share cue keys with the query (entities, lexicon tags, keywords, weighted by rarity),
that fall in a time range the query names, or whose type it hints at, plus the conversation's
working memory, so a turn published a moment ago is found before any worker ran (read-your-writes).
When the best cue score reaches ``CONFIDENT`` the deterministic stage answers alone.

Otherwise stage 2 runs, all scoped to the tenant and user in the adapters: dense and BM25 keyword
search over memories; the same two over the conversation log (every recorded turn, its own
index), where a turn that became a memory lends its rank to that memory and any other turn is an
item of type ``turn``; and the user's newest memories. The lists are fused by weighted reciprocal
rank, leaned by the half-life score and a type weight, optionally reranked (``shared.recall.rerank``),
and cut to k without near-duplicates. Every list is ordered with a full tie-break (score, then
id), so the same state, query and ``now`` give the same answer.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from typing import Any, Protocol

from shared.cues import cues_for_memory, entities, lexicon_tags, query_cues
from shared.events import TurnPublished
from shared.ingest.conflicts import cosine
from shared.models import RECALLABLE_STATUSES, Memory, MemoryStatus, is_redacted
from shared.ports import Embedder, IndexHit, IndexUnavailable, Reranker, SparseTerms, VectorIndex
from shared.recall.rerank import DEFAULT_TOP_N, rerank_order
from shared.recall.sparse import sparse_query
from shared.storage import UnitOfWork
from shared.timeexpr import resolve_anchored as resolve_times

CONFIDENT = 3.0  # one rare entity, or a rare tag plus a keyword, or three rare keywords
RRF_K = 10  # sharper than the usual 60: a path's top hits should count; measured, see docs/BENCHMARKS.md
WORKING_TURNS = 20
MAX_QUERY_CUES = 16
TIME_BOOST = 2.0  # the memory falls in a time range the query names ("上周", "last month")
TYPE_BOOST = 0.5  # the query hints at the memory's type ("忌口" -> preference)
WINDOW_CANDIDATES = 20  # the time path's list (items of a named range, closest in meaning first)
WINDOW_SCAN = 200  # items of each kind read from one named range to pick those from
RECENT_DAYS = 3  # the recency path: the user's newest memories ("那我现在该怎么办？")
RECENT_CANDIDATES = 10
RECENT_WEIGHT = 0.5  # newness alone is weaker evidence than a match on words or meaning
# (and it only runs for follow-ups that name no subject of their own; see recall())
DUPLICATE_COSINE = 0.97
# Fusion priors. The fused rank decides; these only lean it: a memory's current half-life score
# (shared.scoring, 0..10 and more with use) adds up to SCORE_WEIGHT, and a type weight says how
# much a kind of item is worth in a prompt. Raw conversation turns count a little less than
# curated memories of the same rank; profile facts and preferences a little more. Kept small on
# purpose (at most 3 %, below the 5-9 % between adjacent top ranks, 1/11 vs 1/12): a larger prior
# would override what the searches found instead of settling near-ties.
SCORE_WEIGHT = 0.02
TYPE_WEIGHTS: dict[str, float] = {
    "profile": 1.01,
    "preference": 1.01,
    "semantic": 1.01,
    "fact": 1.0,
    "task": 1.0,
    "episodic": 1.0,
    "working": 1.0,
    "turn": 0.99,
}
EXACT_KEY_SCORE = 100.0
EVERY_STATUS = frozenset(MemoryStatus)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class WorkingMemory(Protocol):
    def recent(
        self, tenant_id: str, user_id: str, session_id: str | None, limit: int
    ) -> list[TurnPublished]: ...


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

    def to_public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "type": self.type,
            "status": self.status,
            "score": round(self.score, 6),
            "importance": self.importance,
            "created_at": self.created_at,
            "sources": self.sources,
            "explanation": self.explanation,
        }


@dataclass
class RecallResult:
    stage: str
    items: list[RecallItem]
    trace: dict[str, Any] = field(default_factory=dict)

    def to_public(self) -> dict[str, Any]:
        return {"stage": self.stage, "items": [i.to_public() for i in self.items], "trace": self.trace}


@dataclass
class _Candidate:
    item: RecallItem
    cue_score: float = 0.0
    matched: list[str] = field(default_factory=list)
    vector_score: float | None = None
    paths: list[str] = field(default_factory=list)
    memory: Memory | None = None
    keyword_score: float | None = None
    turn_vector_score: float | None = None
    turn_keyword_score: float | None = None


def _memory_item(memory: Memory) -> RecallItem:
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


def _turn_item(turn: TurnPublished, kind: str = "working") -> RecallItem:
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
    )


def _cue_match(weights: dict[str, float], cues: Iterable[str]) -> tuple[float, list[str]]:
    matched = sorted(set(weights).intersection(cues))
    return sum(weights[c] for c in matched), matched


def newer_first_within_slots(chosen: list[_Candidate]) -> list[_Candidate]:
    """Statements about the same slot (e.g. "preference:drink") keep the positions their group
    earned, but the newest takes the first of them: recall gives the current truth first."""
    positions: dict[str, list[int]] = {}
    for i, c in enumerate(chosen):
        if c.item.slot:
            positions.setdefault(c.item.slot, []).append(i)
    out = list(chosen)
    for slots in positions.values():
        if len(slots) < 2:
            continue
        group = sorted((chosen[i] for i in slots), key=lambda c: (c.item.created_at, c.item.id), reverse=True)
        for i, c in zip(slots, group, strict=True):
            out[i] = c
    return out


def _exact_key(uow: UnitOfWork, request: RecallRequest) -> list[_Candidate]:
    """A query that is a memory id, or an event id (`event:ID` or a bare id a memory cites)."""
    key = request.query.strip()
    if not key or any(ch.isspace() for ch in key) or len(key) > 512:
        return []
    found: list[Memory] = []
    if _UUID.match(key):
        memory = uow.memories.get(request.tenant_id, request.user_id, key.lower())
        if memory is not None and memory.status in request.statuses:
            found.append(memory)
    if not found:
        event_id = key.removeprefix("event:")
        found = uow.memories.by_source(request.tenant_id, request.user_id, event_id, request.statuses)
    return [
        _Candidate(_memory_item(m), EXACT_KEY_SCORE, [f"key:{key}"], paths=["key"], memory=m) for m in found
    ]


def rarity(df: int, total: int) -> float:
    """1 for a cue only one memory holds, falling towards 0 as more of the user's memories hold it."""
    if df <= 1 or total <= 1:
        return 1.0
    return max(math.log1p(total / df) / math.log1p(total), 0.05)


def _without_spans(text: str, spans: list[tuple[int, int]]) -> str:
    out = list(text)
    for start, end in spans:
        out[start:end] = " " * (end - start)
    return "".join(out)


@dataclass
class _InWindow:
    """An item of a time range the query names, not yet in the candidate pool."""

    key: str
    cand: _Candidate
    vector: list[float] | None
    label: str


def _window_items(
    uow: UnitOfWork,
    request: RecallRequest,
    windows: list[tuple[datetime, datetime]],
    weights: dict[str, float],
    with_turns: bool,
) -> dict[str, _InWindow]:
    """What lies in the time ranges the query names: the user's memories, and the turns of the
    conversation log that no memory cites (a cited turn is there as its memory), up to
    WINDOW_SCAN of each per range, with their vectors so that stage 2 can rank them by meaning.
    A range holds whole sessions; which of its items matter is for the query's content to say,
    not for their order in time."""
    out: dict[str, _InWindow] = {}
    for start, end in windows:
        label = f"time:{start.date().isoformat()}..{(end - timedelta(days=1)).date().isoformat()}"
        for memory in uow.memories.in_window(
            request.tenant_id, request.user_id, start, end, request.statuses, WINDOW_SCAN,
            with_embedding=True,
        ):  # fmt: skip
            if memory.id not in out:
                score, matched = _cue_match(weights, memory.cues)
                cand = _Candidate(_memory_item(memory), score, matched, memory=memory)
                out[memory.id] = _InWindow(memory.id, cand, memory.embedding, label)
        if not with_turns:
            continue
        events = uow.events.in_window(request.tenant_id, request.user_id, start, end, WINDOW_SCAN)
        # Cited by a memory of any status: a returnable memory stands for the turn; an unreturnable
        # one (superseded, forgotten...) means the turn's content must not come back either.
        cited = {
            s["event_id"]
            for m in uow.memories.by_sources(
                request.tenant_id, request.user_id, [e.event.event_id for e in events], EVERY_STATUS
            )
            for s in m.sources
        }
        fresh = [
            e.event
            for e in events
            if e.event.event_id not in cited
            and f"event:{e.event.event_id}" not in out
            and not is_redacted(e.event)
        ]
        vectors = uow.events.turn_vectors(request.tenant_id, request.user_id, [t.event_id for t in fresh])
        for turn in fresh:
            turn_cues = cues_for_memory(turn.content, lexicon_tags(turn.content), entities(turn.content))
            score, matched = _cue_match(weights, turn_cues)
            key = f"event:{turn.event_id}"
            out[key] = _InWindow(
                key, _Candidate(_turn_item(turn, "turn"), score, matched), vectors.get(turn.event_id), label
            )
    return out


def _enter_window(pool: dict[str, _Candidate], w: _InWindow) -> _Candidate:
    """Put an in-range item into the pool (or mark the pooled one) as found by the time path."""
    cand = pool.get(w.key)
    if cand is None:
        cand = pool[w.key] = w.cand
    if "time" not in cand.paths:
        cand.paths.append("time")
        cand.cue_score += TIME_BOOST
        cand.matched.append(w.label)
    return cand


def _window_ranked(
    in_window: dict[str, _InWindow], query_vector: list[float] | None, pool: dict[str, _Candidate]
) -> list[_Candidate]:
    """The time path's list: the items of the named ranges closest in meaning to the query (by
    cue score without a query vector), the best WINDOW_CANDIDATES of them."""

    def closeness(w: _InWindow) -> float:
        if query_vector is None or w.vector is None:
            return -1.0
        return cosine(query_vector, w.vector)

    ordered = sorted(
        in_window.values(),
        key=lambda w: (-round(closeness(w), 9), -w.cand.cue_score, *_tie(w.cand), w.key),
    )
    return [_enter_window(pool, w) for w in ordered[:WINDOW_CANDIDATES]]


def time_windows(query: str, now: datetime) -> list[tuple[datetime, datetime]]:
    """[start, end) ranges for the time expressions in the query, resolved against ``now``."""
    out = []
    for ref in resolve_times(query, now):
        tz = now.tzinfo or UTC
        start = datetime.combine(ref.date, dtime.min, tzinfo=tz)
        end = datetime.combine(ref.last, dtime.min, tzinfo=tz) + timedelta(days=1)
        out.append((start, end))
    return out


def diverse(ranked: list[_Candidate], k: int, taken: Sequence[_Candidate] = ()) -> list[_Candidate]:
    """Up to k minus ``len(taken)`` items of ``ranked`` to follow those already ``taken``,
    skipping near-duplicates of an item taken (same text, or cosine ≥ 0.97).

    An item whose source turns are all already behind items taken (a second memory drawn from
    the same turn, a turn a memory taken already quotes) adds no new evidence: it waits until
    the items that do add some have had their slots, and fills what is left, in rank order."""
    chosen: list[_Candidate] = list(taken)
    waiting: list[_Candidate] = []
    covered = {e for c in chosen for e in _source_events(c)}
    for cand in ranked:
        if len(chosen) >= k:
            break
        if _near_duplicate(cand, chosen):
            continue
        events = _source_events(cand)
        if events and events <= covered:
            waiting.append(cand)
            continue
        chosen.append(cand)
        covered |= events
    for cand in waiting:
        if len(chosen) >= k:
            break
        if not _near_duplicate(cand, chosen):
            chosen.append(cand)
    return chosen[len(taken) :]


def _source_events(c: _Candidate) -> set[str]:
    return {str(s["event_id"]) for s in c.item.sources if s.get("event_id")}


def _near_duplicate(cand: _Candidate, chosen: list[_Candidate]) -> bool:
    text = " ".join(cand.item.content.split()).lower()
    vec = cand.memory.embedding if cand.memory else None
    return any(
        text == " ".join(c.item.content.split()).lower()
        or (vec is not None and c.memory is not None and cosine(vec, c.memory.embedding) >= DUPLICATE_COSINE)
        for c in chosen
    )


def _recent_candidates(
    uow: UnitOfWork, request: RecallRequest, pool: dict[str, _Candidate]
) -> list[_Candidate]:
    """The user's newest memories: a follow-up question ("那我现在该怎么办？") is about them."""
    start = request.now - timedelta(days=RECENT_DAYS)
    out = []
    for memory in uow.memories.in_window(
        request.tenant_id, request.user_id, start, request.now + timedelta(seconds=1), request.statuses,
        RECENT_CANDIDATES,
    ):  # fmt: skip
        cand = pool.get(memory.id)
        if cand is None:
            cand = pool[memory.id] = _Candidate(_memory_item(memory), memory=memory)
        if "recent" not in cand.paths:
            cand.paths.append("recent")
        out.append(cand)
    return out


def _rank(candidates: Iterable[_Candidate], key: str) -> list[_Candidate]:
    """Best first; equal matches go to the more important, then the newer statement (a halved,
    older preference ranks after the one that replaced it), then the id, for a total order."""

    if key == "cue":
        return sorted(candidates, key=lambda c: (-c.cue_score, *_tie(c), c.item.id))
    return sorted(candidates, key=lambda c: (-(c.vector_score or 0.0), *_tie(c), c.item.id))


def _tie(c: _Candidate) -> tuple[float, float]:
    return (-(c.item.importance or 0.0), -datetime.fromisoformat(c.item.created_at).timestamp())


def recall(
    uow: UnitOfWork,
    request: RecallRequest,
    *,
    embedder: Embedder | None,
    index: VectorIndex | None,
    working_memory: WorkingMemory | None,
    turn_index: VectorIndex | None = None,
    reranker: Reranker | None = None,
    rerank_top_n: int = DEFAULT_TOP_N,
) -> RecallResult:
    timings: dict[str, float] = {}
    notes: list[str] = []
    started = time.perf_counter()
    exact = _exact_key(uow, request)
    if exact:
        for c in exact:
            c.item.score = EXACT_KEY_SCORE
            c.item.explanation = {**_explain(c, rrf=None), "ranked_by": "exact_key"}
        took = round((time.perf_counter() - started) * 1e3, 3)
        trace = {
            "stage": "deterministic",
            "query": request.query,
            "now": request.now.isoformat(),
            "user_id": request.user_id,
            "tenant_id": request.tenant_id,
            "exact_key": True,
            "candidates": {"exact": len(exact)},
            "timings_ms": {"total_ms": took},
            "notes": [],
        }
        return RecallResult("deterministic", [c.item for c in exact[: request.k]], trace)
    refs = resolve_times(request.query, request.now)
    windows = time_windows(request.query, request.now)
    # A time expression is a filter, not words to match: "上周"/"last week" must not pull in
    # every memory that says "last".
    content_query = _without_spans(request.query, [(r.start, r.end) for r in refs])
    qc = query_cues(content_query)
    base = qc.keys()
    timings["cues_ms"] = (time.perf_counter() - started) * 1e3

    # Stage 1: cue matches in long-term memory and in the working memory. A cue's weight falls
    # with how many of the user's memories hold it (a name on every turn proves nothing).
    t = time.perf_counter()
    total, df = uow.memories.cue_counts(request.tenant_id, request.user_id, list(base), request.statuses)
    weights = {c: w * rarity(df.get(c, 0), total) for c, w in base.items()}
    present = sorted((c for c in base if df.get(c)), key=lambda c: (df[c], c))[:MAX_QUERY_CUES]
    pool: dict[str, _Candidate] = {}
    for memory in uow.memories.by_cues(
        request.tenant_id, request.user_id, present, request.statuses, request.candidates
    ):
        score, matched = _cue_match(weights, memory.cues)
        pool[memory.id] = _Candidate(_memory_item(memory), score, matched, paths=["cue"], memory=memory)
    # Items of a named time range that also match the query's cues are cue hits of stage 1;
    # the rest wait for stage 2, which ranks the range by meaning.
    in_window = _window_items(uow, request, windows, weights, turn_index is not None) if windows else {}
    for found in in_window.values():
        if found.cand.cue_score > 0:
            _enter_window(pool, found)
    for cand in pool.values():
        if cand.item.type in qc.type_hints:
            cand.cue_score += TYPE_BOOST
            cand.matched.append(f"type:{cand.item.type}")
    long_term_sources = {s["event_id"] for c in pool.values() for s in c.item.sources}
    turns = _working_turns(uow, request, working_memory, notes)
    for turn in turns:
        if turn.event_id in long_term_sources:
            continue
        turn_cues = cues_for_memory(turn.content, lexicon_tags(turn.content), entities(turn.content))
        score, matched = _cue_match(weights, turn_cues)
        if score > 0:
            pool[f"event:{turn.event_id}"] = _Candidate(_turn_item(turn), score, matched, paths=["working"])
    timings["deterministic_ms"] = (time.perf_counter() - t) * 1e3
    cue_ranked = [c for c in _rank(pool.values(), "cue") if c.cue_score > 0]
    candidates_per_path = {
        "cue": sum(1 for c in cue_ranked if "cue" in c.paths),
        "time": sum(1 for c in cue_ranked if "time" in c.paths),
        "working": len(turns),
    }

    confident = [c for c in cue_ranked if c.cue_score >= CONFIDENT]
    # A confident hit brings the other statements of its slot along, so that the newest one
    # (the current truth) can come first even when the older one matched more words.
    slots = {c.item.slot for c in confident if c.item.slot}
    confident += [c for c in cue_ranked if c not in confident and c.item.slot in slots]
    answer = newer_first_within_slots(diverse(confident, request.k)) if confident else []
    for c in answer:
        c.item.score = c.cue_score
        c.item.explanation = {**_explain(c, rrf=None), "ranked_by": "cue"}
    fill = 0
    if len(answer) >= request.k:
        chosen, stage = answer, "deterministic"  # confident hits fill every slot: no search at all
    else:
        # Stage 2: vector, keyword, conversation-log and recency paths, fused with the cue list.
        query_vector = _embed_query(request, embedder, index or turn_index, timings, notes)
        vector_ranked = _vector_candidates(uow, request, query_vector, index, pool, timings, notes)
        candidates_per_path["vector"] = len(vector_ranked)
        terms = sparse_query(content_query)
        keyword_ranked = _keyword_candidates(uow, request, terms, index, pool, timings, notes)
        candidates_per_path["keyword"] = len(keyword_ranked)
        turn_vector_ranked, turn_keyword_ranked = _turn_candidates(
            uow, request, query_vector, terms, turn_index, pool, timings, notes
        )
        candidates_per_path["turn_vector"] = len(turn_vector_ranked)
        candidates_per_path["turn_keyword"] = len(turn_keyword_ranked)
        window_ranked = _window_ranked(in_window, query_vector, pool)
        for key in in_window.keys() & pool.keys():
            _enter_window(pool, in_window[key])  # found by another path, and in the range too
        candidates_per_path["time"] = sum(1 for c in pool.values() if "time" in c.paths)
        # The recency path answers follow-ups that name nothing ("那我现在该怎么办？"): a question
        # with its own subject is about that subject, and newness would only add noise to it.
        follow_up = len(qc.keywords) <= 1 and not qc.entities and not qc.tags and not windows
        recent_ranked = _recent_candidates(uow, request, pool) if follow_up else []
        candidates_per_path["recent"] = len(recent_ranked)
        rrf: dict[str, float] = {}
        # Memories and turns compete in one dense and one keyword list: a memory found both by
        # its own vector and through its source turn is one piece of evidence, not two.
        paths = (
            (cue_ranked, 1.0),
            (_merged(vector_ranked, turn_vector_ranked, "vector_score", "turn_vector_score"), 1.0),
            (_merged(keyword_ranked, turn_keyword_ranked, "keyword_score", "turn_keyword_score"), 1.0),
            (recent_ranked, RECENT_WEIGHT),
            (window_ranked, 1.0),
        )
        for ranking, weight in paths:
            for rank, c in enumerate(ranking):
                w = weight * (_cue_strength(c) if ranking is cue_ranked else 1.0)
                rrf[c.item.id] = rrf.get(c.item.id, 0.0) + w / (RRF_K + rank + 1)
        fused = {i: v * _prior(pool[i]) for i, v in rrf.items()}
        # Equal fused ranks go to the more important, then the newer memory, then the id.
        ranked = sorted(
            (pool[i] for i in fused), key=lambda c: (-round(fused[c.item.id], 9), *_tie(c), c.item.id)
        )
        if any("time" in c.paths for c in ranked):
            # The query names a time range and something falls in it: that is a filter, so what
            # lies inside comes first (in fused order), the rest after.
            ranked = [c for c in ranked if "time" in c.paths] + [c for c in ranked if "time" not in c.paths]
        rerank_scores: dict[str, float] = {}
        if reranker is not None and ranked:
            t = time.perf_counter()
            reordered = rerank_order(
                request.query, [(c.item.id, c.item.content) for c in ranked], reranker, top_n=rerank_top_n
            )
            by_id = {c.item.id: c for c in ranked}
            ranked = [by_id[i] for i in reordered.order]
            rerank_scores = reordered.scores
            if reordered.note:
                notes.append(reordered.note)
            timings["rerank_ms"] = (time.perf_counter() - t) * 1e3
        # Confident cue hits answer first; the fused search fills the slots they leave.
        taken = {c.item.id for c in answer}
        fillers = newer_first_within_slots(
            diverse([c for c in ranked if c.item.id not in taken], request.k, taken=answer)
        )
        for c in fillers:
            c.item.score = fused[c.item.id]
            c.item.explanation = {**_explain(c, rrf=rrf[c.item.id]), "ranked_by": "fused"}
            c.item.explanation["prior"] = round(_prior(c), 6)
            if c.item.id in rerank_scores:
                c.item.explanation["rerank_score"] = round(rerank_scores[c.item.id], 6)
        for c in answer:
            # An answer-first item keeps its place and its cue-scale score, but its explanation
            # lists every path that found it, including those the fill search ran afterwards.
            c.item.explanation = {**_explain(c, rrf=rrf.get(c.item.id)), "ranked_by": "cue"}
            if c.item.id in fused:
                c.item.explanation["fused_score"] = round(fused[c.item.id], 6)
        chosen, fill = answer + fillers, len(fillers)
        stage = "deterministic" if answer else "vector" if chosen else "none"
    timings["total_ms"] = (time.perf_counter() - started) * 1e3

    trace = {
        "stage": stage,
        "query": request.query,
        "now": request.now.isoformat(),
        "user_id": request.user_id,
        "tenant_id": request.tenant_id,
        "time_windows": [[s.isoformat(), e.isoformat()] for s, e in windows],
        "cues": {
            "entities": list(qc.entities),
            "tags": list(qc.tags),
            "type_hints": list(qc.type_hints),
            "keywords": list(qc.keywords),
        },
        "candidates": candidates_per_path,
        "confident_threshold": CONFIDENT,
        "deterministic_items": len(answer),
        "filled_by_search": fill,
        "timings_ms": {k: round(v, 3) for k, v in timings.items()},
        "notes": notes,
    }
    if not chosen:
        notes.append(
            "nothing matched: "
            + (
                "no cue of the query is stored for this user"
                if not cue_ranked
                else "cue matches were too weak"
            )
            + (
                "; vector search found nothing"
                if stage == "none" and not any("unavailable" in n for n in notes)
                else ""
            )
        )
    return RecallResult(stage, [c.item for c in chosen], trace)


def _working_turns(
    uow: UnitOfWork, request: RecallRequest, working_memory: WorkingMemory | None, notes: list[str]
) -> list[TurnPublished]:
    """Recent turns: the current session's, or (without one) those the pipeline has not finished.

    A finished turn outside the current session already answers through long-term memory, or
    was judged not worth keeping; offering it again would only add noise.
    """
    turns: list[TurnPublished] | None = None
    if working_memory is not None:
        try:
            turns = working_memory.recent(
                request.tenant_id, request.user_id, request.session_id, WORKING_TURNS
            )
        except Exception as exc:  # Redis down: the event log still knows the recorded turns
            notes.append(
                f"working memory unavailable ({type(exc).__name__}); read recent turns from the event log"
            )
    if turns is None:
        stored = uow.events.recent(request.tenant_id, request.user_id, WORKING_TURNS, request.session_id)
        turns = [s.event for s in stored]
    if request.session_id is not None:
        return turns
    stages = uow.events.stages([t.event_id for t in turns])
    return [t for t in turns if stages.get(t.event_id) != "done"]


def _embed_query(
    request: RecallRequest,
    embedder: Embedder | None,
    index: VectorIndex | None,
    timings: dict[str, float],
    notes: list[str],
) -> list[float] | None:
    """The query's vector, computed once for the memory and the conversation-log searches."""
    if embedder is None or index is None:
        notes.append("vector search skipped: no embedder or index configured")
        return None
    t = time.perf_counter()
    vector = embedder.embed_query(request.query)
    timings["embed_ms"] = (time.perf_counter() - t) * 1e3
    return vector


def _vector_candidates(
    uow: UnitOfWork,
    request: RecallRequest,
    vector: list[float] | None,
    index: VectorIndex | None,
    pool: dict[str, _Candidate],
    timings: dict[str, float],
    notes: list[str],
) -> list[_Candidate]:
    if vector is None or index is None:
        return []
    t = time.perf_counter()
    try:
        hits = index.search(
            request.tenant_id,
            request.user_id,
            vector,
            request.candidates,
            [s.value for s in request.statuses],
        )
    except IndexUnavailable as exc:
        notes.append(f"vector search unavailable: {exc}")
        return []
    timings["vector_ms"] = (time.perf_counter() - t) * 1e3
    # Postgres is the truth: re-read the hits there (scoped to the user again) and drop any
    # point whose row is gone or no longer in a requested status.
    scores = {h.id: h.score for h in hits}
    memories = uow.memories.get_many(request.tenant_id, request.user_id, list(scores))
    out: list[_Candidate] = []
    for memory in memories:
        if memory.status not in request.statuses:
            continue
        cand = pool.get(memory.id)
        if cand is None:
            cand = pool[memory.id] = _Candidate(_memory_item(memory), memory=memory)
        cand.vector_score = scores[memory.id]
        cand.paths.append("vector")
        out.append(cand)
    dropped = len(hits) - len(out)
    if dropped:
        notes.append(f"{dropped} index hits had no matching row in Postgres and were ignored")
    return _rank(out, "vector")


def _keyword_candidates(
    uow: UnitOfWork,
    request: RecallRequest,
    terms: SparseTerms,
    index: VectorIndex | None,
    pool: dict[str, _Candidate],
    timings: dict[str, float],
    notes: list[str],
) -> list[_Candidate]:
    """BM25-weighted keyword search inside the index (sparse vectors, IDF over the user's memories)."""
    if index is None or not terms.indices:
        return []
    t = time.perf_counter()
    try:
        hits = index.search_keywords(
            request.tenant_id, request.user_id, terms, request.candidates, [s.value for s in request.statuses]
        )
    except IndexUnavailable as exc:
        notes.append(f"keyword search unavailable: {exc}")
        return []
    timings["keyword_ms"] = (time.perf_counter() - t) * 1e3
    scores = {h.id: h.score for h in hits}
    out = []
    for memory in uow.memories.get_many(request.tenant_id, request.user_id, list(scores)):
        if memory.status not in request.statuses:
            continue
        cand = pool.get(memory.id)
        if cand is None:
            cand = pool[memory.id] = _Candidate(_memory_item(memory), memory=memory)
        cand.keyword_score = scores[memory.id]
        cand.paths.append("keyword")
        out.append(cand)
    return sorted(out, key=lambda c: (-(c.keyword_score or 0.0), c.item.id))


def _turn_candidates(
    uow: UnitOfWork,
    request: RecallRequest,
    vector: list[float] | None,
    terms: SparseTerms,
    turn_index: VectorIndex | None,
    pool: dict[str, _Candidate],
    timings: dict[str, float],
    notes: list[str],
) -> tuple[list[_Candidate], list[_Candidate]]:
    """Dense and keyword search over the conversation log (every recorded turn of the user).

    A turn that a returned-status memory cites lends its rank to that memory (the memory is the
    curated form of the same evidence); any other turn becomes an item of type ``turn``. Both
    lists are re-read in Postgres, scoped to the user.
    """
    if turn_index is None:
        return [], []
    t = time.perf_counter()
    searches: list[tuple[str, list[IndexHit]]] = []
    try:
        if vector is not None:
            searches.append(
                (
                    "turn_vector",
                    turn_index.search(request.tenant_id, request.user_id, vector, request.candidates),
                )
            )
        if terms.indices:
            searches.append(
                (
                    "turn_keyword",
                    turn_index.search_keywords(request.tenant_id, request.user_id, terms, request.candidates),
                )
            )
    except IndexUnavailable as exc:
        notes.append(f"conversation-log search unavailable: {exc}")
        return [], []
    timings["turns_ms"] = (time.perf_counter() - t) * 1e3
    event_ids = sorted({str(h.payload.get("event_id")) for _, hits in searches for h in hits})
    turns = {
        s.event.event_id: s.event
        for s in uow.events.of_user(request.tenant_id, request.user_id, event_ids)
        if not is_redacted(s.event)  # a point that outlived a privacy delete: never shown
    }
    # Memories of every status: a turn that a returnable memory cites lends its rank to it; a turn
    # cited only by memories recall must not return (superseded, archived, forgotten...) is
    # skipped, or the conversation log would bring back what governance retired.
    citing: dict[str, list[Memory]] = {}
    retired: set[str] = set()
    for memory in uow.memories.by_sources(request.tenant_id, request.user_id, event_ids, EVERY_STATUS):
        for source in memory.sources:
            if memory.status in request.statuses:
                citing.setdefault(source["event_id"], []).append(memory)
            else:
                retired.add(source["event_id"])
    out: dict[str, list[_Candidate]] = {"turn_vector": [], "turn_keyword": []}
    for path, hits in searches:
        seen: set[str] = set()
        for hit in sorted(hits, key=lambda h: (-h.score, h.id)):
            event_id = str(hit.payload.get("event_id"))
            if event_id not in turns:
                continue  # not this user's, or gone from the log: Postgres is the truth
            targets: list[_Candidate] = []
            for memory in citing.get(event_id, []):
                cand = pool.get(memory.id)
                if cand is None:
                    cand = pool[memory.id] = _Candidate(_memory_item(memory), memory=memory)
                targets.append(cand)
            if not targets:
                if event_id in retired:
                    continue
                key = f"event:{event_id}"
                cand = pool.get(key)
                if cand is None:
                    cand = pool[key] = _Candidate(_turn_item(turns[event_id], "turn"))
                targets.append(cand)
            for cand in targets:
                if cand.item.id in seen:
                    continue
                seen.add(cand.item.id)
                if path not in cand.paths:
                    cand.paths.append(path)
                if path == "turn_vector":
                    cand.turn_vector_score = max(cand.turn_vector_score or 0.0, hit.score)
                else:
                    cand.turn_keyword_score = max(cand.turn_keyword_score or 0.0, hit.score)
                out[path].append(cand)
    return out["turn_vector"], out["turn_keyword"]


def _cue_strength(c: _Candidate) -> float:
    """How much a cue match counts in fusion: in full at the confident score, less below it. A
    name that is on every memory (rarity near 0) must not vote like a rare order id."""
    return min(1.0, c.cue_score / CONFIDENT)


def _merged(own: list[_Candidate], via_turns: list[_Candidate], a: str, b: str) -> list[_Candidate]:
    """One ranking of the candidates of both lists by the better of their two scores (cosines of
    one model; BM25 scores of the same query), ties by id."""
    unique = {c.item.id: c for c in [*own, *via_turns]}

    def best(c: _Candidate) -> float:
        return max(getattr(c, a) or 0.0, getattr(c, b) or 0.0)

    return sorted(unique.values(), key=lambda c: (-best(c), c.item.id))


def _prior(c: _Candidate) -> float:
    """How fusion leans: the item type's weight times 1 + SCORE_WEIGHT x the half-life score / 10."""
    score = c.memory.score if c.memory is not None else 0.0
    return TYPE_WEIGHTS.get(c.item.type, 1.0) * (1.0 + SCORE_WEIGHT * min(max(score, 0.0), 10.0) / 10.0)


def _explain(c: _Candidate, rrf: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"paths": list(c.paths), "matched_cues": list(c.matched), "cue_score": c.cue_score}
    if c.vector_score is not None:
        out["vector_score"] = round(c.vector_score, 6)
    if c.keyword_score is not None:
        out["keyword_score"] = round(c.keyword_score, 6)
    if c.turn_vector_score is not None:
        out["turn_vector_score"] = round(c.turn_vector_score, 6)
    if c.turn_keyword_score is not None:
        out["turn_keyword_score"] = round(c.turn_keyword_score, 6)
    if c.memory is not None:
        out["half_life_score"] = round(c.memory.score, 6)
    if rrf is not None:
        out["rrf"] = round(rrf, 6)
    return out
