"""`cuemem bench train-ranker --prior`: fits blended with the model in service, and a choice that
keeps every dev headline metric of it (bench.ranker)."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest

from bench.ranker import fit, train, unsupported
from bench.ranker_features import FORMAT
from bench.ranker_prior import blend, on_top
from shared.recall.features import FEATURES
from shared.recall.relevance import RelevanceModel

N = len(FEATURES)
OURS, THEIRS = FEATURES.index("dense"), FEATURES.index("keyword_rel")  # the fit's signal, the prior's


def _model(seed: int) -> RelevanceModel:
    r = random.Random(seed)
    return RelevanceModel(
        FEATURES,
        tuple(r.uniform(-1, 1) for _ in range(N)),
        tuple(r.uniform(0.5, 2) for _ in range(N)),
        tuple(r.uniform(-2, 2) for _ in range(N)),
        r.uniform(-3, 3),
        0.0,
        f"model-{seed}",
        "emb",
    )


@pytest.mark.parametrize("weight", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_a_blend_is_one_linear_model_whose_logit_is_the_weighted_mean_of_both(weight: float) -> None:
    prior, fitted = _model(1), _model(2)
    r = random.Random(3)
    rows = [[r.uniform(-2, 2) for _ in range(N)] for _ in range(20)]
    mixed = blend(prior, fitted, weight)
    expected = [
        weight * p + (1 - weight) * f for p, f in zip(prior.logits(rows), fitted.logits(rows), strict=True)
    ]
    assert mixed.logits(rows) == pytest.approx(expected, abs=1e-9)
    assert mixed.mean == fitted.mean and mixed.scale == fitted.scale  # the fit's standardisation


def test_a_prior_of_other_features_is_refused() -> None:
    other = dataclasses.replace(_model(1), features=tuple(reversed(FEATURES)))
    with pytest.raises(ValueError, match="other features"):
        blend(other, _model(2), 0.5)


def _question(name: str, i: int, relevant: dict[int, float], wrong: dict[int, float]) -> dict[str, Any]:
    """30 candidates, the last one relevant (ties go to file order): ``relevant`` and ``wrong``
    set features of the relevant candidate and of every other one."""
    candidates = []
    for j in range(30):
        row = [0.0] * N
        for f, v in (relevant if j == 29 else wrong).items():
            row[f] = v
        candidates.append({"dias": [f"D1:{j + 1}"], "tokens": 10, "type": "turn", "row": row})
    return {"set": name, "sample": f"{name}-{i}", "asked_of": f"{name}-{i}", "question": 0, "category": 4,
            "evidence": ["D1:30"], "foreign": False, "candidates": candidates}  # fmt: skip


def _file(path: Path, lines: list[dict[str, Any]]) -> Path:
    header = {"format": FORMAT, "features": list(FEATURES), "data": "synthetic", "data_sha256": "0",
              "samples": sorted({line["sample"] for line in lines}), "command": "test",
              "embedding_model": "emb"}  # fmt: skip
    path.write_text("\n".join(json.dumps(x) for x in [header, *lines]) + "\n", encoding="utf-8")
    return path


def test_a_fit_that_costs_one_dev_set_what_the_prior_has_is_not_taken(tmp_path: Path) -> None:
    """The training split teaches OURS (the relevant candidate has it, the others now and then)
    and nothing of THEIRS (every candidate of a question has it or none); the prior reads only
    THEIRS. Dev set "a" is answered by THEIRS alone (the others all have
    OURS), "b" and "c" by OURS alone (the others all have THEIRS): the fit scores better on the
    mean of the three, and loses "a" entirely. Taken, it would do harm where the prior did none."""
    training = [
        _question(
            "train", i, {OURS: 1.0, THEIRS: float(i % 2)}, {OURS: float(i % 10 == 0), THEIRS: float(i % 2)}
        )
        for i in range(40)
    ]
    dev = {
        "a": [_question("a", i, {THEIRS: 1.0}, {OURS: 1.0}) for i in range(10)],
        "b": [_question("b", i, {OURS: 1.0}, {THEIRS: 1.0}) for i in range(10)],
        "c": [_question("c", i, {OURS: 1.0}, {THEIRS: 1.0}) for i in range(10)],
    }
    weights = [20.0 if f == THEIRS else 0.0 for f in range(N)]
    prior = RelevanceModel(FEATURES, (0.0,) * N, (1.0,) * N, tuple(weights), -10.0, 0.0, "prior", "emb")
    files = [_file(tmp_path / f"{name}.jsonl", lines) for name, lines in dev.items()]
    report = train([_file(tmp_path / "train.jsonl", training)], files, tmp_path / "m.json", prior=prior)

    fits_alone = [t for t in report["tried"] if t["prior_weight"] == 0.0]
    assert all(t["dev"]["a"]["any@5"] == 0.0 and t["dev"]["b"]["any@5"] == 1.0 for t in fits_alone)
    prior_row = next(t for t in report["tried"] if t["C"] is None)
    assert max(t["score"] for t in fits_alone) > prior_row["score"]  # taken on the mean, it would do harm
    assert report["kept_prior"] == "prior" and not (tmp_path / "m.json").exists()


def _prior(weight: float = 4.0, rest: float = 0.0) -> RelevanceModel:
    """Reads THEIRS; ``rest`` on every other feature (a weight on each leaves nothing to fit on top
    of it, so that only fits and blends are tried)."""
    weights = [weight if f == THEIRS else rest for f in range(N)]
    return RelevanceModel(FEATURES, (0.0,) * N, (1.0,) * N, tuple(weights), -2.0, 0.0, "prior", "emb")


def _training() -> list[dict[str, Any]]:
    return [
        _question(
            "train", i, {OURS: 1.0, THEIRS: float(i % 2)}, {OURS: float(i % 10 == 0), THEIRS: float(i % 2)}
        )
        for i in range(40)
    ]


def test_a_blend_that_keeps_what_the_prior_answers_and_answers_more_is_taken(tmp_path: Path) -> None:
    """Dev set "a" is answered by THEIRS (OURS says nothing there), "b" by OURS against THEIRS:
    the prior answers "a" only, the fit "b" only, a blend both."""
    dev = {
        "a": [_question("a", i, {THEIRS: 1.0}, {}) for i in range(10)],
        "b": [_question("b", i, {OURS: 1.0}, {THEIRS: 1.0}) for i in range(10)],
    }
    files = [_file(tmp_path / f"{name}.jsonl", lines) for name, lines in dev.items()]
    out = tmp_path / "m.json"
    report = train([_file(tmp_path / "train.jsonl", _training())], files, out, prior=_prior(rest=1e-6))
    assert 0.0 < report["prior"]["weight"] < 1.0 and report["prior"]["version"] == "prior"
    chosen = next(
        t for t in report["tried"] if (t["C"], t["prior_weight"]) == (report["C"], report["prior"]["weight"])
    )
    assert chosen["dev"]["a"]["any@5"] == 1.0 and chosen["dev"]["b"]["any@5"] == 1.0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["provenance"]["prior"]["weight"] == report["prior"]["weight"]


def test_a_blend_that_answers_more_but_leaves_fewer_no_answer_questions_empty_is_not_taken(
    tmp_path: Path,
) -> None:
    """As above, and set "a" has the no-answer protocol: its questions asked of another user,
    whose candidates all have OURS. The prior gives them nothing; any blend gives them the fit's
    confidence, so its floor leaves fewer of them empty than the prior's does."""
    own = [_question("a", i, {THEIRS: 1.0}, {}) for i in range(10)]
    foreign = [
        {**_question("a", i, {OURS: 1.0}, {OURS: 1.0}), "foreign": True, "evidence": []} for i in range(10)
    ]
    dev = {"a": own + foreign, "b": [_question("b", i, {OURS: 1.0}, {THEIRS: 1.0}) for i in range(10)]}
    files = [_file(tmp_path / f"{name}.jsonl", lines) for name, lines in dev.items()]
    report = train([_file(tmp_path / "train.jsonl", _training())], files, tmp_path / "m.json", prior=_prior())
    prior_row = next(t for t in report["tried"] if t["C"] is None)
    better = [t for t in report["tried"] if t["keeps_prior"] and t["score"] > prior_row["score"]]
    assert better and all(t["no_answer_empty"]["a"] < prior_row["no_answer_empty"]["a"] for t in better)
    assert report["kept_prior"] == "prior"


