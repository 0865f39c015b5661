"""LightGBM against the logistic model (`cuemem bench train-ranker --compare-lightgbm`): the same
rows, the same offline dev numbers (``bench.ranker.evaluate``). The measurement behind choosing the
logistic model (docs/BENCHMARKS.md); cuemem does not depend on ``lightgbm``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.ranker import evaluate, matrix
from bench.ranker_features import read_features, read_sets


class _Boosted:
    """A LightGBM model behind the same ``probabilities`` call, for the comparison only."""

    def __init__(self, booster: Any) -> None:
        self.booster = booster

    def probabilities(self, rows: Sequence[Sequence[float]]) -> list[float]:
        import numpy as np

        return [float(p) for p in self.booster.predict(np.asarray(rows, dtype=np.float64))]


def compare_boosted(
    train_files: Sequence[Path],
    dev_files: Sequence[Path],
    objectives: Sequence[str] = ("binary", "lambdarank"),
) -> dict[str, Any]:
    """The same offline dev numbers for LightGBM (binary and LambdaRank objectives) fitted on the
    same rows: the measurement behind choosing the logistic model (docs/BENCHMARKS.md). Needs the
    ``lightgbm`` package, which cuemem does not depend on."""
    try:
        import lightgbm
    except ImportError:
        raise ValueError(
            "compare: install lightgbm first (pip install lightgbm); cuemem does not need it"
        ) from None
    import numpy as np

    train_lines = [line for path in train_files for line in read_features(path)[1]]
    _, dev = read_sets(dev_files)
    x, y = matrix(train_lines)
    groups = [len(line["candidates"]) for line in train_lines]
    out: dict[str, Any] = {}
    for objective in objectives:
        params = {"objective": objective, "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 20,
                  "verbose": -1, "deterministic": True, "num_threads": 1, "seed": 30}  # fmt: skip
        data = lightgbm.Dataset(x, y, group=np.asarray(groups) if objective == "lambdarank" else None)
        booster = lightgbm.train(params, data, num_boost_round=200)
        model = _Boosted(booster)
        out[objective] = {name: evaluate(model, lines) for name, lines in sorted(dev.items())}
    return out
