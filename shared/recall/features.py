"""What the relevance model reads about each candidate: every path's say, the item, the query.

Every path of the cascade proposes candidates (cue keys, the link hop, the named time ranges, the
working memory, dense and keyword search over the memories and over the conversation log, the
newest memories for a follow-up); :func:`candidate_features` turns each one into a fixed row of
numbers (:data:`FEATURES`, in that order) for ``shared.recall.relevance``. Nothing here is a
weight: which signal counts how much is the model's to say, fitted on the training split
(``bench/ranker.py``).

Scores that differ in scale from query to query (BM25, cue sums) enter relative to the best of
the same query (the cue sum raw as well: its scale is the lexicon's, not the query's); ranks
enter as 1 / (1 + rank), 0 when the path did not find the item. Nothing enters that grows with
the length of the query or the item (raw BM25, token counts): a model fitted on short questions
extrapolated those to dialogue queries and lost its calibration there (docs/BENCHMARKS.md). The
features are computed from the pool and the paths' lists only, in a fixed order, so the same
state and query give the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from shared.language.cues import QueryCues
from shared.language.text import STOPWORDS, tokens
from shared.recall.alone import ALONE_PATH
from shared.recall.filler import is_filler_text
from shared.recall.request import Candidate, Pool, RecallRequest
from shared.recall.roles import is_assistant_question

DENSE_PATHS = ("vector", "turn_vector")
KEYWORD_PATHS = ("keyword", "turn_keyword")
MEMORY_TYPES = ("profile", "preference", "semantic", "fact", "task", "episodic")

FEATURES: tuple[str, ...] = (
    # dense search (cosines of one model), the better of memory and turn vector
    "dense",
    "dense_gap",  # the best dense cosine of the query minus this one (1 when not found)
    "dense_rank",
    "memory_vector",
    "turn_vector",
    # keyword search (BM25 over the user's points)
    "keyword_rel",  # BM25 / the query's best
    "keyword_rank",
    # cue keys and the paths of stage 1
    "cue",
    "cue_rel",
    "cue_rank",
    "cues_matched",
    "entities_matched",  # numbers, codes, names of the query the item holds as cue keys
    "tags_matched",  # lexicon tags of the query the item holds ("忌口" and "不吃香菜": diet)
    "type_hinted",  # the query hints at the item's type ("忌口": a preference)
    "query_words",  # the share of the query's content words found in the item's text
    "link",
    "in_time_range",
    "time_rank",
    "working",
    "recent_rank",
    "paths",  # how many of cue, dense and keyword found it
    "agreed_top",  # first in both the dense and the keyword list
    # the item
    *(f"type_{t}" for t in MEMORY_TYPES),
    "type_turn",
    "type_working",
    "assistant",
    "assistant_question",
    "filler",
    "half_life_score",
    "importance",
    "age_days",  # log(1 + days between the item's time and now)
    # its context: the session and the neighbouring turns
    "session_best_dense",
    "session_candidates",
    "neighbour_dense",  # the best dense cosine of a candidate at seq ± 1, ± 2 of the same session
    # its turns by themselves (``shared.recall.alone``; 0 and a gap of 1 when none has a vector)
    "turn_alone",
    "turn_alone_gap",  # the best alone cosine of the query minus this one
    # the query, and how peaked its results are (a question nothing answers finds a flat list)
    "dense_peak",  # the best dense cosine minus the fifth best
    "keyword_peak",  # the best BM25 over the fifth best (log)
    "query_cues_known",  # the share of the query's cue keys some memory of the user holds
    "query_entities_known",  # the same for its entities (names, numbers, codes); 1 without any
    "query_time_range",
    "query_about_assistant",
)


@dataclass(frozen=True)
class Lists:
    """Each path's ranking of the candidates it found, best first."""

    cue: Sequence[Candidate]
    dense: Sequence[Candidate]
    keyword: Sequence[Candidate]
    recent: Sequence[Candidate]
    window: Sequence[Candidate]


def _rr(rank: int | None) -> float:
    return 0.0 if rank is None else 1.0 / (1.0 + rank)


