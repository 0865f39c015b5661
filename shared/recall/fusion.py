"""Fusion: the paths' lists into one order, and the cut to k.

The lists are fused by weighted reciprocal rank and leaned by a prior (the half-life score and a
type weight); what lies in a time range the query names comes first; an optional reranker
reorders the top (``shared.recall.rerank``); then k are chosen without near-duplicates, the
newest statement of a slot first. Every list is ordered with a full tie-break (score, then id),
so the same state, query and ``now`` give the same answer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from shared.ingest.conflicts import cosine
from shared.ports import Reranker
from shared.recall.deterministic import cue_strength
from shared.recall.explain import Fused, Trace
from shared.recall.request import Candidate, Pool
from shared.recall.rerank import rerank_order
from shared.recall.roles import speaker_weight

RRF_K = 10  # sharper than the usual 60: a path's top hits should count; measured, see docs/BENCHMARKS.md
RECENT_WEIGHT = 0.5  # newness alone is weaker evidence than a match on words or meaning
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


def merged(found: dict[str, list[Candidate]], a: str, b: str) -> list[Candidate]:
    """One ranking of the candidates found on paths ``a`` and ``b`` by the better of their two
    scores (cosines of one model; BM25 scores of the same query), ties by id.

    Memories and turns compete in one dense and one keyword list: a memory found both by its own
    vector and through its source turn is one piece of evidence, not two."""
    unique = {c.item.id: c for c in [*found[a], *found[b]]}

    def best(c: Candidate) -> float:
        return max(c.scores.get(a, 0.0), c.scores.get(b, 0.0))

    return sorted(unique.values(), key=lambda c: (-best(c), c.item.id))


def prior(c: Candidate, about_assistant: bool = False) -> float:
    """How fusion leans: the item type's weight times 1 + SCORE_WEIGHT x the half-life score / 10,
    times the speaker's weight (an assistant's question counts half: ``shared.recall.roles``).

    The speaker's weight is no small lean: an assistant question shares the words of the user's
    question and must not outrank the user's answer."""
    score = c.memory.score if c.memory is not None else 0.0
    lean = TYPE_WEIGHTS.get(c.item.type, 1.0) * (1.0 + SCORE_WEIGHT * min(max(score, 0.0), 10.0) / 10.0)
    return lean * speaker_weight(c, about_assistant)


def fuse(
    pool: Pool,
    cue_ranked: list[Candidate],
    dense: list[Candidate],
    keyword: list[Candidate],
    recent: list[Candidate],
    window: list[Candidate],
    about_assistant: bool = False,
) -> tuple[list[Candidate], Fused]:
    """Every candidate of the lists in fused order, and the numbers behind it. A cue hit votes in
    proportion to its cue strength; the recency list at RECENT_WEIGHT. ``about_assistant``: the
    query asks what the assistant said, so its questions are not demoted."""
    rrf: dict[str, float] = {}
    paths = ((cue_ranked, 1.0), (dense, 1.0), (keyword, 1.0), (recent, RECENT_WEIGHT), (window, 1.0))
    for ranking, weight in paths:
        for rank, c in enumerate(ranking):
            w = weight * (cue_strength(c) if ranking is cue_ranked else 1.0)
            rrf[c.item.id] = rrf.get(c.item.id, 0.0) + w / (RRF_K + rank + 1)
    priors = {i: prior(pool[i], about_assistant) for i in rrf}
    fused = {i: v * priors[i] for i, v in rrf.items()}
    # Equal fused ranks go to the more important, then the newer memory, then the id.
    ranked = sorted(
        (pool[i] for i in fused), key=lambda c: (-round(fused[c.item.id], 9), *c.tie(), c.item.id)
    )
    if any("time" in c.paths for c in ranked):
        # The query names a time range and something falls in it: that is a filter, so what
        # lies inside comes first (in fused order), the rest after.
        ranked = [c for c in ranked if "time" in c.paths] + [c for c in ranked if "time" not in c.paths]
    return ranked, Fused(rrf, fused, priors)


def reranked(
    query: str,
    ranked: list[Candidate],
    reranker: Reranker | None,
    top_n: int,
    fused: Fused,
    trace: Trace,
) -> list[Candidate]:
    """The fused order with its top ``top_n`` reordered by the reranker, when one is configured;
    its scores go to ``fused.rerank``. A failed reranker leaves the order as it was, with a note."""
    if reranker is None or not ranked:
        return ranked
    t = time.perf_counter()
    reordered = rerank_order(query, [(c.item.id, c.item.content) for c in ranked], reranker, top_n=top_n)
    by_id = {c.item.id: c for c in ranked}
    fused.rerank = reordered.scores
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
    chosen: list[Candidate] = list(taken)
    waiting: list[Candidate] = []
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


def agreed_top(dense: Sequence[Candidate], keyword: Sequence[Candidate]) -> Candidate | None:
    """The item that both the dense and the keyword list put first, when they agree: a plain
    hybrid search would return it first."""
    if dense and keyword and dense[0].item.id == keyword[0].item.id:
        return dense[0]
    return None


def keep_agreed_top(
    chosen: list[Candidate],
    ranked: Sequence[Candidate],
    top: Candidate,
    k: int,
    taken: Sequence[Candidate] = (),
) -> list[Candidate]:
    """``chosen`` (the fillers after ``taken``) with ``top`` (``agreed_top``) when it is missing,
    so that fusion and the cut never lose what both plain searches put first. It takes the last
    filler's slot when all k are full, and the fillers keep their fused order. Nothing changes
    when its evidence is already in (an item kept cites its source turns)."""
    have = [*taken, *chosen]
    if any(c.item.id == top.item.id for c in have):
        return chosen
    events = _source_events(top)
    if events and events <= {e for c in have for e in _source_events(c)}:
        return chosen
    room = k - len(taken)
    if room <= 0:
        return chosen
    kept = chosen[: room - 1] if len(chosen) >= room else chosen
    order = {c.item.id: i for i, c in enumerate(ranked)}
    return sorted([*kept, top], key=lambda c: order.get(c.item.id, len(order)))


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
