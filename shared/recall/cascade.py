"""Recall: exact keys and cue matches answer first; vector and keyword search fill in.

An exact key (a memory id, an event id) answers alone. Stage 1 (``deterministic``) scores the
user's memories that share cue keys with the query (weighted by rarity), that fall in a time range
the query names (``windows``), or whose type it hints at, plus the conversation's working memory,
so a turn published a moment ago is found before any worker ran (read-your-writes). Hits
reaching ``CONFIDENT`` answer first; when they fill all k slots, nothing else runs.

Otherwise stage 2 fills the slots left, all scoped to the tenant and user in the adapters
(``search``): dense and BM25 keyword search over memories; the same two over the conversation log
(every recorded turn, its own index), where a turn that became a memory lends its rank to that
memory and any other turn is an item of type ``turn``; the named time ranges ranked by meaning;
and, for a follow-up, the user's newest memories. ``fusion`` fuses the lists by weighted reciprocal
rank, leaned by the half-life score, a type weight and who said it (``roles``: an assistant's
question counts half), optionally reranks them, and cuts to k without near-duplicates and above
the relevance floor (``floor``: no chit-chat, nothing far below the best); ``explain`` says why
each item is there and what the floor left out.
"""

from __future__ import annotations

import time

from shared.cues import query_cues
from shared.ports import Embedder, Reranker, VectorIndex, WorkingMemory
from shared.recall import deterministic as stage1
from shared.recall import floor, fusion, roles, windows
from shared.recall.explain import Fused, Trace, answered, exact_answer
from shared.recall.request import RecallRequest, RecallResult
from shared.recall.rerank import DEFAULT_TOP_N
from shared.recall.search import CONVERSATION_LOG, MEMORIES, SearchQuery, embed_query, search
from shared.recall.sparse import sparse_query
from shared.storage import UnitOfWork


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
    trace = Trace(request)
    exact = stage1.exact_key(uow, request)
    if exact:
        return exact_answer(trace, exact)
    times = windows.named_times(request.query, request.now)
    cues = query_cues(times.content)
    trace.took("cues_ms", trace.started)

    # Stage 1: cue matches in long-term memory, in the named time ranges and in the working memory.
    t = time.perf_counter()
    weights, pool = stage1.cue_matches(uow, request, cues)
    stage1.link_hop(uow, request, cues, weights, pool, trace.notes)
    # Items of a named range that also match the query's cues are cue hits of this stage; the
    # rest wait for stage 2, which ranks the range by meaning.
    in_window = windows.window_items(uow, request, times.windows, weights, with_turns=turn_index is not None)
    windows.enter_cue_matches(pool, in_window)
    stage1.boost_type_hints(pool, cues)
    turns = stage1.working_turns(uow, request, working_memory, trace.notes)
    stage1.add_working_turns(pool, turns, weights)
    trace.took("deterministic_ms", t)
    cue_ranked = stage1.ranked_by_cues(pool)
    trace.candidates.update(
        cue=sum(1 for c in cue_ranked if "cue" in c.paths),
        link=sum(1 for c in cue_ranked if "link" in c.paths),
        time=sum(1 for c in cue_ranked if "time" in c.paths),
        working=len(turns),
    )
    # An assistant's question never answers first, unless the query asks what it said.
    about_assistant = roles.asks_assistant(request.query)
    confident = [c for c in stage1.confident_hits(cue_ranked) if roles.may_answer_first(c, about_assistant)]
    answer = fusion.select(confident, request.k)
    if len(answer) >= request.k:  # confident hits fill every slot: no search at all
        return answered(trace, cues, times.windows, cue_ranked, answer, [], Fused())

    # Stage 2: vector, keyword, conversation-log, time and recency paths, fused with the cue list.
    vector = embed_query(request, embedder, index or turn_index, trace)
    query = SearchQuery(vector, sparse_query(times.content))
    found = search(uow, request, [(MEMORIES, index), (CONVERSATION_LOG, turn_index)], query, pool, trace)
    window_ranked = windows.window_ranked(in_window, vector, pool)
    trace.candidates["time"] = sum(1 for c in pool.values() if "time" in c.paths)
    follow_up = windows.is_follow_up(cues, times)
    recent_ranked = windows.recent_candidates(uow, request, pool) if follow_up else []
    trace.candidates["recent"] = len(recent_ranked)
    dense = fusion.merged(found, MEMORIES.dense, CONVERSATION_LOG.dense)
    keyword = fusion.merged(found, MEMORIES.keyword, CONVERSATION_LOG.keyword)
    ranked, fused = fusion.fuse(
        pool,
        cue_ranked,
        dense,
        keyword,
        recent_ranked,
        window_ranked,
        about_assistant,
    )
    ranked = fusion.reranked(request.query, ranked, reranker, rerank_top_n, fused, trace)
    # Confident cue hits answer first; the fused search fills the slots they leave, above the floor.
    taken = {c.item.id for c in answer}
    rest = [c for c in ranked if c.item.id not in taken]
    agreed = fusion.agreed_top(dense, keyword)
    fillers = floor.fill(rest, request, answer, fused, cues, times.windows, trace, about_assistant, agreed)
    return answered(trace, cues, times.windows, cue_ranked, answer, fillers, fused)
