"""The relevance model: a candidate's row of features to a calibrated probability of relevance.

The model is data, fitted on the training split by ``cuemem bench train-ranker`` (``bench/ranker.py``)
and shipped in the package as ``shared/data/relevance-model.json``: the feature list it was fitted
on (it must equal :data:`shared.recall.features.FEATURES`, or loading fails), a standardisation
and a logistic layer whose output is the probability, the minimum probability recall returns
(chosen with the no-answer protocol), the embedder it was fitted with (its probabilities are
calibrated for that model's cosines: with another embedder recall ranks by it but sets no default
floor), the fewest candidates a training question had (a smaller pool gets the small stores' floor
where one was chosen, ``small_min_relevance`` from ``small_min_candidates``; a store of a handful
of statements, smaller still, gets none), and where it came from (the training command, the data's
hash, the subset, the measurements it was chosen by). Loading reads no network; scoring is a few
array operations, the same rows giving the same numbers.

Each probability also comes with the features that moved it most (:meth:`RelevanceModel.moved`):
a feature's share of the logit is its weight times its standardised value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from shared.recall.features import FEATURES

MODEL_FILE = "data/relevance-model.json"


class ModelFileError(ValueError):
    """The model file does not fit this code (another feature list, a missing field)."""


@dataclass(frozen=True)
class RelevanceModel:
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    min_relevance: float  # the default floor: ``Settings.recall_min_relevance``
    version: str = "unversioned"
    # The embedder whose cosines the model was fitted on: its probabilities (and so the default
    # floor) are calibrated for that model's scale only.
    embedding_model: str = ""
    # The fewest candidates a training question had: the default floor applies from there.
    min_candidates: int = 0
    # A smaller pool's floor, chosen on small stores by `cuemem bench train-ranker --extend-floor`
    # (their probabilities sit on another scale), from the fewest candidates it was checked on;
    # below that (a store of a handful of statements) a paraphrase's answer and a question nothing
    # answers score alike, so no default floor applies. 0: none chosen.
    small_min_relevance: float = 0.0
    small_min_candidates: int = 0
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        n = len(self.features)
        if not (len(self.mean) == len(self.scale) == len(self.weights) == n):
            raise ModelFileError("mean, scale and weights must each have one number per feature")
        if any(s <= 0 for s in self.scale):
            raise ModelFileError("scale: every entry must be positive")

    def logits(self, rows: Sequence[Sequence[float]]) -> list[float]:
        out = []
        for row in rows:
            if len(row) != len(self.features):
                raise ValueError(f"row has {len(row)} features, the model {len(self.features)}")
            z = self.bias
            for x, m, s, w in zip(row, self.mean, self.scale, self.weights, strict=True):
                z += w * (x - m) / s
            out.append(z)
        return out

    def probabilities(self, rows: Sequence[Sequence[float]]) -> list[float]:
        return [_sigmoid(z) for z in self.logits(rows)]

    def moved(self, row: Sequence[float], top: int = 3) -> list[tuple[str, float]]:
        """The ``top`` features with the largest share of this row's logit, signed, largest first."""
        shares = [
            (name, w * (x - m) / s)
            for name, x, m, s, w in zip(self.features, row, self.mean, self.scale, self.weights, strict=True)
        ]
        shares.sort(key=lambda p: (-abs(p[1]), p[0]))
        return [(name, round(v, 4)) for name, v in shares[:top] if v != 0.0]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
            "min_relevance": self.min_relevance,
            "embedding_model": self.embedding_model,
            "min_candidates": self.min_candidates,
            "small_min_relevance": self.small_min_relevance,
            "small_min_candidates": self.small_min_candidates,
            "provenance": self.provenance,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RelevanceModel:
        try:
            model = cls(
                features=tuple(raw["features"]),
                mean=tuple(float(v) for v in raw["mean"]),
                scale=tuple(float(v) for v in raw["scale"]),
                weights=tuple(float(v) for v in raw["weights"]),
                bias=float(raw["bias"]),
                min_relevance=float(raw["min_relevance"]),
                version=str(raw.get("version", "unversioned")),
                embedding_model=str(raw.get("embedding_model", "")),
                min_candidates=int(raw.get("min_candidates", 0)),
                small_min_relevance=float(raw.get("small_min_relevance", 0.0)),
                small_min_candidates=int(raw.get("small_min_candidates", 0)),
                provenance=dict(raw.get("provenance", {})),
            )
        except (KeyError, TypeError) as exc:
            raise ModelFileError(f"relevance model file: missing or malformed field {exc}") from exc
        if model.features != FEATURES:
            missing = sorted(set(FEATURES) - set(model.features))
            extra = sorted(set(model.features) - set(FEATURES))
            raise ModelFileError(
                f"relevance model {model.version} was fitted on other features (missing {missing}, "
                f"extra {extra}, or another order): run `cuemem bench train-ranker`"
            )
        return model


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@cache
def packaged_model() -> RelevanceModel:
    """The model shipped in the package (read once per process)."""
    raw = resources.files("shared").joinpath(MODEL_FILE).read_text(encoding="utf-8")
    return RelevanceModel.from_json(json.loads(raw))
