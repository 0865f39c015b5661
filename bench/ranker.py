"""`cuemem bench train-ranker`: fit the relevance model on the training split, choose on dev.

Input: features files (``bench.ranker_features``): the training split's (fit) and the dev sets'
(choose and report). The model is scikit-learn's logistic regression over the standardised
features (``shared.recall.relevance``: inference is a dot product and a sigmoid, no library at
run time). Its output is the probability that a candidate covers an evidence turn, fitted on the
training split's own questions and on its no-answer questions (each conversation's questions
asked of another user: nothing there is relevant), so it is calibrated for both.

Choice: the regularisation ``C`` with the best mean dev score (the sum of each dev set's headline
metrics over its own questions, :func:`headline`, each set weighing the same). With ``--prior``
(the model in service), each fit is also blended with it (:func:`blend`: the logit a weighted
mean of the two, one linear model again) and the choice is the best of those that keep every
headline metric of every dev set, and the share of no-answer questions left empty at the floor
each gets, at least the prior's. Beside the blends, the prior with only the features it gives no
weight fitted on top of it (``bench.ranker_prior.on_top``): what a refit of everything on a small
training split would move, it keeps. The prior itself is one of them: when it is the best, nothing
is written (it keeps its weights as they are), and a refit that helps one set and costs another
is never taken. A feature that fewer than ``MIN_SUPPORT`` training rows show gets no weight, in
a fit or a blend (:func:`unsupported`). The floor
(``min_relevance``): the highest threshold whose own-question any@5, all@5 and all@10 each drop
by at most ``MAX_ANY5_DROP`` (the suite's headline cells, ``FLOOR_METRICS``) on every dev set
that has the no-answer protocol (several users; on the training split when none is given); the
share of no-answer questions it leaves empty, and each set's whole curve, are reported beside it.

The fitted model is written with its provenance: the command, the training file's hash and
subset, the features, the choice and the dev numbers (offline: the candidates ranked by the model,
in the order recall gives them, a candidate whose turns are all behind those before it waiting
(:func:`_items`); without the cut's near-duplicate rule, which needs texts the file does not hold).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import metrics
from bench.common import machine_info, write_json
from bench.ranker_features import read_features, read_sets
from bench.ranker_prior import ON_TOP_L2, blend, on_top

# Half-decades: 96 training questions chose 0.03 to 1 where 48 chose 10 (docs/BENCHMARKS.md).
CS = (0.01, 0.03, 0.1, 0.3, 1.0, 10.0)
# Training rows a feature must show (other than 0) to be given a weight. In the 96 questions the
# features under it show in 0 to 10 rows (link 0, recent_rank 10, filler 2); the next fewest, 47.
MIN_SUPPORT = 20
PRIOR_WEIGHTS = (0.25, 0.5, 0.75)  # the prior's share of a blend; quarters: the steps measured
MAX_ANY5_DROP = 0.01
THRESHOLDS = tuple(round(0.01 * i, 2) for i in range(1, 100))
VERSION_PREFIX = "relevance-lr"


def _labels(line: dict[str, Any]) -> list[int]:
    evidence = set(line["evidence"])
    return [1 if evidence & set(c["dias"]) else 0 for c in line["candidates"]]


def matrix(lines: Sequence[dict[str, Any]]) -> tuple[Any, Any]:
    import numpy as np

    rows = [c["row"] for line in lines for c in line["candidates"]]
    labels = [y for line in lines for y in _labels(line)]
    return np.asarray(rows, dtype=np.float64), np.asarray(labels, dtype=np.int64)


def unsupported(lines: Sequence[dict[str, Any]], min_support: int = MIN_SUPPORT) -> tuple[int, ...]:
    """The features (indices) that fewer than ``min_support`` rows of ``lines`` show (a value other
    than 0, which each feature takes where it does not apply, so that no weight leaves every other
    row's logit as it was). From one or two rows a fit learns a sign and a size by chance: the link
    hop's feature, seen in one row of the earlier model's 48 questions, gave every link-hop
    candidate -14.7 logits (docs/BENCHMARKS.md)."""
    x, _ = matrix(lines)
    if not len(x):
        return ()
    return tuple(j for j in range(x.shape[1]) if int((x[:, j] != 0).sum()) < min_support)


def fit(lines: Sequence[dict[str, Any]], c: float, drop: Sequence[int] = ()) -> Any:
    """A ``RelevanceModel`` fitted on ``lines`` (min_relevance 0: chosen afterwards); the features
    in ``drop`` get no weight (:func:`unsupported`)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from shared.recall.features import FEATURES
    from shared.recall.relevance import RelevanceModel

    x, y = matrix(lines)
    x[:, list(drop)] = 0.0  # a constant column: standardised to 0, so its weight is 0
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    lr = LogisticRegression(C=c, max_iter=5000)
    lr.fit((x - mean) / scale, y)
    return RelevanceModel(
        features=FEATURES,
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        weights=tuple(float(v) for v in lr.coef_[0]),
        bias=float(lr.intercept_[0]),
        min_relevance=0.0,
    )


def ranked(model: Any, line: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    """The line's candidates by the model's probability, best first (ties in file order)."""
    probabilities = model.probabilities([c["row"] for c in line["candidates"]])
    order = sorted(range(len(probabilities)), key=lambda i: (-round(probabilities[i], 9), i))
    return [(probabilities[i], line["candidates"][i]) for i in order]


def _items(scored: Sequence[tuple[float, dict[str, Any]]]) -> list[metrics.Item]:
    """The ranked candidates in the order recall gives them: a candidate whose turns are all
    behind candidates before it waits (``shared.recall.fusion.new_evidence_first``, recall's own
    rule; its near-duplicate rule needs texts the file does not hold)."""
    from shared.recall.fusion import new_evidence_first

    given = new_evidence_first(list(scored), len(scored), lambda s: s[1]["dias"])
    return [metrics.Item(frozenset(c["dias"]), int(c["tokens"])) for _, c in given]


# The categories of each set's headline (bench.suite.SETS): LoCoMo's category 5 is adversarial.
HEADLINE_GROUP = {"locomo": "1-4"}


def _answer(scored: Sequence[tuple[float, dict[str, Any]]], floor: float) -> list[metrics.Item]:
    """What recall returns: nothing when the best candidate is under the floor, else every one."""
    return _items(scored) if scored and scored[0][0] >= floor else []


def evaluate(model: Any, lines: Sequence[dict[str, Any]], floor: float = 0.0) -> dict[str, float | None]:
    """Offline any@5, all@5, all@10, fraction@1 and @5 over the own questions of ``lines``, in the
    categories of the set's headline, with ``floor`` as recall applies it (:func:`_answer`)."""
    scores = [
        metrics.score_question(
            int(line["category"]), list(line["evidence"]), _answer(ranked(model, line), floor)
        )
        for line in lines
        if not line["foreign"] and line["evidence"]
    ]
    name = str(lines[0]["set"]) if lines else ""
    group = metrics.aggregate(scores)[HEADLINE_GROUP.get(name, "1-5")]
    at = group["at_k"]
    return {
        "questions": group["questions"],
        "any@5": at["5"]["recall_any"],
        "all@5": at["5"]["recall_all"],
        "all@10": at["10"]["recall_all"],
        "R@1": at["1"]["fraction"],
        "R@5": at["5"]["fraction"],
    }


# The own-question metrics a floor must not cost (``MAX_ANY5_DROP`` each): the suite's headline
# cells (docs/BENCHMARKS.md).
FLOOR_METRICS = (("any@5", 5, "recall_any"), ("all@5", 5, "recall_all"), ("all@10", 10, "recall_all"))


def headline(name: str) -> tuple[str, ...]:
    """The offline metrics (:func:`evaluate`) of a dev set's headline cells in the suite
    (``bench.suite.SETS``): MADial's R@1, R@5 and hit@5 (any@5), any other set's any@5, all@5
    and all@10."""
    from bench.suite import MADIAL, SETS

    spec = SETS.get(name)
    return (
        ("R@1", "R@5", "any@5")
        if spec is not None and spec.metrics == MADIAL
        else ("any@5", "all@5", "all@10")
    )


def _empty_at_floor(
    model: Any, train_lines: Sequence[dict[str, Any]], dev: dict[str, list[dict[str, Any]]], max_drop: float
) -> tuple[dict[str, float], tuple[float, str, list[dict[str, float]], dict[str, list[dict[str, float]]]]]:
    """The share of no-answer questions each dev set with the protocol leaves empty at the floor
    the model gets (:func:`_choose_floor`), and that choice."""
    chosen = _choose_floor(model, train_lines, dev, max_drop)
    floor, _, _, curves = chosen
    empty = {
        name: next(p["no_answer_empty"] for p in curve if p["threshold"] == floor)
        for name, curve in curves.items()
        if any(line["foreign"] for line in dev[name])
    }
    return empty, chosen


def _dev_score(per_set: dict[str, dict[str, float | None]]) -> float:
    return sum(sum(float(v[m] or 0.0) for m in headline(name)) for name, v in per_set.items()) / len(per_set)


def no_answer_curve(model: Any, lines: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """Per threshold: the share of no-answer questions left with nothing, and the own questions'
    any@5, all@5 and all@10 kept (each with its drop from no floor)."""
    best_foreign: list[float] = []
    # Each own question's evidence, best probability and first ten items in recall's order, put
    # in that order once: every threshold reads them.
    own: list[tuple[list[str], float, list[metrics.Item]]] = []
    for line in lines:
        top = ranked(model, line)
        if line["foreign"]:
            best_foreign.append(top[0][0] if top else 0.0)
        elif line["evidence"]:  # a question with no candidate at all is a miss at every threshold
            own.append((list(line["evidence"]), top[0][0] if top else -1.0, _items(top)[:10]))

    def kept(t: float) -> dict[str, float]:
        # The floor decides whether there is an answer (``shared.recall.floor``): a question whose
        # best candidate is under it gets nothing, any other its whole list.
        out = {}
        for name, k, field in FLOOR_METRICS:
            hits = 0.0
            for evidence, best, items in own:
                if items and best >= t:
                    cov = metrics.coverage(evidence, items[:k])
                    hits += getattr(cov, field) if cov is not None else 0.0
            out[name] = hits / len(own) if own else 0.0
        return out

    base = kept(0.0)
    out = []
    for t in (0.0, *THRESHOLDS):
        at = kept(t)
        empty = sum(1 for b in best_foreign if b < t) / len(best_foreign) if best_foreign else 0.0
        point: dict[str, float] = {"threshold": t, "no_answer_empty": round(empty, 4)}
        for name, _, _ in FLOOR_METRICS:
            point[name] = round(at[name], 4)
            point[f"{name}_drop"] = round(base[name] - at[name], 4)
        out.append(point)
    return out


def choose_floor(curve: Sequence[dict[str, float]], max_drop: float = MAX_ANY5_DROP) -> float:
    """The highest threshold whose any@5, all@5 and all@10 each drop by at most ``max_drop``."""
    ok = [p["threshold"] for p in curve if all(p[f"{name}_drop"] <= max_drop for name, _, _ in FLOOR_METRICS)]
    return max(ok) if ok else 0.0


def _choose_floor(
    model: Any, train_lines: Sequence[dict[str, Any]], dev: dict[str, list[dict[str, Any]]], max_drop: float
) -> tuple[float, str, list[dict[str, float]], dict[str, list[dict[str, float]]]]:
    """The floor, the rule it was chosen by, and the curves it was chosen on (see the module doc)."""
    train_curve = no_answer_curve(model, train_lines)
    dev_curves = {name: no_answer_curve(model, lines) for name, lines in sorted(dev.items())}
    protocol = [name for name, lines in sorted(dev.items()) if any(line["foreign"] for line in lines)]
    if protocol:
        # The floor is a choice, made with the no-answer protocol on the dev sets that have it
        # (several users): the highest threshold that costs none of them more than ``max_drop``
        # any@5. The share of no-answer questions it leaves empty, and what it costs the other
        # sets (MADial: one user, 76 questions, where one question is 0.013), are reported.
        floor = min(choose_floor(dev_curves[name], max_drop) for name in protocol)
        floor_rule = (
            f"highest threshold whose any@5, all@5 and all@10 each drop by at most {max_drop} on "
            f"every dev set with a no-answer protocol ({', '.join(protocol)})"
        )
    else:
        floor = choose_floor(train_curve, max_drop)
        floor_rule = (
            f"highest threshold whose training any@5, all@5 and all@10 each drop by at most {max_drop}"
        )
    return floor, floor_rule, train_curve, dev_curves


def train(
    train_files: Sequence[Path],
    dev_files: Sequence[Path],
    out_model: Path,
    cs: Sequence[float] = CS,
    max_drop: float = MAX_ANY5_DROP,
    prior: Any = None,
) -> dict[str, Any]:
    """Fit on ``train_files``, choose ``C`` (and the share of ``prior``, a ``RelevanceModel``) on
    ``dev_files``, write ``out_model``; the report."""
    import dataclasses

    from shared.recall.features import FEATURES

    headers, train_lines = [], []
    for path in train_files:
        header, lines = read_features(path)
        headers.append(header)
        train_lines += lines
    _, dev = read_sets(dev_files)
    if not train_lines:
        raise ValueError("train: the training features hold no question")
    if prior is not None and not dev:
        raise ValueError("prior: give --dev sets to compare the fits with it on")
    embedders = {str(h.get("embedding_model", "")) for h in headers}
    if len(embedders) != 1:
        raise ValueError(f"train: the training features come from several embedders: {sorted(embedders)}")
    embedder = embedders.pop()
    if prior is not None and prior.embedding_model != embedder:
        raise ValueError(
            f"prior: model {prior.version} is for {prior.embedding_model}, the features for {embedder}"
        )
    if prior is not None and tuple(prior.features) != tuple(FEATURES):
        raise ValueError(f"prior: model {prior.version} has another feature list than this code's")
    prior_dev = {name: evaluate(prior, lines) for name, lines in sorted(dev.items())} if prior else {}

    def measured(c: float | None, weight: float, model: Any, l2: float | None = None) -> dict[str, Any]:
        per_set = {name: evaluate(model, lines) for name, lines in sorted(dev.items())}
        score = _dev_score(per_set) if per_set else _dev_score({"training": evaluate(model, train_lines)})
        keeps = all(
            float(v[m] or 0.0) >= float(prior_dev[name][m] or 0.0) - 1e-9
            for name, v in per_set.items()
            for m in headline(name)
            if name in prior_dev
        )
        return {
            "C": c,
            "prior_weight": weight,
            "on_top_l2": l2,  # fitted on top of the prior (``on_top``) with this penalty
            "dev": per_set,
            "score": round(score, 4),
            "keeps_prior": keeps if prior is not None else None,
            "no_answer_empty": None,  # computed for the candidates the choice reaches (below)
            "model": model,
        }

    drop = unsupported(train_lines)
    candidates = [measured(None, 1.0, prior)] if prior is not None else []
    for c in cs:
        fitted = fit(train_lines, c, drop)
        candidates.append(measured(c, 0.0, fitted))
        if prior is not None:
            candidates += [measured(c, w, blend(prior, fitted, w, drop)) for w in PRIOR_WEIGHTS]
    for l2 in ON_TOP_L2 if prior is not None else ():
        if (added := on_top(prior, train_lines, l2, drop)) is not None:
            candidates.append(measured(None, 1.0, added, l2))
    # Best score first; on a tie the prior (a change must gain something), then a fit on top of it
    # (it moves no weight the prior has), then the stronger regularisation, then the larger share
    # of the prior (the smaller change).
    ranked_candidates = sorted(
        (r for r in candidates if r["keeps_prior"] is not False),
        key=lambda r: (
            r["score"],
            r is candidates[0] and prior is not None,
            r["on_top_l2"] or 0.0,
            -(r["C"] or 0.0),
            r["prior_weight"],
        ),  # fmt: skip
        reverse=True,
    )
    # The first that also leaves at least as many no-answer questions empty as the prior at the
    # floor each would get (the prior itself does): a ranking that separates the answers less is
    # not taken for a gain in their order.
    prior_empty: dict[str, float] = {}
    if prior is not None:
        prior_empty = candidates[0]["no_answer_empty"] = _empty_at_floor(prior, train_lines, dev, max_drop)[0]
    for best in ranked_candidates:
        empty, (floor, floor_rule, train_curve, dev_curves) = _empty_at_floor(
            best["model"], train_lines, dev, max_drop
        )
        best["no_answer_empty"] = empty
        if all(empty[name] >= share - 1e-9 for name, share in prior_empty.items()):
            break
    else:  # unreachable: the prior keeps its own numbers, and without one the first is taken
        raise AssertionError("train: no candidate to choose")
    tried = [{k: v for k, v in r.items() if k != "model"} for r in candidates]
    if best["C"] is None and best["on_top_l2"] is None:  # the prior is the best: nothing is written
        kept = {"kept_prior": prior.version, "version": prior.version, "C": None, "prior": None,
                "unsupported_features": [FEATURES[j] for j in drop]}  # fmt: skip
        return {
            **kept,
            "min_relevance": prior.min_relevance,
            "prior_no_answer_empty": prior_empty,
            "tried": tried,
        }
    model = best["model"]
    version = f"{VERSION_PREFIX}-{_digest(model)}"
    provenance = {
        "command": machine_info()["command"],
        "training": [
            {
                "file": h["data"],
                "sha256": h["data_sha256"],
                "samples": h["samples"],
                "features_command": h["command"],
            }
            for h in headers
        ],
        "training_rows": int(sum(len(line["candidates"]) for line in train_lines)),
        "training_questions": len(train_lines),
        "unsupported_features": {"min_support": MIN_SUPPORT, "given_no_weight": [FEATURES[j] for j in drop]},
        "model": _described(best, prior),
        "chosen_by": "best mean of each dev set's headline metrics over its own questions (offline)"
        + (", among the fits that keep every one at least the prior's" if prior is not None else "")
        + (", and the share of no-answer questions left empty at their floor" if prior_empty else ""),
        "C": best["C"],
        "on_top_l2": best["on_top_l2"],
        "prior": None
        if prior is None
        else {
            "version": prior.version,
            "weight": best["prior_weight"],
            "command": (prior.provenance or {}).get("command"),
            "training": (prior.provenance or {}).get("training"),
        },
        "tried": tried,
        "prior_no_answer_empty": prior_empty or None,
        "min_relevance_rule": floor_rule,
        "dev_at_min_relevance": {name: evaluate(model, lines, floor) for name, lines in sorted(dev.items())},
        "no_answer_training": [p for p in train_curve if p["threshold"] == floor],
        "no_answer_dev": {
            name: [p for p in curve if p["threshold"] == floor] for name, curve in dev_curves.items()
        },
    }
    shipped = dataclasses.replace(
        model,
        min_relevance=floor,
        version=version,
        provenance=provenance,
        embedding_model=embedder,
        min_candidates=min(len(line["candidates"]) for line in train_lines if not line["foreign"]),
    )
    write_json(out_model, shipped.to_json(), indent=1)
    return {
        "model": str(out_model),
        "version": version,
        "C": best["C"],
        "on_top_l2": best["on_top_l2"],
        "prior": provenance["prior"],
        "prior_no_answer_empty": prior_empty or None,
        "unsupported_features": provenance["unsupported_features"],
        "min_relevance": floor,
        "tried": provenance["tried"],
        "dev_at_min_relevance": provenance["dev_at_min_relevance"],
        "no_answer_training": provenance["no_answer_training"],
        "no_answer_dev": provenance["no_answer_dev"],
        "curves": {"training": train_curve, **dev_curves},
    }


def _described(best: dict[str, Any], prior: Any) -> str:
    """What the chosen model is, for its provenance."""
    from shared.recall.features import FEATURES

    if best["on_top_l2"] is not None:
        added = [
            f for f, w, was in zip(FEATURES, best["model"].weights, prior.weights, strict=True) if w != was
        ]
        return (
            f"{prior.version} kept, and only the features it gave no weight ({', '.join(added)}) fitted on"
            " top of it with a shift of its bias, its logit as an offset (L2 "
            f"{best['on_top_l2']} on their standardised weights, scipy.optimize L-BFGS-B)"
        )
    blended = (
        f", blended with {prior.version} at weight {best['prior_weight']}" if best["prior_weight"] else ""
    )
    return "sklearn.linear_model.LogisticRegression over standardised features" + blended


def _digest(model: Any) -> str:
    import hashlib

    raw = json.dumps([model.weights, model.bias, model.mean, model.scale]).encode()
    return hashlib.sha256(raw).hexdigest()[:10]