def test_a_feature_the_training_split_barely_shows_gets_no_weight(tmp_path: Path) -> None:
    """One training row with the link hop's feature teaches a sign and a size by chance (the
    earlier model gave every link-hop candidate -14.7 logits): the fits, and their blends with a
    prior that learned it so, give it none."""
    link = FEATURES.index("link")
    training = _training()
    training[0]["candidates"][0]["row"][link] = 1.0  # one row of 1,200
    dropped = unsupported(training)
    assert link in dropped and OURS not in dropped and THEIRS not in dropped
    assert link not in unsupported(training, min_support=1)

    # A weight on every feature: nothing to fit on top of it, so fits and blends are what is tried.
    weights = [4.0 if f == THEIRS else -15.0 if f == link else 1e-6 for f in range(N)]
    prior = RelevanceModel(FEATURES, (0.0,) * N, (1.0,) * N, tuple(weights), -2.0, 0.0, "prior", "emb")
    dev = {
        "a": [_question("a", i, {THEIRS: 1.0}, {}) for i in range(10)],
        "b": [_question("b", i, {OURS: 1.0}, {THEIRS: 1.0}) for i in range(10)],
    }
    files = [_file(tmp_path / f"{name}.jsonl", lines) for name, lines in dev.items()]
    out = tmp_path / "m.json"
    report = train([_file(tmp_path / "train.jsonl", training)], files, out, prior=prior)
    assert 0.0 < report["prior"]["weight"] < 1.0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["weights"][link] == 0.0
    assert "link" in written["provenance"]["unsupported_features"]["given_no_weight"]
    assert fit(training, 1.0, dropped).weights[link] == 0.0


