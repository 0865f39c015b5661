"""Recall in-process, for apps and agent tools: one call, JSON-ready output with a prompt block.

    from workers.bootstrap import build_container
    from service.operations.recall import recall_for

    c = build_container()  # CUEMEM_* settings
    out = recall_for(c, "u42", "我不吃什么？", k=5, session_id="chat-7", budget_tokens=400)
    out["items"]   # as `cuemem recall --json`
    out["prompt"]  # "[长期记忆 - 用户偏好]\\n- 我不吃香菜 (2026-11-01)"

A recall changes no memory; ``reinforce=True`` counts the memories it returns as used (their access
count, and so their score, goes up), for a caller that puts them to use.

Wire it into the agent tools with
``MemoryTools(lambda q, k, s: recall_for(c, "u42", q, k=k, session_id=s), publisher, "u42", "chat-7")``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from infra import tracing
from service.operations.ports import Dispatching, RecallPorts
from shared.queues import IndexKind, TaskName
from shared.recall.cascade import gather, recall
from shared.recall.explain import Trace
from shared.recall.prompt import DEFAULT_PROMPT_BUDGET, fit_budget, prompt_block
from shared.recall.request import RecallAsk, RecallRequest, RecallResult, parse_recall
from shared.storage import FollowUp, UnitOfWork, check_embedding_model

log = logging.getLogger(__name__)

# The item type of a turn found in the working memory: not a stored memory, nothing to count.
WORKING = "working"


# How long a process trusts a passed model check: the stored model changes only with a reindex,
# and re-reading it on every recall was a Postgres round trip per query.
MODEL_RECHECK_S = 30.0


def check_model_cached(container: RecallPorts, monotonic: Callable[[], float] = time.monotonic) -> None:
    """Refuse to search vectors of another model (``shared.storage.check_embedding_model``; the fix
    is `cuemem reindex`). A passed check holds for ``MODEL_RECHECK_S`` (on ``monotonic``) in this
    process; a failed one is never remembered."""
    if monotonic() < container.model_checked_until:
        return
    with container.uow() as uow:
        check_embedding_model(uow.meta, container.embedder.model_name)
    container.model_checked_until = monotonic() + MODEL_RECHECK_S


def recall_for(
    container: RecallPorts,
    user_id: str,
    query: str,
    *,
    k: int = 5,
    now: datetime | None = None,
    session_id: str | None = None,
    budget_tokens: int | None = None,
    include_archived: bool = False,
    reinforce: bool = False,
    include_history: bool = False,
    tenant_id: str | None = None,
) -> dict[str, Any]:
    """Recall for one user of ``tenant_id`` (default: the container's tenant, ``CUEMEM_TENANT_ID``):
    the library's form of :func:`answer_recall`, its arguments checked by
    :func:`shared.recall.request.parse_recall` as every entry point's are.

    Raises :class:`shared.events.InvalidInput` (a ``ValueError``) naming each bad argument (an
    empty or over-long query, a ``k`` outside 1..200, an id outside the safe alphabet...), and
    :class:`shared.ports.EmbeddingModelMismatch` when the stored vectors are of another model.
    """
    asked = parse_recall(
        user_id=user_id,
        query=query,
        k=k,
        now=now,
        session_id=session_id,
        budget_tokens=budget_tokens,
        include_archived=include_archived,
        include_history=include_history,
        reinforce=reinforce,
        tenant_id=tenant_id or container.settings.tenant_id,
        max_id_chars=container.settings.max_id_chars,
    )
    return answer_recall(container, asked)


def answer_recall(container: RecallPorts, asked: RecallAsk) -> dict[str, Any]:
    """Answer a checked recall (:func:`shared.recall.request.parse_recall`: the HTTP API, MCP,
    the CLI and :func:`recall_for` all build it there): the public result plus ``"prompt"`` and
    ``"user_offset_s"`` (the user's zone, seconds east of UTC: ``EventRepository.user_offset``,
    None when the user has no turn of role user; the zone the block's dates are in, for a caller
    that builds its own block from the items with :func:`shared.recall.prompt.prompt_block`).

    ``asked.statuses`` says what may be returned (``include_archived`` adds archived memories,
    ``include_history`` every past statement, each item marked by its ``status``). Recall is
    read-only: it changes no memory. With ``reinforce`` the caller says it uses what it gets, and
    the memories returned count as used: the task ``memory.reinforce`` is enqueued with the
    recall's id (``trace["recall_id"]``) and ``now``, and recall does not wait for it.

    ``now`` defaults to the container's clock, the tenant to the container's. With
    ``budget_tokens``, the items are cut with :func:`shared.recall.prompt.fit_budget` (contents in
    rank order, skipping what does not fit) and the prompt block gets the same budget (its headers
    and dates count too, so it may hold fewer items); without, the items are the top ``k`` and the
    block has the default budget (:data:`shared.recall.prompt.DEFAULT_PROMPT_BUDGET`). The block's
    language follows the query; its dates are in the user's zone (``EventRepository.user_offset``).
    """
    tenant_id = asked.tenant_id or container.settings.tenant_id
    user_id, query, k, budget_tokens = asked.user_id, asked.query, asked.k, asked.budget_tokens
    check_model_cached(container)
    index = container.search_index()
    request = RecallRequest(
        tenant_id=tenant_id,
        user_id=user_id,
        query=query,
        now=asked.now or container.clock(),
        k=k,
        session_id=asked.session_id,
        candidates=container.settings.recall_candidates,
        min_relevance=container.settings.recall_min_relevance,
        query_lines=container.settings.recall_query_lines,
        working_turns=container.settings.working_memory_turns,
        statuses=asked.statuses,
        turn_alone=container.settings.turn_alone_vector,
    )
    traced = (
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": "cuemem",
            "cuemem.tenant_id": tenant_id,
            "cuemem.user_id": user_id,
            "cuemem.recall.k": k,
        }
        if tracing.enabled()
        else None
    )
    with tracing.span("retrieval cuemem", traced) as current, container.uow() as uow:
        result = recall(
            uow,
            request,
            embedder=container.embedder,
            index=index,
            working_memory=container.working_memory,
            turn_index=container.search_index(IndexKind.TURNS),
            reranker=container.reranker(),
            rerank_top_n=container.settings.rerank_top_n,
        )
        if current is not None:
            _trace_answer(uow, current, request, result)
        # The prompt block dates each memory by the user's clock, not UTC's (shared.zones).
        user_offset = uow.events.user_offset(tenant_id, user_id)
    budget_trace: dict[str, int] | None = None
    if budget_tokens is not None:
        kept = fit_budget(result.items, budget_tokens)
        budget_trace = {"tokens": budget_tokens, "kept": len(kept), "dropped": len(result.items) - len(kept)}
        result = dataclasses.replace(result, items=kept)
    items = list(result.items)
    out = result.to_public()
    trace = out.setdefault("trace", {})
    if asked.reinforce:
        trace["recall_id"] = enqueue_reinforcement(container, request, items)
    trace["vector_backend"] = getattr(index, "backend", "qdrant-server")
    trace["embedding_model"] = container.embedder.model_name
    if budget_trace is not None:
        trace["budget"] = budget_trace
    out["user_offset_s"] = user_offset
    out["prompt"] = prompt_block(
        items,
        query=query,
        budget_tokens=DEFAULT_PROMPT_BUDGET if budget_tokens is None else budget_tokens,
        offset_s=user_offset,
    )
    return out


def recall_candidates(
    container: RecallPorts, user_id: str, query: str, *, now: datetime, tenant_id: str | None = None
) -> list[tuple[Any, list[float]]]:
    """Every candidate the paths propose for ``query``, with its row of relevance features
    (``shared.recall.features.FEATURES``), before any model or floor: what the relevance model is
    fitted on (``cuemem bench train-ranker``). Read-only."""
    check_model_cached(container)
    tenant_id = tenant_id or container.settings.tenant_id
    request = RecallRequest(
        tenant_id=tenant_id,
        user_id=user_id,
        query=query,
        now=now,
        candidates=container.settings.recall_candidates,
        working_turns=container.settings.working_memory_turns,
        query_lines=container.settings.recall_query_lines,
        turn_alone=container.settings.turn_alone_vector,
    )
    with container.uow() as uow:
        gathered = gather(
            uow,
            request,
            Trace(request),
            embedder=container.embedder,
            index=container.search_index(),
            working_memory=container.working_memory,
            turn_index=container.search_index(IndexKind.TURNS),
        )
    rows = gathered.features(request)
    return [(gathered.pool[i].item, rows[i]) for i in sorted(rows)]


def _trace_answer(uow: UnitOfWork, current: Any, request: RecallRequest, result: RecallResult) -> None:
    """The recall's span: what answered, and links to the traces of the turns it drew on (the
    sources of the memories returned, the turns themselves)."""
    events: list[str] = []
    for item in result.items:
        events += [
            s["event_id"]
            for s in getattr(item, "sources", None) or []
            if isinstance(s, dict) and "event_id" in s
        ]
        if getattr(item, "type", None) == "turn":
            events.append(item.id)
    linked = tracing.link_to(current, uow.traces.of_events(request.tenant_id, request.user_id, events))
    tracing.set_attributes(
        current,
        {
            "cuemem.recall.stage": result.stage,
            "cuemem.recall.items": len(result.items),
            "cuemem.recall.ids": [str(item.id) for item in result.items],
            "cuemem.recall.linked_turns": linked,
            **{f"cuemem.recall.{k}": float(v) for k, v in result.trace.get("timings_ms", {}).items()},
        },
    )


def enqueue_reinforcement(container: Dispatching, request: RecallRequest, items: list[Any]) -> str | None:
    """Send ``memory.reinforce`` for the long-term memories among ``items``; returns the recall id.

    Fire and forget: recall answers whether or not the message could be sent (a lost
    reinforcement costs a little ranking, a failed recall costs the answer). The id is fresh per
    call, so two recalls count twice and one redelivered message counts once.
    """
    # Raw turns (working memory, the conversation log) are not memories: nothing to reinforce.
    ids = sorted({item.id for item in items if item.type not in (WORKING, "turn")})
    if not ids:
        return None
    recall_id = str(uuid.uuid4())
    task = FollowUp(
        TaskName.REINFORCE.value,
        (recall_id, request.tenant_id, request.user_id, ids, request.now.isoformat()),
    )
    try:
        container.dispatch([task])
    except Exception:
        log.warning("recall %s: could not enqueue its reinforcement", recall_id, exc_info=True)
        return None
    return recall_id
