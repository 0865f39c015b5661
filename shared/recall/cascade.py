"""Recall: every path proposes, one learned model ranks, a calibrated floor cuts.

An exact key (a memory id, an event id) answers alone. Otherwise every path proposes candidates
(:func:`gather`): stage 1 (``deterministic``) the user's memories sharing cue keys with the query
(weighted by rarity), the link hop, the time ranges the query names (``windows``) and the
conversation's working memory (a turn published a moment ago is found before any worker ran:
read-your-writes); stage 2 (``search``) dense and BM25 keyword search over the memories and over
the conversation log (every recorded turn, its own index), the named ranges ranked by meaning,
and for a follow-up the user's newest memories. All of it is scoped to the tenant and user in the
adapters.

Each candidate then gets a row of features (``features``: each path's score and rank, their
agreement, the item's type, role and age, its session's and neighbours' scores, the query's
shape) and the relevance model (``relevance``, fitted on the training split by
``cuemem bench train-ranker``) gives it a calibrated probability of being relevant. Candidates are
ranked by it (a question about one of the user's own slots puts the slot's current memory
first: ``slots``), an optional reranker reorders the top, and ``floor`` cuts to k without
near-duplicates and chit-chat, and returns nothing rather than filler when the best item of the
answer is under the minimum relevance. ``explain`` says why each item is there (its features and the
ones that moved it most) and what was left just below the cut.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from shared.language.cues import QueryCues, query_cues
from shared.language.sparse import sparse_query
from shared.ports import Embedder, Reranker, VectorIndex, WorkingMemory
from shared.recall import deterministic as stage1
from shared.recall import floor, fusion, roles, slots, windows
from shared.recall.alone import score_alone
from shared.recall.explain import Scored, Trace, answered, exact_answer
from shared.recall.features import Lists, candidate_features
from shared.recall.relevance import RelevanceModel, packaged_model
from shared.recall.request import Candidate, Pool, RecallRequest, RecallResult
from shared.recall.rerank import DEFAULT_TOP_N
from shared.recall.search import CONVERSATION_LOG, MEMORIES, SearchQuery, embed_query, search
from shared.storage import UnitOfWork


@dataclass
class Gathered:
    """Every candidate the paths proposed for one query, and the lists they came in."""

    pool: Pool
    lists: Lists
    cues: QueryCues
    windows: list[tuple[object, object]]
    about_assistant: bool
    follow_up: bool = False  # the query names no subject of its own ("那我现在该怎么办？")
    asked_slot: str | None = None  # the user's own slot whose current value it asks ("Where do I work?")

    def features(self, request: RecallRequest) -> dict[str, list[float]]:
        return candidate_features(
            self.pool, self.lists, request, self.cues, self.windows, self.about_assistant
        )


def gather(
    uow: UnitOfWork,
    request: RecallRequest,
    trace: Trace,
    *,
    embedder: Embedder | None,
    index: VectorIndex | None,
    working_memory: WorkingMemory | None,
    turn_index: VectorIndex | None = None,
) -> Gathered:
    """Every path's candidates for the query (no exact key: see :func:`recall`)."""
    times = windows.named_times(request.searched, request.now)
    cues = query_cues(times.content)
    trace.took("cues_ms", trace.started)

    # Stage 1: cue matches in long-term memory, in the named time ranges and in the working memory.
    t = time.perf_counter()
    weights, pool = stage1.cue_matches(uow, request, cues)
    stage1.link_hop(uow, request, cues, weights, pool, trace.notes)
    in_window = windows.window_items(uow, request, times.windows, weights, with_turns=turn_index is not None)
    windows.enter_cue_matches(pool, in_window)
    stage1.boost_type_hints(pool, cues)
    turns = stage1.working_turns(uow, request, working_memory, trace.notes)
    working = stage1.add_working_turns(uow, request, pool, turns, weights)
    trace.took("deterministic_ms", t)
    cue_ranked = stage1.ranked_by_cues(pool)
    trace.candidates.update(
        cue=sum(1 for c in cue_ranked if "cue" in c.paths),
        link=sum(1 for c in cue_ranked if "link" in c.paths),
        working=working,  # the recent turns offered, not every one read
    )

    # Stage 2: vector, keyword, conversation-log, time and recency paths.
    vector = embed_query(request, embedder, index or turn_index, trace)
    query = SearchQuery(vector, sparse_query(times.content))
    found = search(uow, request, [(MEMORIES, index), (CONVERSATION_LOG, turn_index)], query, pool, trace)
    score_alone(uow, request, vector, pool, trace)
    window_ranked = windows.window_ranked(in_window, vector, pool)
    trace.candidates["time"] = sum(1 for c in pool.values() if "time" in c.paths)
    follow_up = windows.is_follow_up(cues, times)
    recent_ranked = windows.recent_candidates(uow, request, pool) if follow_up else []
    trace.candidates["recent"] = len(recent_ranked)
    lists = Lists(
        cue=cue_ranked,
        dense=fusion.merged(found, MEMORIES.dense, CONVERSATION_LOG.dense),
        keyword=fusion.merged(found, MEMORIES.keyword, CONVERSATION_LOG.keyword),
        recent=recent_ranked,
        window=window_ranked,
    )
    return Gathered(
        pool,
        lists,
        cues,
        list(times.windows),
        roles.asks_assistant(request.searched),
        follow_up,
        # Not for a dialogue, where a slot word is chatter, nor for a question that names a time
        # range ("Where did I live in 2019?"), which asks what held then.
        None if request.is_dialogue or times.windows else slots.asked_slot(request.searched),
    )


