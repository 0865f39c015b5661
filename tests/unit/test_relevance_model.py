"""The relevance model file: what it must hold, what it refuses, and how it scores and explains."""

from __future__ import annotations

import json
import math
from importlib import resources

import pytest

from shared.recall.features import FEATURES
from shared.recall.relevance import ModelFileError, RelevanceModel, packaged_model

N = len(FEATURES)


def _model(**fields: object) -> RelevanceModel:
    raw = {
        "features": list(FEATURES),
        "mean": [0.0] * N,
        "scale": [1.0] * N,
        "weights": [0.0] * N,
        "bias": 0.0,
        "min_relevance": 0.2,
        "version": "test",
        "embedding_model": "m",
        **fields,
    }
    return RelevanceModel.from_json(raw)


def test_the_shipped_model_fits_the_features_and_records_how_it_was_made() -> None:
    model = packaged_model()
    assert model.features == FEATURES
    assert 0.0 <= model.min_relevance < 1.0 and model.embedding_model
    raw = json.loads(
        resources.files("shared").joinpath("data/relevance-model.json").read_text(encoding="utf-8")
    )
    provenance = raw["provenance"]
    assert provenance["command"].startswith("cuemem bench train-ranker")
    for source in provenance["training"]:
        assert len(source["sha256"]) == 64 and source["samples"] and source["file"].endswith(".json")
    assert model.version.startswith("relevance-lr-")
    # A smaller pool's floor, where one was chosen, is never above the floor of larger ones, and
    # applies to pools smaller than theirs only; the file says what it was chosen on.
    if model.small_min_relevance > 0:
        assert model.small_min_relevance <= model.min_relevance
        assert 0 < model.small_min_candidates < model.min_candidates
        assert provenance["floor_extended"]["command"].startswith("cuemem bench train-ranker --extend-floor")


def test_the_small_stores_floor_survives_the_file_and_is_off_when_absent() -> None:
    model = _model(min_candidates=77, small_min_relevance=0.07, small_min_candidates=11)
    again = RelevanceModel.from_json(json.loads(json.dumps(model.to_json())))
    assert (again.small_min_relevance, again.small_min_candidates, again.min_candidates) == (0.07, 11, 77)
    assert (_model().small_min_relevance, _model().small_min_candidates) == (0.0, 0)


def test_a_model_of_another_feature_list_is_refused_with_the_fix() -> None:
    shuffled = list(reversed(FEATURES))
    with pytest.raises(ModelFileError, match="train-ranker"):
        _model(features=shuffled)
    with pytest.raises(ModelFileError, match="missing \\['dense'\\]"):
        _model(features=[f for f in FEATURES if f != "dense"], mean=[0.0] * (N - 1), scale=[1.0] * (N - 1),
               weights=[0.0] * (N - 1))  # fmt: skip


def test_a_malformed_model_file_names_what_is_wrong() -> None:
    with pytest.raises(ModelFileError, match="bias"):
        RelevanceModel.from_json({"features": list(FEATURES), "mean": [0.0] * N, "scale": [1.0] * N,
                                  "weights": [0.0] * N, "min_relevance": 0.1})  # fmt: skip
    with pytest.raises(ModelFileError, match="one number per feature"):
        _model(weights=[0.0] * (N - 1))
    with pytest.raises(ModelFileError, match="positive"):
        _model(scale=[0.0] * N)


def test_scores_are_a_standardised_logistic_and_explained_by_their_largest_shares() -> None:
    weights = [0.0] * N
    weights[FEATURES.index("dense")] = 2.0
    weights[FEATURES.index("keyword_rel")] = -1.0
    mean = [0.0] * N
    mean[FEATURES.index("dense")] = 0.5
    scale = [1.0] * N
    scale[FEATURES.index("dense")] = 0.25
    model = _model(weights=weights, mean=mean, scale=scale, bias=0.3)
    row = [0.0] * N
    row[FEATURES.index("dense")] = 0.75  # standardised: (0.75 - 0.5) / 0.25 = 1
    row[FEATURES.index("keyword_rel")] = 0.5
    [p] = model.probabilities([row])
    assert p == pytest.approx(1 / (1 + math.exp(-(0.3 + 2.0 - 0.5))))
    assert model.moved(row, 3) == [("dense", 2.0), ("keyword_rel", -0.5)]
    assert model.probabilities([row, row]) == [p, p]  # the same row, the same number
    with pytest.raises(ValueError, match="features"):
        model.probabilities([row[:-1]])


def _line(evidence: list[str], scored: list[tuple[float, str]], foreign: bool = False) -> dict[str, object]:
    """A features line whose candidates' first feature is their probability's logit."""
    candidates = [
        {"dias": [dia], "tokens": 10, "row": [math.log(p / (1 - p))] + [0.0] * (N - 1)} for p, dia in scored
    ]
    return {"set": "s", "category": 1, "evidence": evidence, "foreign": foreign, "candidates": candidates}


def test_the_floor_decides_the_answer_and_costs_no_headline_metric() -> None:
    from bench.ranker import choose_floor, evaluate, no_answer_curve

    model = _model(weights=[1.0] + [0.0] * (N - 1), bias=0.0)
    fillers = [(0.25 - i / 100, f"f{i}") for i in range(5)]
    lines = [
        # Its evidence ranks 7th, under a best candidate of 0.3: no any@5, but all@10. A floor
        # over 0.3 leaves it no answer at all, which costs all@10 and not any@5.
        _line(["e"], [(0.3, "x"), *fillers, (0.1, "e")]),
        # Answered first at 0.9, with a second piece of evidence at 0.05: the floor never cuts the
        # tail of an answer whose best clears it.
        _line(["a", "b"], [(0.9, "a"), (0.05, "b")]),
        # Asked of another user: nothing relevant, its best at 0.2.
        _line([], [(0.2, "z")], foreign=True),
    ]
    curve = no_answer_curve(model, lines)
    at = {p["threshold"]: p for p in curve}
    assert at[0.3]["all@5_drop"] == 0.0 and at[0.3]["all@10"] == 1.0 and at[0.3]["no_answer_empty"] == 1.0
    assert at[0.31]["any@5_drop"] == 0.0 and at[0.31]["all@10_drop"] == 0.5
    # any@5 alone would allow 0.9; all@10 allows only what keeps the first question's answer.
    assert choose_floor(curve) == 0.3
    assert evaluate(model, lines, 0.3)["all@10"] == 1.0 and evaluate(model, lines, 0.31)["all@10"] == 0.5
