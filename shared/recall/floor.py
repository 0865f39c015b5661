"""The relevance floor: recall returns fewer than k items, or none, rather than filler.

The searches always find something (the nearest vectors of any query), so without a floor a
recall of k items pads its answer with whatever lies closest. A candidate is left out when

- **nothing clears the minimum**: the best probability of relevance of the answer the other
  rules leave (``shared.recall.relevance``, calibrated on the training split) is under
  ``min_relevance`` (``Settings.recall_min_relevance``; the model file's default was chosen with
  the no-answer protocol: questions asked of another user's memory). The minimum decides whether
  there is an answer at all, not how long it is: once the best candidate clears it, the items
  after it are not cut for their own probability. Cutting each item at the minimum cut the
  second and third pieces of evidence that a question needs (LongMemEval dev all@10 0.75 -> 0.70
  at 0.02, offline) while a question nothing answers is told apart by its best candidate alone.
  An answer whose first item is the current value of the slot the question asks (``slots``) is
  never emptied;
- it is **chit-chat**: acknowledgements, greetings, laughter (``is_chit_chat``), or a short text
  with no cue key at all (no entity, no tag, no content word): nothing in it can answer;
- the query names a time range and has nothing else to match ("我8月10号做了什么？"), and it does
  not lie in that range: its closeness to a query with no content means nothing;
- it is an assistant's question whose answer (the user's next turn in its session) is a
  candidate too and not left out: the answer carries the question's cues
  (``shared.ingest.answers``) and says what the question only asked; unless the query asks what
  the assistant said (``shared.recall.roles``).

Exact keys never meet the floor: they answer before any path runs. The trace counts, by reason,
the items left out of the answer they would have been in (``Trace.cut``), and the best ones left
out are kept for the explanation (``BELOW_SHOWN``), so an answer never claims to have left out
nothing when it did.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from shared.language.cues import QueryCues
from shared.recall.explain import Scored, Trace
from shared.recall.fusion import select
from shared.recall.request import Candidate, RecallRequest

# How many of the candidates left out, best first, the explanation shows below the cut.
BELOW_SHOWN = 5


def cut_reason(c: Candidate, content_free_range: bool, scored: Scored) -> str | None:
    """Why ``c`` is left out whatever the others score, or None when it may fill a slot."""
    if scored.filler(c):
        return "chit_chat"
    if content_free_range and "time" not in c.paths:
        return "outside_time_range"
    return None


def nothing_clears(answer: Sequence[Candidate], request: RecallRequest, scored: Scored) -> bool:
    """Whether the best item of the ``answer`` recall would give is under the minimum relevance:
    then there is no answer."""
    floor = request.min_relevance or 0.0
    best = max((scored.probabilities.get(c.item.id, 0.0) for c in answer), default=0.0)
    return floor > 0.0 and bool(answer) and best < floor


def _turns(c: Candidate, step: int = 0) -> set[tuple[str, int]]:
    """The (session, seq) of the turns ``c`` stands for, moved on by ``step``."""
    return {(str(s["session_id"]), int(s["seq"]) + step) for s in c.item.sources if "seq" in s}


def _reasons(
    ranked: Sequence[Candidate],
    scored: Scored,
    cues: QueryCues,
    windows: Sequence[object],
    about_assistant: bool,
) -> dict[str, str]:
    """Why each candidate that may not fill a slot is left out, by id (the rules above but the
    minimum relevance)."""
    content_free_range = bool(windows) and not cues.keys()
    reasons = {c.item.id: reason for c in ranked if (reason := cut_reason(c, content_free_range, scored))}
    if not about_assistant:
        answers = {t for c in ranked if c.item.id not in reasons for t in _turns(c)}  # the turns kept
        for c in ranked:
            if c.item.id not in reasons and scored.asks(c.item.id) and _turns(c, 1) & answers:
                reasons[c.item.id] = "question_answered"
    return reasons


def clears(
    ranked: Sequence[Candidate],
    request: RecallRequest,
    scored: Scored,
    cues: QueryCues,
    windows: Sequence[object],
    about_assistant: bool = False,
) -> bool:
    """Whether the answer :func:`fill` would give from ``ranked`` is not emptied by the minimum
    relevance (its best item clears it, or no minimum applies, or it is empty anyway)."""
    reasons = _reasons(ranked, scored, cues, windows, about_assistant)
    answer = select([c for c in ranked if c.item.id not in reasons], request.k)
    return not nothing_clears(answer, request, scored)


def fill(
    ranked: Sequence[Candidate],
    request: RecallRequest,
    scored: Scored,
    cues: QueryCues,
    windows: Sequence[object],
    trace: Trace,
    about_assistant: bool = False,
    answered: bool = False,
) -> tuple[list[Candidate], list[Candidate]]:
    """Up to k of ``ranked`` (``fusion.select``) without what the floor leaves out, and the best
    :data:`BELOW_SHOWN` of what it left out of those k slots. ``trace.cut`` counts, by reason, the
    items left out of the answer they would otherwise have been in. ``answered``: the first item
    answers the query by a rule (the current value of the slot it asks), so the minimum relevance
    never empties the answer."""
    reasons = _reasons(ranked, scored, cues, windows, about_assistant)
    chosen = select([c for c in ranked if c.item.id not in reasons], request.k)
    # The minimum is met by the answer as it would be given, or there is none.
    emptied = chosen if not answered and nothing_clears(chosen, request, scored) else []
    reasons |= {c.item.id: "below_min_relevance" for c in emptied}
    chosen = [] if emptied else chosen
    would = select(ranked, request.k)
    left = [c for c in would if c.item.id in reasons]
    shown = {c.item.id for c in left}
    left += [c for c in emptied if c.item.id not in shown]
    trace.cut.update(Counter(reasons[c.item.id] for c in left))
    for c in left:
        scored.reasons[c.item.id] = reasons[c.item.id]
    return chosen, left[:BELOW_SHOWN]