def rank(
    gathered: Gathered, request: RecallRequest, model: RelevanceModel, trace: Trace
) -> tuple[list[Candidate], Scored, list[Candidate] | None]:
    """Every candidate by the model's probability of relevance, best first (ties: the more
    important, then the newer statement, then the id), the numbers behind it, and, when what lies
    in a range the question names was put first, the order without that rule (None otherwise)."""
    t = time.perf_counter()
    rows = gathered.features(request)
    ids = sorted(rows)
    probabilities = dict(zip(ids, model.probabilities([rows[i] for i in ids]), strict=True))
    scored = Scored(model, rows, probabilities)
    pool = gathered.pool
    by_model = sorted(
        (pool[i] for i in ids), key=lambda c: (-round(probabilities[c.item.id], 9), *c.tie(), c.item.id)
    )
    in_range_first = bool(gathered.windows) and not request.is_dialogue
    ranked = _ordered(by_model, gathered, scored, trace.notes, in_range_first)
    without = _ordered(by_model, gathered, scored, [], False) if in_range_first else None
    trace.took("rank_ms", t)
    return ranked, scored, without


def _ordered(
    ranked: list[Candidate], gathered: Gathered, scored: Scored, notes: list[str], in_range_first: bool
) -> list[Candidate]:
    """The model's order after the rules that know better than it (each says why)."""
    if in_range_first:
        # A question that names a time range ("上周我去哪儿了") asks for what lies in it: that
        # comes first, in the model's order. Not for a dialogue, where "今天" is chatter, not a
        # filter: there this cost MADial R@1 0.29 -> 0.19 offline (docs/BENCHMARKS.md). When
        # nothing in the range could be an answer, :func:`recall` takes the order without it. A
        # standing state around a range of the present or the future ("night shifts this month"
        # for "今晚吃什么好？") is not what the question asks first (``windows.around``).
        inside = {c.item.id for c in ranked if windows.lies_in_range(c)}
        ranked = [c for c in ranked if c.item.id in inside] + [c for c in ranked if c.item.id not in inside]
    if gathered.follow_up:
        # A follow-up names nothing of its own: it is about what the user said last, so the
        # newest memories come first (in the model's order). The training questions all name
        # their subject: the model has no follow-up to learn this from.
        recent = {c.item.id for c in gathered.lists.recent}
        if recent:
            notes.append("a follow-up that names nothing of its own: the newest memories come first")
        ranked = [c for c in ranked if c.item.id in recent] + [c for c in ranked if c.item.id not in recent]
    if gathered.asked_slot is not None:
        # "Where do I work?" asks for the slot's current value, which ingest keeps as one memory:
        # it comes first (``slots``).
        first = slots.holding(ranked, gathered.asked_slot)
        if first:
            notes.append(f"the query asks for {gathered.asked_slot}: its current memory comes first")
            firsts = {c.item.id for c in first}
            ranked = first + [c for c in ranked if c.item.id not in firsts]
    if not gathered.about_assistant:
        # An assistant's turn that only asks says nothing about the user (``roles``): it follows
        # every statement, whatever the model made of its words, which are the query's own. (The
        # training data has no assistant turns to learn this from.)
        asks = [c for c in ranked if scored.asks(c.item.id)]  # read once, by the features
        ranked = [c for c in ranked if not scored.asks(c.item.id)] + asks
    return ranked


