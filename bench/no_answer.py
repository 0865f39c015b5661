"""The no-answer protocol (../shared/bench/README.md) and choosing a slice of a LoCoMo-shaped file.

A question of one conversation asked of another conversation's user has no answer in that
memory: the right output is empty. For a floor at threshold ``t`` as recall applies it (an answer
whose best item scores below ``t`` is nothing; any other is kept whole: ``shared.recall.floor``),
the curve gives, for each ``t``:

- ``empty``: the share of those foreign queries left with no item;
- ``own_any@5``: recall_any@5 on the users' own questions (with evidence) under the same floor,
  and its drop from any@5 without one.

``t = 0`` is recall as it is (nothing cut). The thresholds are the distinct quantiles (every 5 %)
of all the scores seen, so the curve spans the run's own scale. Pure but for ``ask_foreign``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.locomo_data import Conversation

K = 5
TARGET_EMPTY = 0.60  # issue 30: >= 60 % of the foreign queries return nothing ...
TARGET_DROP = 0.01  # ... while own any@5 drops by <= 0.01
QUANTILES = tuple(i / 20 for i in range(1, 20))


def choose(
    convs: list[Conversation],
    samples: Sequence[str] | None,
    conversations: int | None,
    questions: int | None,
) -> list[Conversation]:
    """The given samples (file order; an unknown id is an error naming it), then the first
    ``conversations``, each with its first ``questions``."""
    if samples is not None:
        known = {c.sample_id for c in convs}
        missing = [s for s in samples if s not in known]
        if missing:
            from bench.locomo_data import LocomoDataError

            raise LocomoDataError(f"no sample {', '.join(missing)} in the data file")
        convs = [c for c in convs if c.sample_id in set(samples)]
    if conversations is not None:
        convs = convs[:conversations]
    if questions is not None:
        convs = [dataclasses.replace(c, questions=c.questions[:questions]) for c in convs]
    return convs


def ask_foreign(container: Any, convs: Sequence[Conversation], k: int, progress: bool) -> list[list[float]]:
    """Each conversation's questions asked of the next conversation's user (the last's of the
    first's), as cuemem's recall answers them: the item scores of each answer, in rank order."""
    from tqdm import tqdm

    from service.operations.recall import recall_for

    out: list[list[float]] = []
    for i, conv in enumerate(convs):
        other = convs[(i + 1) % len(convs)]
        for q in tqdm(
            conv.questions, desc=f"no-answer {conv.sample_id}→{other.sample_id}", unit="q",
            disable=not progress, file=sys.stderr,
        ):  # fmt: skip
            answer = recall_for(container, other.sample_id, q.text, k=k, now=other.now)
            out.append([float(item["score"]) for item in answer["items"]])
    return out


def _any_at(evidence: set[str], ranked: Sequence[Sequence[str]], scores: Sequence[float], t: float) -> bool:
    if not scores or max(scores) < t:
        return False  # no answer at this floor
    return any(evidence.intersection(dias) for dias in ranked[:K])


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def curve(
    own: Sequence[tuple[Sequence[str], Sequence[Sequence[str]], Sequence[float]]],
    foreign: Sequence[Sequence[float]],
) -> dict[str, Any]:
    """``own``: per question (evidence ids, cuemem's ranked dia ids per item, its item scores);
    ``foreign``: the item scores of each foreign query. Returns the curve and the best point that
    meets the target (``None`` when none does)."""
    scored = [(set(ev), ranked, scores) for ev, ranked, scores in own if ev]
    seen = [s for _, _, scores in scored for s in scores] + [s for scores in foreign for s in scores]
    thresholds = sorted({0.0, *(round(_quantile(seen, q), 6) for q in QUANTILES if seen)})
    base = sum(_any_at(ev, r, s, 0.0) for ev, r, s in scored) / len(scored) if scored else None
    points = []
    for t in thresholds:
        empty = sum(1 for scores in foreign if all(s < t for s in scores)) / len(foreign) if foreign else None
        own_any = sum(_any_at(ev, r, s, t) for ev, r, s in scored) / len(scored) if scored else None
        drop = None if own_any is None or base is None else round(base - own_any, 6)
        points.append({
            "threshold": t,
            "empty": None if empty is None else round(empty, 6),
            f"own_any@{K}": None if own_any is None else round(own_any, 6),
            "drop": drop,
        })  # fmt: skip
    meeting = [
        p for p in points
        if p["empty"] is not None and p["drop"] is not None
        and p["empty"] >= TARGET_EMPTY and p["drop"] <= TARGET_DROP
    ]  # fmt: skip
    return {
        "foreign_queries": len(foreign),
        "own_questions": len(scored),
        "target": f"empty >= {TARGET_EMPTY:.0%} of foreign queries with own any@{K} down by <= {TARGET_DROP}",
        "as_is": points[0],
        # Of the thresholds that meet the target, the one leaving the most foreign queries empty.
        "best_meeting_target": max(meeting, key=lambda p: (p["empty"] or 0.0, -(p["drop"] or 0.0)))
        if meeting
        else None,
        "curve": points,
    }
