"""What recall says about its answer: each item's explanation (the paths that found it, their
scores, its probability of relevance and the features that moved it most) and the trace of the
whole recall (stage, cues, candidates per path, the floor and what it left just below the cut,
timings, notes on what was skipped or unavailable)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shared.language.cues import QueryCues
from shared.recall.deterministic import EXACT_KEY_SCORE
from shared.recall.filler import is_filler_text
from shared.recall.request import Candidate, RecallRequest, RecallResult

if TYPE_CHECKING:
    from shared.recall.relevance import RelevanceModel

# How a trace names each reason the relevance floor leaves an item out for (shared.recall.floor).
CUT_REASONS = {
    "chit_chat": "chit-chat",
    "outside_time_range": "outside the named time range",
    "question_answered": "assistant question whose answer is found",
    "below_min_relevance": "nothing reached the minimum relevance",
}
MOVED_SHOWN = 3  # the features an explanation names as having moved the item most
# The searches' scores, in the order an explanation lists them.
SEARCH_PATHS = ("vector", "keyword", "turn_vector", "turn_keyword", "turn_alone")


@dataclass
class Trace:
    """What one recall notes on its way: timings by stage, candidates per path, notes."""

    request: RecallRequest
    started: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)
    candidates: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Items the relevance floor left out of the answer they would have been in, by reason
    # (``shared.recall.floor``).
    cut: Counter[str] = field(default_factory=Counter)

    def took(self, key: str, since: float) -> None:
        self.timings[key] = (time.perf_counter() - since) * 1e3


def explain(c: Candidate) -> dict[str, Any]:
    out: dict[str, Any] = {"paths": list(c.paths), "matched_cues": list(c.matched), "cue_score": c.cue_score}
    for path in SEARCH_PATHS:
        if path in c.scores:
            out[f"{path}_score"] = round(c.scores[path], 6)
    if c.memory is not None:
        out["half_life_score"] = round(c.memory.score, 6)
    if c.item.role not in (None, "user"):
        out["role"] = c.item.role  # an assistant's turn (its questions: recall.roles)
    return out


def exact_answer(trace: Trace, exact: list[Candidate]) -> RecallResult:
    """An exact key answers alone, before any other path ran."""
    request = trace.request
    for c in exact:
        c.item.score = EXACT_KEY_SCORE
        c.item.explanation = {**explain(c), "ranked_by": "exact_key"}
    took = round((time.perf_counter() - trace.started) * 1e3, 3)
    public = {
        "stage": "deterministic",
        "query": request.query,
        "now": request.now.isoformat(),
        "user_id": request.user_id,
        "tenant_id": request.tenant_id,
        "exact_key": True,
        "candidates": {"exact": len(exact)},
        "timings_ms": {"total_ms": took},
        "notes": [],
    }
    return RecallResult("deterministic", [c.item for c in exact[: request.k]], public)


@dataclass
class Scored:
    """The model's numbers for the explanations: each candidate's features and probability of
    relevance, the reranker's score where one ran, and why the floor left an item out."""

    model: RelevanceModel
    rows: dict[str, list[float]] = field(default_factory=dict)
    probabilities: dict[str, float] = field(default_factory=dict)
    rerank: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    def asks(self, item_id: str) -> bool:
        """Whether the item is an assistant's turn that only asks (its feature, read once)."""
        row = self.rows.get(item_id)
        return row is not None and row[self.model.features.index("assistant_question")] > 0

    def filler(self, c: Candidate) -> bool:
        """Whether the item's text can answer nothing (its feature, read once: reading a short
        text's cue keys is most of what the check costs, and recall checks every candidate)."""
        row = self.rows.get(c.item.id)
        if row is None:
            return is_filler_text(c.item.content)
        return row[self.model.features.index("filler")] > 0

    def explained(self, c: Candidate) -> dict[str, Any]:
        out = {
            **explain(c),
            "ranked_by": "relevance_model",
            "relevance": round(self.probabilities[c.item.id], 6),
        }
        row = self.rows[c.item.id]
        out["features"] = {n: round(v, 6) for n, v in zip(self.model.features, row, strict=True) if v != 0.0}
        out["moved_by"] = [{"feature": n, "logit": v} for n, v in self.model.moved(row, MOVED_SHOWN)]
        if c.item.id in self.rerank:
            out["rerank_score"] = round(self.rerank[c.item.id], 6)
        return out


def _below(c: Candidate, scored: Scored) -> dict[str, Any]:
    """An item left just below the cut: enough to see what it was and why it is not in."""
    reason = scored.reasons.get(c.item.id, "")
    return {
        "id": c.item.id,
        "type": c.item.type,
        "content": c.item.content[:200],
        "relevance": round(scored.probabilities.get(c.item.id, 0.0), 6),
        "reason": reason,
        "why": CUT_REASONS.get(reason, reason),
    }


def answered(
    trace: Trace,
    cues: QueryCues,
    windows: Sequence[tuple[Any, Any]],
    chosen: list[Candidate],
    below: list[Candidate],
    scored: Scored,
) -> RecallResult:
    """The result: the items in the model's order, each explained, and the trace."""
    for c in chosen:
        c.item.score = scored.probabilities[c.item.id]
        c.item.explanation = scored.explained(c)
    stage = "ranked" if chosen else "none"
    trace.took("total_ms", trace.started)
    request, notes = trace.request, trace.notes
    public = {
        "stage": stage,
        "query": request.query,
        "now": request.now.isoformat(),
        "user_id": request.user_id,
        "tenant_id": request.tenant_id,
        "time_windows": [[s.isoformat(), e.isoformat()] for s, e in windows],
        "cues": {
            "entities": list(cues.entities),
            "tags": list(cues.tags),
            "type_hints": list(cues.type_hints),
            "keywords": list(cues.keywords),
        },
        "candidates": trace.candidates,
        "model": scored.model.version,
        "best_relevance": round(max(scored.probabilities.values(), default=0.0), 6),
        "floor": {
            "min_relevance": request.min_relevance,
            "cut": dict(sorted(trace.cut.items())),
            "cut_reasons": {r: CUT_REASONS.get(r, r) for r in sorted(trace.cut)},
            "below_cut": [_below(c, scored) for c in below],
        },
        "timings_ms": {k: round(v, 3) for k, v in trace.timings.items()},
        "notes": notes,
    }
    cut = sum(trace.cut.values())
    if cut:
        notes.append(f"{cut} item{'s' if cut > 1 else ''} left out by the relevance floor: " + ", ".join(
            f"{n} {CUT_REASONS.get(reason, reason)}" for reason, n in sorted(trace.cut.items())
        ))  # fmt: skip
    if not chosen:
        tried = len(scored.probabilities)
        # The best of the answer the floor emptied, not of chit-chat it never counted.
        floored = [
            scored.probabilities.get(c.item.id, 0.0)
            for c in below
            if scored.reasons.get(c.item.id) == "below_min_relevance"
        ]
        if floored:
            why = (
                f"the best of {tried} candidate{'s' if tried != 1 else ''} had relevance {max(floored):.3f}, "
                f"under the minimum {(request.min_relevance or 0.0):.3f}"
            )
        elif tried:
            why = (
                f"none of {tried} candidate{'s' if tried != 1 else ''} is more than chit-chat or out of range"
            )
        else:
            why = "no path found a candidate"
        notes.append("nothing remembered answers this: " + why)
    return RecallResult(stage, [c.item for c in chosen], public)
