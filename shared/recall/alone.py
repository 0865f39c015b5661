"""A candidate's turns by themselves: the cosine of the question to each turn embedded alone.

The conversation log's point for a turn holds its context window (the turns before it, then the
turn: ``shared/indexing/turn_windows.py``), and a window's score stands for every turn it holds
(``search._turns_found``). That is what lets "yes, the blue one" be found by the question it
answers, and also what lets a turn's later neighbours, whose windows quote it, score as it does:
three of the top five from one session where the evidence lies in three sessions. The turn by
itself, as a plain dense search embeds it, tells the two apart. With ``turn_alone_vector`` on,
ingest embeds each turn alone too (``shared.ingest.embed``) and recall gives every candidate the
best cosine of the query to its source turns' alone vectors, as the score of the path
``turn_alone``: in its explanation, and for the relevance model to weigh.

Measured offline on the dense turn search alone (docs/BENCHMARKS.md, "A turn by itself beside its
window"): ranking LoCoMo's turns by 0.25 × the alone cosine + 0.75 × the window's (lent) cosine
gives any@5 0.652 against 0.597 for the windows (all 10 conversations); neither a vector made of
the two nor a window built from its turns' alone vectors does as well as the window.

Not a search: the candidates are the other paths'; this reads the vectors of their turns only
(one read, scoped to the user), so the cost is one query and a product per candidate turn.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from shared.recall.explain import Trace
from shared.recall.request import Candidate, Pool, RecallRequest
from shared.storage import UnitOfWork

ALONE_PATH = "turn_alone"


def source_turns(c: Candidate) -> list[str]:
    """The event ids of the turns a candidate stands for (its item's sources)."""
    return [str(s["event_id"]) for s in c.item.sources if s.get("event_id")]


def score_alone(
    uow: UnitOfWork, request: RecallRequest, vector: Sequence[float] | None, pool: Pool, trace: Trace
) -> None:
    """Give each pooled candidate the best cosine of ``vector`` to its source turns' alone vectors
    (``c.scores[ALONE_PATH]``); a candidate none of whose turns has one gets none. Nothing without
    the request's ``turn_alone`` or a query vector."""
    if not request.turn_alone or vector is None:
        return
    ids = sorted({e for c in pool.values() for e in source_turns(c)})
    if not ids:
        return
    t = time.perf_counter()
    scores = uow.turn_index.alone_scores(request.tenant_id, request.user_id, ids, vector)
    trace.took("alone_ms", t)
    for c in pool.values():
        found = [scores[e] for e in source_turns(c) if e in scores]
        if found:
            c.scores[ALONE_PATH] = max(found)
