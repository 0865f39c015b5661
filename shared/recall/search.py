"""Stage 2's searches: the query's vector and its keywords (BM25 over sparse vectors, IDF over the
user's points) in the two indexes, the memories and the conversation log (every recorded turn).

One search, two corpora. What differs is said by a :class:`Corpus`: the names of its paths,
whether the request's memory statuses filter its points, how its searches are timed and reported,
and how a hit becomes candidates. Every hit is re-read in Postgres, scoped to the user again:
Postgres is the truth, and a point whose row is gone or no longer returnable is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from shared.models import Memory, is_redacted
from shared.ports import Embedder, IndexHit, IndexUnavailable, SparseTerms, VectorIndex
from shared.recall.explain import Trace
from shared.recall.request import EVERY_STATUS, Candidate, Pool, RecallRequest
from shared.storage import UnitOfWork

Hits = dict[str, list[IndexHit]]  # by path
Found = dict[str, list[tuple[Candidate, float]]]  # by path: each candidate once, with its score


@dataclass(frozen=True)
class SearchQuery:
    vector: list[float] | None  # computed once for both corpora; None: no dense search
    terms: SparseTerms  # no terms: no keyword search


@dataclass(frozen=True)
class Step:
    """Searches run, timed and reported together: when the index is unavailable, none of them
    counts and one note says so."""

    label: str  # "<label> unavailable: ..."
    timing: str  # its key in the trace's timings
    paths: tuple[str, ...]


@dataclass(frozen=True)
class Corpus:
    dense: str  # the path of its dense search (the key of its scores and its candidate count)
    keyword: str  # the path of its keyword search
    by_status: bool  # the request's memory statuses filter its points
    steps: tuple[Step, ...]
    # Which candidates the hits stand for, read in Postgres; adds new ones to the pool.
    found: Callable[[UnitOfWork, RecallRequest, Hits, Pool, list[str]], Found]


def embed_query(
    request: RecallRequest, embedder: Embedder | None, index: VectorIndex | None, trace: Trace
) -> list[float] | None:
    """The query's vector, computed once for the memory and the conversation-log searches."""
    if embedder is None or index is None:
        trace.notes.append("vector search skipped: no embedder or index configured")
        return None
    t = time.perf_counter()
    vector = embedder.embed_query(request.query)
    trace.took("embed_ms", t)
    return vector


def search(
    uow: UnitOfWork,
    request: RecallRequest,
    corpus: Corpus,
    index: VectorIndex | None,
    query: SearchQuery,
    pool: Pool,
    trace: Trace,
) -> dict[str, list[Candidate]]:
    """The candidates each of the corpus' two searches found, by path (order: the index's, as
    re-read; fusion orders them). Each candidate gets the path and its score."""
    out: dict[str, list[Candidate]] = {corpus.dense: [], corpus.keyword: []}
    hits = _hits(request, corpus, index, query, trace) if index is not None else {}
    if hits:
        for path, pairs in corpus.found(uow, request, hits, pool, trace.notes).items():
            for cand, score in pairs:
                cand.scores[path] = score
                if path not in cand.paths:
                    cand.paths.append(path)
                out[path].append(cand)
    for path, cands in out.items():
        trace.candidates[path] = len(cands)
    return out


def _hits(
    request: RecallRequest, corpus: Corpus, index: VectorIndex, query: SearchQuery, trace: Trace
) -> Hits:
    """The hits of the searches the query has something for, by path, step by step."""
    hits: Hits = {}
    for step in corpus.steps:
        paths = [p for p in step.paths if _has_query(corpus, p, query)]
        if not paths:
            continue
        t = time.perf_counter()
        try:
            found = {p: _search(index, request, corpus, p, query) for p in paths}
        except IndexUnavailable as exc:
            trace.notes.append(f"{step.label} unavailable: {exc}")
            continue
        trace.took(step.timing, t)
        hits.update(found)
    return hits


def _has_query(corpus: Corpus, path: str, query: SearchQuery) -> bool:
    return query.vector is not None if path == corpus.dense else bool(query.terms.indices)


def _search(
    index: VectorIndex, request: RecallRequest, corpus: Corpus, path: str, query: SearchQuery
) -> list[IndexHit]:
    tenant, user, limit = request.tenant_id, request.user_id, request.candidates
    # A turn point's status is always "active" (a turn is no memory that can be retired): the
    # log is searched with the index's default filter, whatever statuses the request names.
    statuses = ([s.value for s in request.statuses],) if corpus.by_status else ()
    if path == corpus.dense and query.vector is not None:
        return index.search(tenant, user, query.vector, limit, *statuses)
    return index.search_keywords(tenant, user, query.terms, limit, *statuses)


def _memories_found(
    uow: UnitOfWork, request: RecallRequest, hits: Hits, pool: Pool, notes: list[str]
) -> Found:
    """A memory point stands for its memory, when the row is there and in a requested status."""
    out: Found = {}
    for path, path_hits in hits.items():
        scores = {h.id: h.score for h in path_hits}
        rows = uow.memories.get_many(request.tenant_id, request.user_id, list(scores))
        out[path] = [(pool.of_memory(m), scores[m.id]) for m in rows if m.status in request.statuses]
        dropped = len(path_hits) - len(out[path])
        # Said once, by the dense search: a stale point is in both searches' hits alike.
        if dropped and path == MEMORIES.dense:
            notes.append(f"{dropped} index hits had no matching row in Postgres and were ignored")
    return out


def _turns_found(uow: UnitOfWork, request: RecallRequest, hits: Hits, pool: Pool, notes: list[str]) -> Found:
    """A turn that a returned-status memory cites lends its rank to that memory (the memory is the
    curated form of the same evidence); any other turn becomes an item of type ``turn``."""
    event_ids = sorted({str(h.payload.get("event_id")) for path_hits in hits.values() for h in path_hits})
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
    out: Found = {}
    for path, path_hits in hits.items():
        seen: set[str] = set()
        out[path] = []
        for hit in sorted(path_hits, key=lambda h: (-h.score, h.id)):
            event_id = str(hit.payload.get("event_id"))
            if event_id not in turns:
                continue  # not this user's, or gone from the log: Postgres is the truth
            targets = [pool.of_memory(m) for m in citing.get(event_id, [])]
            if not targets and event_id not in retired:
                targets = [pool.of_turn(turns[event_id])]
            for cand in targets:
                if cand.item.id not in seen:
                    seen.add(cand.item.id)
                    # Its best hit's score (hits come best first), from 0 up: a negative similarity
                    # to a turn counts as none, while a memory's own keeps its sign (fusion's merged
                    # lists order by both, as they always have).
                    out[path].append((cand, max(hit.score, 0.0)))
    return out


MEMORIES = Corpus(
    dense="vector",
    keyword="keyword",
    by_status=True,
    steps=(
        Step("vector search", "vector_ms", ("vector",)),
        Step("keyword search", "keyword_ms", ("keyword",)),
    ),
    found=_memories_found,
)
# Both log searches are one step: recall has always timed them together (``turns_ms``).
CONVERSATION_LOG = Corpus(
    dense="turn_vector",
    keyword="turn_keyword",
    by_status=False,
    steps=(Step("conversation-log search", "turns_ms", ("turn_vector", "turn_keyword")),),
    found=_turns_found,
)
