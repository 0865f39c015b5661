"""What recall says about its answer: each item's explanation (the paths that found it, their
scores, what placed it) and the trace of the whole recall (stage, cues, candidates per path,
timings, notes on what was skipped or unavailable)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.cues import QueryCues
from shared.recall.deterministic import CONFIDENT, EXACT_KEY_SCORE
from shared.recall.request import Candidate, RecallRequest, RecallResult

# How a trace names each reason the relevance floor leaves an item out for (shared.recall.floor).
CUT_REASONS = {
    "chit_chat": "chit-chat",
    "outside_time_range": "outside the named time range",
    "question_answered": "assistant question answered above",
    "below_absolute_floor": "under the absolute floor",
    "below_relative_floor": "far below the best match",
}
# The searches' scores, in the order an explanation lists them.
SEARCH_PATHS = ("vector", "keyword", "turn_vector", "turn_keyword")


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


def explain(c: Candidate, rrf: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"paths": list(c.paths), "matched_cues": list(c.matched), "cue_score": c.cue_score}
    for path in SEARCH_PATHS:
        if path in c.scores:
            out[f"{path}_score"] = round(c.scores[path], 6)
    if c.memory is not None:
        out["half_life_score"] = round(c.memory.score, 6)
    if c.item.role not in (None, "user"):
        out["role"] = c.item.role  # an assistant's turn: its questions weigh less (recall.roles)
    if rrf is not None:
        out["rrf"] = round(rrf, 6)
    return out


def exact_answer(trace: Trace, exact: list[Candidate]) -> RecallResult:
    """An exact key answers alone, before any other path ran."""
    request = trace.request
    for c in exact:
        c.item.score = EXACT_KEY_SCORE
        c.item.explanation = {**explain(c, rrf=None), "ranked_by": "exact_key"}
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
class Fused:
    """Fusion's numbers for the explanations: each candidate's reciprocal-rank sum, its fused score
    (that sum times its prior), its prior, and the reranker's score where one ran."""

    rrf: dict[str, float] = field(default_factory=dict)
    fused: dict[str, float] = field(default_factory=dict)
    priors: dict[str, float] = field(default_factory=dict)
    rerank: dict[str, float] = field(default_factory=dict)


def answered(
    trace: Trace,
    cues: QueryCues,
    windows: list[tuple[datetime, datetime]],
    cue_ranked: list[Candidate],
    answer: list[Candidate],
    fillers: list[Candidate],
    fused: Fused,
) -> RecallResult:
    """The result: the answer-first cue hits, then the fill search's items, each explained, and
    the trace."""
    for c in answer:
        # An answer-first item keeps its place and its cue-scale score, but its explanation lists
        # every path that found it, including those the fill search ran afterwards.
        c.item.score = c.cue_score
        c.item.explanation = {**explain(c, rrf=fused.rrf.get(c.item.id)), "ranked_by": "cue"}
        if c.item.id in fused.fused:
            c.item.explanation["fused_score"] = round(fused.fused[c.item.id], 6)
    for c in fillers:
        c.item.score = fused.fused[c.item.id]
        c.item.explanation = {**explain(c, rrf=fused.rrf[c.item.id]), "ranked_by": "fused"}
        c.item.explanation["prior"] = round(fused.priors[c.item.id], 6)
        if c.item.id in fused.rerank:
            c.item.explanation["rerank_score"] = round(fused.rerank[c.item.id], 6)
    chosen = answer + fillers
    stage = "deterministic" if answer else "vector" if chosen else "none"
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
        "confident_threshold": CONFIDENT,
        "deterministic_items": len(answer),
        "filled_by_search": len(fillers),
        "floor": {
            "relative": request.floor_relative,
            "dense": request.floor_dense,
            "absolute": request.floor_absolute,
            "cut": dict(sorted(trace.cut.items())),
            "cut_reasons": {r: CUT_REASONS.get(r, r) for r in sorted(trace.cut)},
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
        unavailable = any("unavailable" in n for n in notes)
        searched = "every candidate the searches found was left out" if cut else "vector search found nothing"
        notes.append(
            "nothing matched: "
            + (
                "no cue of the query is stored for this user"
                if not cue_ranked
                else "cue matches were too weak"
            )
            + (f"; {searched}" if stage == "none" and not unavailable else "")
        )
    return RecallResult(stage, [c.item for c in chosen], public)
