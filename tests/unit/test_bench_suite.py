"""The suite's pure parts: the no-answer curve, the do-no-harm verdict and the set names."""

from __future__ import annotations

import pytest

from bench.no_answer import curve
from bench.suite import SETS, parse_sets, verdict


def test_the_curve_counts_empty_foreign_answers_and_own_recall_at_each_floor() -> None:
    own = [
        (["D1:1"], [["D1:1"], ["D1:2"]], [0.9, 0.2]),  # found first, high score
        (["D2:1"], [["D1:3"], ["D2:1"]], [0.5, 0.3]),  # found second, low score
        ([], [["D1:1"]], [0.8]),  # no evidence: not scored
    ]
    foreign = [[0.4, 0.1], [], [0.95]]
    out = curve(own, foreign)
    assert (out["foreign_queries"], out["own_questions"]) == (3, 2)
    points = {p["threshold"]: p for p in out["curve"]}
    # As is: one foreign query already empty; both own questions found.
    assert out["as_is"] == {"threshold": 0.0, "empty": pytest.approx(1 / 3), "own_any@5": 1.0, "drop": 0.0}
    # A floor of 0.5 empties the first foreign query (best 0.4) and keeps both own answers whole:
    # the second's best is 0.5, so its D2:1 (0.3) stays. At 0.8 the second answer is nothing.
    assert points[0.5]["empty"] == pytest.approx(2 / 3) and points[0.5]["own_any@5"] == 1.0
    assert points[0.5]["drop"] == 0.0
    higher = [p for t, p in points.items() if 0.5 < t <= 0.9]
    assert higher and all(p["own_any@5"] == 0.5 and p["drop"] == 0.5 for p in higher)
    # Every threshold is 0 or a score seen; the curve only goes down as the floor goes up.
    seen = {0.0, 0.9, 0.2, 0.5, 0.3, 0.8, 0.4, 0.1, 0.95}
    assert set(points) <= seen
    empties = [p["empty"] for p in out["curve"]]
    assert empties == sorted(empties)
    # 2/3 empty (>= 60 %) with no drop: 0.5 meets the target.
    assert out["best_meeting_target"] is not None and out["best_meeting_target"]["drop"] == 0.0


def test_the_curve_names_the_floor_that_meets_the_target() -> None:
    own = [(["D1:1"], [["D1:1"]], [0.9])]
    foreign = [[0.2], [0.3], [0.1], [0.95]]
    best = curve(own, foreign)["best_meeting_target"]
    assert best is not None and best["empty"] >= 0.6 and best["drop"] == 0.0
    assert 0.3 < best["threshold"] <= 0.9


@pytest.mark.parametrize(
    ("cuemem", "baselines", "expected"),
    [
        (0.5, [0.4, 0.5, 0.2], "holds"),
        (0.5000001, [0.5], "holds"),
        (0.45, [0.4, 0.5, None], "fails by 0.050"),
        (None, [0.4], "n/a"),
        (0.4, [None, None], "n/a"),
    ],
)
def test_do_no_harm_verdict(cuemem, baselines, expected) -> None:
    assert verdict(cuemem, baselines) == expected


def test_set_names() -> None:
    assert parse_sets("all") == list(SETS) == ["locomo", "longmemeval-dev", "madial-zh", "madial-en"]
    assert parse_sets("madial-en, locomo,madial-en") == ["madial-en", "locomo"]
    with pytest.raises(ValueError, match="unknown set madial, lme"):
        parse_sets("madial,lme")
    with pytest.raises(ValueError, match="none given"):
        parse_sets(" , ")
