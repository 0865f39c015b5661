"""`cuemem bench train-ranker` scores a model on the list recall gives: a candidate whose turns
are all behind candidates before it waits (shared.recall.fusion.new_evidence_first), so a model
is chosen on what users get, not on the raw ranking."""

from __future__ import annotations

from typing import Any

from bench.ranker import evaluate, no_answer_curve
from shared.recall.features import FEATURES
from shared.recall.relevance import RelevanceModel

N = len(FEATURES)
DENSE = FEATURES.index("dense")


def _by_dense() -> RelevanceModel:
    weights = tuple(10.0 if i == DENSE else 0.0 for i in range(N))
    return RelevanceModel(FEATURES, (0.0,) * N, (1.0,) * N, weights, -5.0, 0.0, "fake", "emb")


def _cand(dense: float, dias: list[str], kind: str = "turn") -> dict[str, Any]:
    row = [0.0] * N
    row[DENSE] = dense
    return {"dias": dias, "tokens": 10, "type": kind, "row": row}


def _line(foreign: bool = False) -> dict[str, Any]:
    """The first evidence turn, four memories quoting only it, then the second evidence turn
    sixth: in the model's order all@5 misses it, in recall's it is second."""
    first = _cand(0.9, ["D1:1"])
    quoting = [_cand(0.8 - 0.01 * i, ["D1:1"], "memory") for i in range(4)]
    second = _cand(0.5, ["D2:4"])
    return {
        "set": "longmemeval-dev", "sample": "s1", "question": 0, "category": 1,
        "evidence": [] if foreign else ["D1:1", "D2:4"], "foreign": foreign,
        "candidates": [first, *quoting, second],
    }  # fmt: skip


def test_offline_all_at_5_counts_the_turn_recall_moves_up_past_candidates_it_already_covers() -> None:
    got = evaluate(_by_dense(), [_line()])
    assert got["all@5"] == 1.0 and got["any@5"] == 1.0
    curve = no_answer_curve(_by_dense(), [_line(), _line(foreign=True)])
    assert curve[0]["threshold"] == 0.0 and curve[0]["all@5"] == 1.0
