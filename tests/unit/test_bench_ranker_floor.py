"""`cuemem bench train-ranker --extend-floor`: a floor for pools smaller than the model's
``min_candidates``, chosen on those pools only by the rule of the model's floor (the highest
threshold that costs no set more than 0.01), never above it, applying from the fewest candidates
checked; weights and the large pools' floor stay, and when nothing holds nothing is written."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from bench.ranker_features import FORMAT
from bench.ranker_floor import extend_floor, refloor
from shared.recall.features import FEATURES
from shared.recall.relevance import RelevanceModel

N = len(FEATURES)
DENSE = FEATURES.index("dense")


def _model(min_candidates: int = 77, floor: float = 0.9) -> RelevanceModel:
    # The probability is the candidate's dense score: sigmoid(10 * dense - 5) is 0.5 at 0.5.
    weights = tuple(10.0 if i == DENSE else 0.0 for i in range(N))
    return RelevanceModel(
        FEATURES, (0.0,) * N, (1.0,) * N, weights, -5.0, floor, "relevance-lr-x", "emb", min_candidates
    )


def _cand(dense: float, dias: list[str]) -> dict[str, Any]:
    row = [0.0] * N
    row[DENSE] = dense
    return {"dias": dias, "tokens": 10, "type": "turn", "row": row}


def _line(name: str, sample: str, best: float, pool: int, foreign: bool = False) -> dict[str, Any]:
    """A question of ``pool`` candidates: the best scores ``best`` and is the evidence (own), the
    rest score 0.1 and cover other turns."""
    rest = [_cand(0.1, [f"D9:{i}"]) for i in range(pool - 1)]
    return {
        "set": name, "sample": sample, "asked_of": sample, "question": 0, "category": 1,
        "evidence": [] if foreign else ["D1:1"], "foreign": foreign,
        "candidates": [_cand(best, ["D1:1"]), *rest],
    }  # fmt: skip


def _features(path: Path, lines: list[dict[str, Any]]) -> Path:
    header = {
        "format": FORMAT,
        "features": list(FEATURES),
        "data_sha256": f"sha-{path.stem}",
        "samples": ["u1"],
    }
    path.write_text("\n".join(json.dumps(x) for x in [header, *lines]) + "\n", encoding="utf-8")
    return path


def _small_set(
    name: str, own: list[tuple[float, int]], foreign: list[tuple[float, int]]
) -> list[dict[str, Any]]:
    return [_line(name, f"u{i}", b, p) for i, (b, p) in enumerate(own)] + [
        _line(name, f"u1{i}", b, p, foreign=True) for i, (b, p) in enumerate(foreign)
    ]


def _write_model(tmp_path: Path, **changes: Any) -> Path:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(dataclasses.replace(_model(), **changes).to_json()), encoding="utf-8")
    return path


def test_small_pools_get_the_highest_floor_no_set_loses_an_answer_to(tmp_path: Path) -> None:
    model_path = _write_model(tmp_path)
    # Probabilities: dense 0.55 -> 0.622, 0.53 -> 0.574, 0.45 -> 0.378, 0.2 -> 0.047. Set a allows
    # up to 0.62 (its own best answers), set b up to 0.57: the floor is 0.57, and a's no-answer
    # question at 0.378 is left empty, b's at 0.622 is not.
    a = _features(tmp_path / "a.jsonl", _small_set("a", [(0.55, 14), (0.9, 30)], [(0.45, 14), (0.2, 20)]))
    # A pool at or over min_candidates is not this step's: its own question under every floor
    # neither lowers the choice nor sets the fewest.
    b = _features(
        tmp_path / "b.jsonl",
        _small_set("b", [(0.53, 12), (0.0, 77), (0.0, 90)], [(0.55, 12), (0.0, 80)]),
    )
    out = tmp_path / "out" / "model.json"
    result = extend_floor(model_path, [a, b], out)
    shipped = RelevanceModel.from_json(json.loads(out.read_text(encoding="utf-8")))
    assert (shipped.small_min_relevance, shipped.small_min_candidates) == (0.57, 12)
    assert (result["small_min_relevance"], result["small_min_candidates"]) == (0.57, 12)
    assert (shipped.weights, shipped.bias, shipped.min_relevance, shipped.min_candidates) == (
        _model().weights, -5.0, 0.9, 77
    )  # fmt: skip
    assert shipped.version.endswith("-floor0.9-small0.57from12")
    sets = shipped.provenance["floor_extended"]["sets"]
    assert [d["sha256"] for d in shipped.provenance["floor_extended"]["data"]] == ["sha-a", "sha-b"]
    assert {name: (c["own"], c["no_answer"], c["fewest_candidates"]) for name, c in sets.items()} == {
        "a": (2, 2, 14),
        "b": (1, 1, 12),
    }
    assert (sets["a"]["own_choice"], sets["b"]["own_choice"]) == (0.62, 0.57)
    assert (sets["a"]["at_floor"]["no_answer_empty"], sets["b"]["at_floor"]["no_answer_empty"]) == (1.0, 0.0)
    assert sets["a"]["at_floor"]["any@5_drop"] == sets["b"]["at_floor"]["any@5_drop"] == 0.0


def test_the_small_floor_is_never_above_the_models(tmp_path: Path) -> None:
    a = _features(tmp_path / "a.jsonl", _small_set("a", [(0.9, 14)], [(0.45, 14)]))
    for floor, small in ((0.3, 0.3), (0.305, 0.3)):  # a floor set by hand between two thresholds
        model_path = _write_model(tmp_path, min_relevance=floor)
        result = extend_floor(model_path, [a], tmp_path / "out.json")
        assert result["small_min_relevance"] == small


def test_choosing_the_floor_again_keeps_the_small_floor_under_it(tmp_path: Path) -> None:
    # Large pools whose own answer scores 0.574 (keeps a small floor of 0.5) or 0.378 (the floor
    # chosen again falls to 0.37, and the small floor with it).
    for own, floor, small in ((0.53, 0.57, 0.5), (0.45, 0.37, 0.37)):
        model_path = _write_model(tmp_path, small_min_relevance=0.5, small_min_candidates=12)
        dev = _features(tmp_path / "dev.jsonl", _small_set("dev", [(own, 80)], [(0.2, 80)]))
        out = tmp_path / "refloored.json"
        refloor(model_path, [dev], out)
        again = RelevanceModel.from_json(json.loads(out.read_text(encoding="utf-8")))
        assert (again.min_relevance, again.small_min_relevance, again.small_min_candidates) == (
            floor,
            small,
            12,
        )
        assert again.version.endswith(f"-floor{floor:g}-small{small:g}from12")


def test_no_floor_above_zero_that_keeps_every_answer_writes_nothing(tmp_path: Path) -> None:
    model_path = _write_model(tmp_path)
    # An own question whose only candidate, its answer, scores 0 (probability 0.007): every floor
    # of the curve, 0.01 and up, empties it (any@5 drops by 1 in a set of one).
    a = _features(tmp_path / "a.jsonl", _small_set("a", [(0.0, 1)], [(0.2, 14)]))
    out = tmp_path / "model-out.json"
    with pytest.raises(ValueError, match="a: every floor above 0 costs its own questions in pools under 77"):
        extend_floor(model_path, [a], out)
    assert not out.exists()


def test_a_set_without_small_pools_or_no_answer_questions_is_refused(tmp_path: Path) -> None:
    model_path = _write_model(tmp_path)
    big = _features(tmp_path / "big.jsonl", _small_set("big", [(0.9, 80)], [(0.2, 80)]))
    with pytest.raises(ValueError, match="big: needs own and no-answer questions with fewer than 77"):
        extend_floor(model_path, [big], tmp_path / "out.json")
    no_floor = _write_model(tmp_path, min_relevance=0.0)
    with pytest.raises(ValueError, match="no floor to extend"):
        extend_floor(no_floor, [big], tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()