def default_floor(
    model: RelevanceModel,
    embedder: Embedder | None,
    request: RecallRequest,
    candidates: int,
    notes: list[str],
) -> float:
    """The model's minimum relevance where its probabilities are calibrated: the configured
    embedder's cosines, and a query of one line, the shape it was fitted on (a question). A
    dialogue as the query (several lines) scores every candidate lower, the right one included
    (MADial: a floor that empties 60 % of LoCoMo's no-answer questions cost it 0.3 to 0.5 hit@5),
    so it gets no floor but chit-chat, and a note says why. A pool of fewer candidates than any
    training question had gets the small stores' floor, chosen on them, and a store smaller than
    any it was checked on (a handful of statements, where a paraphrase's answer and a question
    nothing answers score alike) none, with a note (docs/BENCHMARKS.md, "A small store and the
    floor"). ``CUEMEM_RECALL_MIN_RELEVANCE`` sets a floor for every query."""
    used = embedder.model_name if embedder is not None else "no embedder"
    if used != model.embedding_model:
        notes.append(
            f"no relevance floor: model {model.version} is calibrated for "
            f"{model.embedding_model or 'no embedder'}, not {used} (CUEMEM_RECALL_MIN_RELEVANCE sets one)"
        )
        return 0.0
    if request.is_dialogue:
        notes.append("no relevance floor: the model is calibrated on one-line questions, not dialogues")
        return 0.0
    if candidates >= model.min_candidates:
        return model.min_relevance
    if model.small_min_relevance > 0 and candidates >= model.small_min_candidates:
        notes.append(
            f"a small store's relevance floor: {candidates} candidates, fewer than the "
            f"{model.min_candidates} of the model's training questions"
        )
        return model.small_min_relevance
    fewest = model.small_min_candidates if model.small_min_relevance > 0 else model.min_candidates
    notes.append(
        f"no relevance floor: {candidates} candidates, fewer than the {fewest} its floor was checked on "
        "at the least"
    )
    return 0.0


def recall(
    uow: UnitOfWork,
    request: RecallRequest,
    *,
    embedder: Embedder | None,
    index: VectorIndex | None,
    working_memory: WorkingMemory | None,
    turn_index: VectorIndex | None = None,
    relevance: RelevanceModel | None = None,
    reranker: Reranker | None = None,
    rerank_top_n: int = DEFAULT_TOP_N,
) -> RecallResult:
    """Recall for ``request``; ``relevance`` defaults to the packaged model."""
    trace = Trace(request)
    exact = stage1.exact_key(uow, request)
    if exact:
        return exact_answer(trace, exact)
    gathered = gather(
        uow,
        request,
        trace,
        embedder=embedder,
        index=index,
        working_memory=working_memory,
        turn_index=turn_index,
    )
    model = relevance or packaged_model()
    if request.min_relevance is None:
        # With no candidate at all there is nothing to floor: a note on why no floor applies would
        # only contradict "nothing remembered answers this".
        notes = trace.notes if gathered.pool else []
        floor_here = default_floor(model, embedder, request, len(gathered.pool), notes)
        request = dataclasses.replace(request, min_relevance=floor_here)
        trace.request = request
    ranked, scored, without_range = rank(gathered, request, model, trace)
    answer = (gathered.cues, gathered.windows, gathered.about_assistant)
    if (
        without_range is not None
        and not floor.clears(ranked, request, scored, *answer)
        and floor.clears(without_range, request, scored, *answer)
    ):
        # Nothing in the named range clears the minimum relevance while something outside it
        # does: the range was misremembered ("a month ago" for six weeks), or holds nothing on the
        # subject. Put first, its items emptied the answer (LongMemEval dev asked from the wrong
        # day, offline: any@5 0.875 against 0.925 in the model's order; docs/BENCHMARKS.md).
        # (A question that names a range asks no slot, ``gather``: no answer here is one by a rule.)
        trace.notes.append(
            "nothing in the named time range clears the minimum relevance: answered in the model's order"
        )
        ranked = without_range
    ranked = fusion.reranked(request.searched, ranked, reranker, rerank_top_n, scored, trace)
    slot_found = bool(slots.holding(ranked, gathered.asked_slot))
    chosen, below = floor.fill(
        ranked, request, scored, gathered.cues, gathered.windows, trace, gathered.about_assistant, slot_found
    )
    return answered(trace, gathered.cues, gathered.windows, chosen, below, scored)
