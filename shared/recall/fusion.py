"""The paths' lists and the cut to k.

The memory and conversation-log searches are merged into one dense and one keyword list (the
relevance model reads each candidate's rank in them: ``shared.recall.features``); an optional
reranker reorders the model's top (``shared.recall.rerank``); then k are chosen without
near-duplicates, the newest statement of a slot first. Every list is ordered with a full tie-break
(score, then id), so the same state, query and ``now`` give the same answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

from shared.ports import Reranker
from shared.recall.explain import Scored, Trace
from shared.recall.request import Candidate
from shared.recall.rerank import rerank_order
from shared.vectors import cosine

DUPLICATE_COSINE = 0.97

Item = TypeVar("Item")


def merged(found: dict[str, list[Candidate]], a: str, b: str) -> list[Candidate]:
    """One ranking of the candidates found on paths ``a`` and ``b`` by the better of their two
    scores (cosines of one model; BM25 scores of the same query), ties by id.

    Memories and turns compete in one dense and one keyword list: a memory found both by its own
    vector and through its source turn is one piece of evidence, not two."""
    unique = {c.item.id: c for c in [*found[a], *found[b]]}

    def best(c: Candidate) -> float:
        return max(c.scores.get(a, 0.0), c.scores.get(b, 0.0))

    return sorted(unique.values(), key=lambda c: (-best(c), c.item.id))


def reranked(
    query: str,
    ranked: list[Candidate],
    reranker: Reranker | None,
    top_n: int,
    scored: Scored,
    trace: Trace,
) -> list[Candidate]:
    """The model's order with its top ``top_n`` reordered by the reranker, when one is configured;
    its scores go to ``scored.rerank``. A failed reranker leaves the order as it was, with a note."""
    if reranker is None or not ranked:
        return ranked
    t = time.perf_counter()
    reordered = rerank_order(query, [(c.item.id, c.item.content) for c in ranked], reranker, top_n=top_n)
    by_id = {c.item.id: c for c in ranked}
    scored.rerank = reordered.scores
    if reordered.note:
        trace.notes.append(reordered.note)
    trace.took("rerank_ms", t)
    return [by_id[i] for i in reordered.order]


def select(ranked: Sequence[Candidate], k: int, taken: Sequence[Candidate] = ()) -> list[Candidate]:
    """Up to k minus ``len(taken)`` of ``ranked`` to follow those already ``taken``, without
    near-duplicates, the newest statement of each slot first."""
    return newer_first_within_slots(diverse(list(ranked), k, taken))


def diverse(ranked: list[Candidate], k: int, taken: Sequence[Candidate] = ()) -> list[Candidate]:
    """Up to k minus ``len(taken)`` items of ``ranked`` to follow those already ``taken``,
    skipping near-duplicates of an item taken (same text, or cosine ≥ 0.97).

    An item whose source turns are all already behind items taken (a second memory drawn from
    the same turn, a turn a memory taken already quotes) adds no new evidence: it waits until
    the items that do add some have had their slots, and fills what is left, in rank order."""
    return new_evidence_first(ranked, k, _source_events, _near_duplicate, taken)


def new_evidence_first(
    ranked: Sequence[Item],
    k: int,
    sources: Callable[[Item], Collection[str]],
    duplicate: Callable[[Item, list[Item]], bool] = lambda item, chosen: False,
    taken: Sequence[Item] = (),
) -> list[Item]:
    """Up to k minus ``len(taken)`` of ``ranked`` in rank order, an item whose ``sources`` are all
    behind items already chosen waiting until the others have had their slots, a ``duplicate`` of
    one chosen skipped: :func:`diverse` over candidates, and ``cuemem bench train-ranker`` over
    the rows of a features file (their turns' dialogue ids), so that a model is chosen on the list
    recall gives."""
    chosen: list[Item] = list(taken)
    waiting: list[Item] = []
    covered = {e for c in chosen for e in sources(c)}
    for cand in ranked:
        if len(chosen) >= k:
            break
        if duplicate(cand, chosen):
            continue
        events = set(sources(cand))
        if events and events <= covered:
            waiting.append(cand)
            continue
        chosen.append(cand)
        covered |= events
    for cand in waiting:
        if len(chosen) >= k:
            break
        if not duplicate(cand, chosen):
            chosen.append(cand)
    return chosen[len(taken) :]


def newer_first_within_slots(chosen: list[Candidate]) -> list[Candidate]:
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


def _source_events(c: Candidate) -> set[str]:
    return {str(s["event_id"]) for s in c.item.sources if s.get("event_id")}


def _near_duplicate(cand: Candidate, chosen: list[Candidate]) -> bool:
    text = " ".join(cand.item.content.split()).lower()
    vec = cand.memory.embedding if cand.memory else None
    return any(
        text == " ".join(c.item.content.split()).lower()
        or (vec is not None and c.memory is not None and cosine(vec, c.memory.embedding) >= DUPLICATE_COSINE)
        for c in chosen
    )