def _ranks(ranking: Sequence[Candidate]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, c in enumerate(ranking):
        out.setdefault(c.item.id, i)
    return out


def _best(c: Candidate, paths: Sequence[str]) -> float | None:
    found = [c.scores[p] for p in paths if p in c.scores]
    return max(found) if found else None


def _turns(c: Candidate) -> list[tuple[str, int]]:
    return [(str(s["session_id"]), int(s["seq"])) for s in c.item.sources if "seq" in s and "session_id" in s]


def _covered(words: Sequence[str], text: str) -> float:
    """The share of ``words`` found in ``text`` (a substring test: tokenising every candidate
    would cost more than the rest of the ranking)."""
    if not words:
        return 0.0
    lowered = text.lower()
    return sum(1 for w in words if w in lowered) / len(words)


def _log1p(x: float) -> float:
    return math.log1p(max(x, 0.0))


def query_shape(cues: QueryCues, windows: Sequence[object], about: bool, df: dict[str, int]) -> list[float]:
    """The query's own features. None grows with the query's length: a model fitted on short
    questions would extrapolate a length to a dialogue of hundreds of tokens (measured: its
    probabilities then fell for every candidate; docs/BENCHMARKS.md)."""
    keys = list(cues.keys())
    named = [k for k in keys if k.startswith("e:")]
    return [
        sum(1 for k in keys if df.get(k, 0) > 0) / len(keys) if keys else 1.0,
        sum(1 for k in named if df.get(k, 0) > 0) / len(named) if named else 1.0,
        1.0 if windows else 0.0,
        1.0 if about else 0.0,
    ]


def candidate_features(
    pool: Pool,
    lists: Lists,
    request: RecallRequest,
    cues: QueryCues,
    windows: Sequence[object],
    about_assistant: bool,
) -> dict[str, list[float]]:
    """Every pooled candidate's row of :data:`FEATURES`, by item id."""
    ranks = {name: _ranks(getattr(lists, name)) for name in ("cue", "dense", "keyword", "recent", "window")}
    dense = {i: d for i, c in pool.items() if (d := _best(c, DENSE_PATHS)) is not None}
    keyword = {i: s for i, c in pool.items() if (s := _best(c, KEYWORD_PATHS)) is not None}
    best_dense = max(dense.values(), default=0.0)
    best_keyword = max(keyword.values(), default=0.0)
    best_cue = max((c.cue_score for c in pool.values()), default=0.0)
    best_alone = max((c.scores[ALONE_PATH] for c in pool.values() if ALONE_PATH in c.scores), default=0.0)
    words = [w for w in dict.fromkeys(tokens(request.searched)) if w not in STOPWORDS]
    dense_sorted = sorted(dense.values(), reverse=True)
    keyword_sorted = sorted(keyword.values(), reverse=True)
    dense_peak = dense_sorted[0] - dense_sorted[min(4, len(dense_sorted) - 1)] if dense_sorted else 0.0
    keyword_peak = (
        math.log((keyword_sorted[0] + 1e-6) / (keyword_sorted[min(4, len(keyword_sorted) - 1)] + 1e-6))
        if keyword_sorted
        else 0.0
    )
    agreed = (
        lists.dense[0].item.id
        if lists.dense and lists.keyword and lists.dense[0].item.id == lists.keyword[0].item.id
        else None
    )
    # The context: the best dense cosine per session and per turn position among the candidates.
    session_best: dict[str, float] = {}
    session_count: dict[str, int] = {}
    at_turn: dict[tuple[str, int], float] = {}
    for i, c in pool.items():
        for session, seq in _turns(c):
            session_count[session] = session_count.get(session, 0) + 1
            d = dense.get(i)
            if d is not None:
                session_best[session] = max(session_best.get(session, d), d)
                at_turn[(session, seq)] = max(at_turn.get((session, seq), d), d)
    shape = query_shape(cues, windows, about_assistant, pool.cue_df)
    now = request.now.timestamp()
    out: dict[str, list[float]] = {}
    for i, c in pool.items():
        d = dense.get(i)
        kw = keyword.get(i)
        turns = _turns(c)
        sessions = {s for s, _ in turns}
        neighbours = [
            at_turn[(s, q + step)] for s, q in turns for step in (-2, -1, 1, 2) if (s, q + step) in at_turn
        ]
        kind = c.item.type
        age = max(now - datetime.fromisoformat(c.item.created_at).timestamp(), 0.0) / 86400.0
        paths = sum(1 for found in (c.cue_score > 0, d is not None, kw is not None) if found)
        out[i] = [
            d or 0.0,
            1.0 if d is None else best_dense - d,
            _rr(ranks["dense"].get(i)),
            c.scores.get("vector", 0.0),
            c.scores.get("turn_vector", 0.0),
            (kw or 0.0) / best_keyword if best_keyword > 0 else 0.0,
            _rr(ranks["keyword"].get(i)),
            c.cue_score,
            c.cue_score / best_cue if best_cue > 0 else 0.0,
            _rr(ranks["cue"].get(i)),
            float(sum(1 for m in c.matched if not m.startswith(("type:", "link:")))),
            float(sum(1 for m in c.matched if m.startswith("e:"))),
            float(sum(1 for m in c.matched if m.startswith("t:"))),
            1.0 if kind in cues.type_hints else 0.0,
            _covered(words, c.item.content),
            1.0 if "link" in c.paths else 0.0,
            1.0 if "time" in c.paths else 0.0,
            _rr(ranks["window"].get(i)),
            1.0 if "working" in c.paths else 0.0,
            _rr(ranks["recent"].get(i)),
            float(paths),
            1.0 if i == agreed else 0.0,
            *(1.0 if kind == t else 0.0 for t in MEMORY_TYPES),
            1.0 if kind == "turn" else 0.0,
            1.0 if kind == "working" else 0.0,
            1.0 if c.item.role == "assistant" else 0.0,
            1.0 if is_assistant_question(c) else 0.0,
            1.0 if is_filler_text(c.item.content) else 0.0,
            c.memory.score if c.memory is not None else 0.0,
            c.item.importance or 0.0,
            _log1p(age),
            max((session_best.get(s, 0.0) for s in sessions), default=0.0),
            float(max((session_count.get(s, 0) for s in sessions), default=0)),
            max(neighbours, default=0.0),
            c.scores.get(ALONE_PATH, 0.0),
            best_alone - c.scores[ALONE_PATH] if ALONE_PATH in c.scores else 1.0,
            dense_peak,
            keyword_peak,
            *shape,
        ]
    return out