def test_a_fit_on_top_of_the_prior_moves_only_the_features_it_gave_no_weight() -> None:
    """The prior reads THEIRS; the training split teaches OURS, to which the prior gives no
    weight. On top of it, OURS gets a positive weight and a standardisation of its own, and every
    other feature keeps the prior's weight, mean and scale: two rows differing in THEIRS alone
    differ in logit exactly as under the prior."""
    prior = _prior()
    added = on_top(prior, _training(), 10.0)
    assert added is not None and added.weights[OURS] > 0
    others = [j for j in range(N) if j != OURS]
    for attr in ("weights", "mean", "scale"):
        assert [getattr(added, attr)[j] for j in others] == [getattr(prior, attr)[j] for j in others]
    row, theirs = [0.0] * N, [0.0] * N
    theirs[THEIRS] = 1.0
    assert added.logits([theirs])[0] - added.logits([row])[0] == pytest.approx(
        prior.logits([theirs])[0] - prior.logits([row])[0]
    )
    # A feature the training split barely shows (``drop``) is not fitted; with none left, no fit.
    assert on_top(prior, _training(), 10.0, drop=[OURS]) is None
    # The prior's own weight on such a feature stays: it was learned on the prior's split.
    link = FEATURES.index("link")
    linked = dataclasses.replace(
        prior, weights=tuple(-3.0 if j == link else w for j, w in enumerate(prior.weights))
    )
    kept = on_top(linked, _training(), 10.0, drop=[link])
    assert kept is not None and kept.weights[link] == -3.0 and kept.weights[OURS] > 0


def test_a_fit_on_top_that_answers_more_and_keeps_the_rest_is_taken(tmp_path: Path) -> None:
    """Dev set "a" is answered by THEIRS against OURS (a refit that trades THEIRS for OURS loses
    it), "b" by OURS alone (the prior ties every candidate there and loses it): on top of the
    prior, OURS answers "b" and THEIRS still wins "a"."""
    prior = RelevanceModel(
        FEATURES, (0.0,) * N, (1.0,) * N, tuple(20.0 if f == THEIRS else 0.0 for f in range(N)), -10.0, 0.0,
        "prior", "emb",
    )  # fmt: skip
    dev = {
        "a": [_question("a", i, {THEIRS: 1.0}, {OURS: 1.0}) for i in range(10)],
        "b": [_question("b", i, {OURS: 1.0}, {}) for i in range(10)],
    }
    files = [_file(tmp_path / f"{name}.jsonl", lines) for name, lines in dev.items()]
    out = tmp_path / "m.json"
    report = train([_file(tmp_path / "train.jsonl", _training())], files, out, prior=prior)
    assert report["on_top_l2"] is not None and report["C"] is None
    chosen = next(t for t in report["tried"] if t["on_top_l2"] == report["on_top_l2"])
    assert chosen["dev"]["a"]["any@5"] == 1.0 and chosen["dev"]["b"]["any@5"] == 1.0
    written = RelevanceModel.from_json(json.loads(out.read_text(encoding="utf-8")))
    assert written.weights[THEIRS] == 20.0 and written.weights[OURS] > 0
    assert "kept, and only the features it gave no weight (dense)" in written.provenance["model"]
