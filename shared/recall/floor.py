"""The relevance floor: recall returns fewer than k items rather than filler.

The fill search always finds something (the nearest vectors of any query), so without a floor a
recall of k items pads its answer with whatever lies closest: "lol ok", "好的，谢谢！", or a
memory far below the best match. A filler is left out when

- it is **chit-chat**: acknowledgements, greetings, laughter (``is_chit_chat``), or a text with no
  cue key at all (no entity, no tag, no content word): nothing in it can answer a question;
- the query names a time range and has nothing else to match ("我8月10号做了什么？"), and it does
  not lie in that range: its closeness to a query with no content means nothing;
- it is an assistant's question whose answer (the user's next turn in its session) ranks above it:
  the answer carries the question's cues (``shared.ingest.answers``) and says what the question
  only asked; unless the query asks what the assistant said (``shared.recall.roles``);
- its fused score is under ``floor_absolute`` (a lone weak match deep in one list);
- its fused score is under ``floor_relative`` x the best fused score, *and* none of its dense
  cosines reaches ``floor_dense`` x the best dense cosine: far below the best by every measure.

The last two spare what lies in a time range the query names (the range is the filter the query
asked for). Exact keys and confident cue hits never meet the floor: they are chosen before it.
The trace counts, by reason, the items left out of the answer they would have been in
(``Trace.cut``); an empty answer then says what was tried.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from shared.cues import QueryCues, cues_for_memory, entities, lexicon_tags
from shared.ingest.extraction import is_chit_chat
from shared.recall.explain import Fused, Trace
from shared.recall.fusion import keep_agreed_top, select
from shared.recall.request import Candidate, RecallRequest
from shared.recall.roles import is_assistant_question

DENSE_PATHS = ("vector", "turn_vector")  # the reasons' names: explain.CUT_REASONS


# Only a text this short can hold no cue key at all; a longer one is not read for cues (reading
# them costs a quarter of a millisecond, and recall checks every fused candidate).
SHORT_TEXT = 16


def is_filler_text(text: str) -> bool:
    """Chit-chat, or a short text without a single cue key: "lol ok", "哈哈", "好的，谢谢！"."""
    if is_chit_chat(text):
        return True
    return len(text) <= SHORT_TEXT and not cues_for_memory(text, lexicon_tags(text), entities(text))


def _dense(c: Candidate) -> float | None:
    scores = [c.scores[p] for p in DENSE_PATHS if p in c.scores]
    return max(scores) if scores else None


def cut_reason(
    c: Candidate,
    request: RecallRequest,
    fused: Fused,
    best: float,
    best_dense: float | None,
    content_free_range: bool,
) -> str | None:
    """Why ``c`` is left out, or None when it may fill a slot."""
    if is_filler_text(c.item.content):
        return "chit_chat"
    in_range = "time" in c.paths
    if content_free_range and not in_range:
        return "outside_time_range"
    if in_range:
        return None
    score = fused.fused.get(c.item.id, 0.0)
    if score < request.floor_absolute:
        return "below_absolute_floor"
    dense = _dense(c)
    close = dense is not None and best_dense is not None and dense >= request.floor_dense * best_dense
    if score < request.floor_relative * best and not close:
        return "below_relative_floor"
    return None


def _turns(c: Candidate, step: int = 0) -> set[tuple[str, int]]:
    """The (session, seq) of the turns ``c`` stands for, moved on by ``step``."""
    return {(str(s["session_id"]), int(s["seq"]) + step) for s in c.item.sources if "seq" in s}


def fill(
    ranked: Sequence[Candidate],
    request: RecallRequest,
    taken: Sequence[Candidate],
    fused: Fused,
    cues: QueryCues,
    windows: Sequence[object],
    trace: Trace,
    about_assistant: bool = False,
    agreed: Candidate | None = None,
) -> list[Candidate]:
    """The fillers that follow the ``taken`` (confident) items: ``fusion.select`` over ``ranked``
    without what the floor leaves out. ``trace.cut`` counts, by reason, the items left out of the
    answer they would otherwise have been in. ``agreed`` (what both plain searches put first) is
    kept unless the floor leaves it out (``fusion.keep_agreed_top``)."""
    best = max([fused.fused.get(c.item.id, 0.0) for c in [*taken, *ranked]], default=0.0)
    best_dense = max((d for c in [*taken, *ranked] if (d := _dense(c)) is not None), default=None)
    content_free_range = bool(windows) and not cues.keys()
    reasons: dict[str, str] = {}
    above = {t for c in taken for t in _turns(c)}  # the turns of what ranks above, kept
    for c in ranked:
        reason = cut_reason(c, request, fused, best, best_dense, content_free_range)
        if reason is None and not about_assistant and is_assistant_question(c) and _turns(c, 1) & above:
            reason = "question_answered"
        if reason is not None:
            reasons[c.item.id] = reason
        else:
            above |= _turns(c)
    would = select(ranked, request.k, taken=taken)
    trace.cut.update(Counter(reasons[c.item.id] for c in would if c.item.id in reasons))
    chosen = select([c for c in ranked if c.item.id not in reasons], request.k, taken=taken)
    if agreed is not None and agreed.item.id not in reasons:
        chosen = keep_agreed_top(chosen, ranked, agreed, request.k, taken)
    return chosen
