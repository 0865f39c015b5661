"""Reordering recall's top candidates with an optional cross-encoder (``shared.ports.Reranker``).

Off by default (``CUEMEM_RERANK_URL`` unset: ``Container.reranker()`` is None). The one function
recall calls, after fusion and before cutting to k::

    from shared.recall.rerank import rerank_order

    result = rerank_order(request.query, [(c.id, c.content) for c in ranked], reranker, top_n=20)
    ranked = [by_id[i] for i in result.order]           # same ids, new order
    for c in ranked:
        if c.id in result.scores:                       # only the top N were scored
            c.explanation["rerank_score"] = result.scores[c.id]
    if result.note:
        trace["notes"].append(result.note)              # the reranker failed: order kept

Contract:

* ``items`` are ``(id, text)`` pairs in their current rank order (best first); ids are unique.
* Only the first ``top_n`` are sent to the reranker (a cross-encoder costs per document); they are
  reordered by its score, highest first, ties keeping their previous relative order. The rest
  follow unchanged. ``order`` always holds every id exactly once.
* With ``reranker`` None, or no items, nothing is called: the order is unchanged, no note.
* A reranker that raises, or answers the wrong number of scores or a non-finite score, never fails
  recall: the previous order comes back with ``scores`` empty and ``note`` saying why.

No I/O here: the reranker adapter (``workers/endpoints/rerankers/http.py``) does the HTTP and its retries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.ports import Reranker

DEFAULT_TOP_N = 20


@dataclass(frozen=True)
class RerankResult:
    order: list[str]  # every id of the input, once: the reranked top N, then the rest unchanged
    scores: dict[str, float] = field(default_factory=dict)  # rerank score per scored id
    note: str | None = None  # set when the reranker failed and the previous order was kept

    @property
    def applied(self) -> bool:
        return bool(self.scores)


def rerank_order(
    query: str,
    items: Sequence[tuple[str, str]],
    reranker: Reranker | None,
    *,
    top_n: int = DEFAULT_TOP_N,
) -> RerankResult:
    """The new order of ``items`` (``(id, text)``, best first) after reranking the first ``top_n``
    against ``query``; see the module docstring for the full contract.

    Raises ``ValueError`` only for caller errors: ``top_n`` under 1 or duplicate ids.
    """
    if top_n < 1:
        raise ValueError(f"top_n: must be at least 1, got {top_n}")
    ids = [item_id for item_id, _ in items]
    if len(set(ids)) != len(ids):
        raise ValueError("items: ids must be unique")
    if reranker is None or not items:
        return RerankResult(ids)
    head = list(items[:top_n])
    try:
        raw = reranker.rerank(query, [text for _, text in head])
    except Exception as exc:  # any failure of an optional stage must leave recall working
        return RerankResult(ids, note=f"reranker failed, order kept: {type(exc).__name__}: {exc}"[:300])
    problem = _invalid(raw, len(head))
    if problem:
        return RerankResult(ids, note=f"reranker answered unusably, order kept: {problem}")
    scores = [float(s) for s in raw]
    # Sort positions by score, highest first; the position itself breaks ties (a stable order).
    positions = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    order = [head[i][0] for i in positions] + ids[len(head) :]
    return RerankResult(order, {head[i][0]: scores[i] for i in range(len(head))})


def _invalid(scores: object, expected: int) -> str | None:
    if not isinstance(scores, Sequence) or isinstance(scores, str | bytes):
        return f"expected a list of scores, got {type(scores).__name__}"
    if len(scores) != expected:
        return f"{len(scores)} scores for {expected} documents"
    for i, s in enumerate(scores):
        if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s):
            return f"score {i} is {s!r}, not a finite number"
    return None
