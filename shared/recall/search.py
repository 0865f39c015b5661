"""Stage 2's searches: the query's vector and its keywords (BM25 over sparse vectors, IDF over the
user's points) in the two indexes, the memories and the conversation log (every recorded turn).

One search, two corpora. What differs is said by a :class:`Corpus`: its index, the names of its
paths, whether the request's memory statuses filter its points, how its searches are timed and
reported, and how a hit becomes candidates. When the indexes are searched through another process
(the embedded index's owner, :class:`shared.ports.BatchSearch`) all the searches of a recall go in
one round trip; in this process, or on a Qdrant server, they run one by one. Every hit is re-read
in Postgres, scoped to the user again, once per corpus: Postgres is the truth, and a point whose
row is gone or no longer returnable is dropped.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from shared.events import TurnPublished
from shared.language.text import STOPWORDS, tokens
from shared.models import Memory, is_redacted
from shared.ports import BatchSearch, Embedder, IndexHit, IndexUnavailable, Search, SparseTerms, VectorIndex
from shared.queues import IndexKind
from shared.recall.explain import Trace
from shared.recall.request import EVERY_STATUS, Candidate, Pool, RecallRequest
from shared.recall.roles import only_asks
from shared.storage import UnitOfWork

LENDING = 20  # hits per path whose window stands for its context turns too
MIN_REST_CHARS = 8  # letters or digits left of a turn once its retired statements are cut out
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
    kind: IndexKind  # the index its points are in
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
    vector = embedder.embed_query(request.searched)
    trace.took("embed_ms", t)
    return vector


def search(
    uow: UnitOfWork,
    request: RecallRequest,
    corpora: Sequence[tuple[Corpus, VectorIndex | None]],
    query: SearchQuery,
    pool: Pool,
    trace: Trace,
) -> dict[str, list[Candidate]]:
    """The candidates each corpus' two searches found, by path (order: the index's, as re-read;
    fusion orders them). Each candidate gets the path and its score. A corpus without an index
    finds nothing."""
    batched = _batched_hits(request, corpora, query, trace)
    out: dict[str, list[Candidate]] = {}
    for corpus, index in corpora:
        found: dict[str, list[Candidate]] = {corpus.dense: [], corpus.keyword: []}
        if batched is not None:
            hits = batched.get(corpus.kind, {})
        else:
            hits = _hits(request, corpus, index, query, trace) if index is not None else {}
        if hits:
            for path, pairs in corpus.found(uow, request, hits, pool, trace.notes).items():
                for cand, score in pairs:
                    cand.scores[path] = score
                    if path not in cand.paths:
                        cand.paths.append(path)
                    found[path].append(cand)
        for path, cands in found.items():
            trace.candidates[path] = len(cands)
        out.update(found)
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


def _batched_hits(
    request: RecallRequest,
    corpora: Sequence[tuple[Corpus, VectorIndex | None]],
    query: SearchQuery,
    trace: Trace,
) -> dict[IndexKind, Hits] | None:
    """Every search of the recall in one round trip, by corpus and path, when the first index is
    searched through another process; None otherwise. A step any of whose searches failed counts
    for nothing, as when searched one by one, and its note says why."""
    first = next((index for _, index in corpora if index is not None), None)
    if not isinstance(first, BatchSearch):
        return None
    plan = [
        (corpus, step, path)
        for corpus, index in corpora
        if index is not None
        for step in corpus.steps
        for path in step.paths
        if _has_query(corpus, path, query)
    ]
    hits: dict[IndexKind, Hits] = {corpus.kind: {} for corpus, _ in corpora}
    if not plan:
        return hits
    t = time.perf_counter()
    try:
        answers = first.search_batch(
            request.tenant_id, request.user_id, [_spec(request, c, p, query) for c, _, p in plan]
        )
    except IndexUnavailable as exc:
        for label in dict.fromkeys(step.label for _, step, _ in plan):
            trace.notes.append(f"{label} unavailable: {exc}")
        return hits
    if answers is None:
        return None
    trace.took("search_ms", t)
    failed: dict[Step, IndexUnavailable] = {}
    for (_, step, _), answer in zip(plan, answers, strict=True):
        if isinstance(answer, IndexUnavailable):
            failed.setdefault(step, answer)
    for step, exc in failed.items():
        trace.notes.append(f"{step.label} unavailable: {exc}")
    for (corpus, step, path), answer in zip(plan, answers, strict=True):
        if step not in failed and not isinstance(answer, IndexUnavailable):
            hits[corpus.kind][path] = answer
    return hits


def _spec(request: RecallRequest, corpus: Corpus, path: str, query: SearchQuery) -> Search:
    statuses = tuple(s.value for s in request.statuses) if corpus.by_status else ("active",)
    dense = path == corpus.dense and query.vector is not None
    return Search(
        corpus.kind.value,
        query.vector if dense else None,
        None if dense else query.terms,
        request.candidates,
        statuses,
    )


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
    """A memory point stands for its memory, when the row is there and in a requested status.
    The hits of both searches are re-read in one query."""
    ids = sorted({h.id for path_hits in hits.values() for h in path_hits})
    rows = {m.id: m for m in uow.memories.get_many(request.tenant_id, request.user_id, ids)}
    out: Found = {}
    for path, path_hits in hits.items():
        scores = {h.id: h.score for h in path_hits}
        found = [rows[i] for i in scores if i in rows]
        out[path] = [(pool.of_memory(m), scores[m.id]) for m in found if m.status in request.statuses]
        dropped = len(path_hits) - len(out[path])
        # Said once, by the dense search: a stale point is in both searches' hits alike.
        if dropped and path == MEMORIES.dense:
            notes.append(f"{dropped} index hits had no matching row in Postgres and were ignored")
    return out


def _turns_found(uow: UnitOfWork, request: RecallRequest, hits: Hits, pool: Pool, notes: list[str]) -> Found:
    """A turn point is the turn's context window (``shared/indexing/turn_windows.py``): its hit
    stands for every turn the window holds, each turn scoring the best of the windows that hold
    it (its own first on a tie). A turn that a returned-status memory cites lends its rank to that
    memory (the memory is the curated form of the same evidence); any other turn becomes an item
    of type ``turn``."""
    tenant, user = request.tenant_id, request.user_id
    hit_ids = sorted({str(h.payload.get("event_id")) for path_hits in hits.values() for h in path_hits})
    # Only a path's best LENDING hits stand for their context turns: a deep hit's neighbours
    # would rank below the answer's k anyway, and every lent turn is one more row to re-read.
    lending = {
        str(h.payload.get("event_id"))
        for path_hits in hits.values()
        for h in sorted(path_hits, key=lambda h: (-h.score, h.id))[:LENDING]
    }
    # The hits and the turns of the lending hits' windows, in one read.
    stored = {s.event.event_id: s for s in uow.events.of_user(tenant, user, hit_ids, sorted(lending))}
    # A point that outlived a privacy delete is never shown, nor lends its rank.
    turns = {i: s.event for i, s in stored.items() if not is_redacted(s.event)}
    citing, retired = _citing(uow, request, sorted(turns))
    # Turns a window's hit stands for tie on its score: the one whose own words share the most
    # terms with the query comes first, then the window's own turn.
    # (A substring count: tokenising every turn would cost more than the rest of this function.)
    words = {w for w in tokens(request.searched) if w not in STOPWORDS}
    overlap = {i: sum(w in t.content.lower() for w in words) for i, t in turns.items()}
    out: Found = {}
    for path, path_hits in hits.items():
        best: dict[str, tuple[float, int]] = {}  # event id -> (score, -distance from the window's turn)
        for hit in path_hits:
            event_id = str(hit.payload.get("event_id"))
            if event_id not in turns:
                continue  # not this user's, or gone from the log: Postgres is the truth
            # From 0 up: a negative similarity to a turn counts as none, while a memory's own keeps
            # its sign (fusion's merged lists order by both, as they always have).
            score = max(hit.score, 0.0)
            window = stored[event_id].window if event_id in lending and lends(turns[event_id]) else ()
            for distance, held in enumerate([event_id, *reversed(window)]):
                if held in turns and (held not in best or (score, -distance) > best[held]):
                    best[held] = (score, -distance)
        seen: set[str] = set()
        out[path] = []
        for event_id in sorted(best, key=lambda e: (-best[e][0], -overlap[e], -best[e][1], e)):
            targets = [pool.of_memory(m) for m in citing.get(event_id, [])]
            if not targets:
                rest = _unretired(turns[event_id], retired.get(event_id, []))
                targets = [pool.of_turn(rest)] if rest is not None else []
            for cand in targets:
                if cand.item.id not in seen:
                    seen.add(cand.item.id)
                    out[path].append((cand, best[event_id][0]))
    return out


def lends(turn: TurnPublished) -> bool:
    """Whether a turn's window hit stands for the turns before it. An assistant's turn that only
    asks ("好呀，你有什么忌口吗？") scores on the words of the user's later question, not on what the
    turns before it say: lent, that score put the greeting before it above the user's answer
    (``roles``; the answer's own window holds the question and scores on its own)."""
    return not only_asks(turn.role.value, turn.content)


def _citing(
    uow: UnitOfWork, request: RecallRequest, event_ids: list[str]
) -> tuple[dict[str, list[Memory]], dict[str, list[Memory]]]:
    """The memories citing each turn: those recall may return, and the retired ones (superseded,
    archived, forgotten...), by event id."""
    citing: dict[str, list[Memory]] = {}
    retired: dict[str, list[Memory]] = {}
    for memory in uow.memories.by_sources(request.tenant_id, request.user_id, event_ids, EVERY_STATUS):
        for source in memory.sources:
            into = citing if memory.status in request.statuses else retired
            into.setdefault(source["event_id"], []).append(memory)
    return citing, retired


def _unretired(turn: TurnPublished, retired: list[Memory]) -> TurnPublished | None:
    """The turn without the statements of its retired memories, or None when nothing is left.

    A turn holds several facts: superseding or forgetting one hides that statement, never the
    rest of the turn. Every piece of a retired memory (its sentences, each cut short at "…"
    when the memory was) is cut out of the turn where it stands; a memory with a piece that is
    not in the turn as written (rephrased) cannot be cut out, so the turn stays hidden:
    governance wins over recall."""
    if not retired:
        return turn
    text = " ".join(turn.content.split())
    for memory in retired:
        for piece in _pieces(memory.content):
            at = text.lower().find(piece)
            if at < 0:
                return None
            text = text[:at] + " " + text[at + len(piece) :]
    rest = " ".join(text.split()).strip(" ,，、;；")
    if sum(ch.isalnum() for ch in rest) < MIN_REST_CHARS:
        return None
    return replace(turn, content=rest)


_SENTENCE = re.compile(r"[^.。!！?？;；…]+")


def _pieces(statement: str) -> list[str]:
    """A memory's content as the runs of text it took from its turn, lower-cased: split at
    sentence ends and at the "…" of a cut."""
    flat = " ".join(statement.split()).lower()
    return [p for m in _SENTENCE.finditer(flat) if (p := m.group().strip(" ,，、"))]


MEMORIES = Corpus(
    kind=IndexKind.MEMORIES,
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
    kind=IndexKind.TURNS,
    dense="turn_vector",
    keyword="turn_keyword",
    by_status=False,
    steps=(Step("conversation-log search", "turns_ms", ("turn_vector", "turn_keyword")),),
    found=_turns_found,
)
