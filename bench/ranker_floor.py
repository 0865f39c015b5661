"""`cuemem bench train-ranker --extend-floor MODEL` and `--refloor MODEL`: a model's floors chosen
again, its weights kept. ``--refloor`` chooses the floor of large pools on the dev sets
(:func:`refloor`); ``--extend-floor`` a floor for pools smaller than the model's training
questions had, chosen on small stores.

Recall applies the model's floor to a pool of at least ``min_candidates`` candidates, the fewest
a training question had (``shared.recall.cascade.default_floor``). Under that, a question nothing
answers got every item a small store holds. Small pools put the probabilities on another scale (a
small store has fewer near misses to outscore), so their floor is chosen on its own, on the sets
given (``cuemem bench small-stores`` makes them: a store per question, the no-answer protocol
across stores), by the rule of the model's floor: the highest threshold that costs none of those
sets more than ``max_drop`` of any@5, all@5 or all@10 on its own questions, counting only the
questions whose pool is under ``min_candidates``, and never above the model's floor. It applies
from the fewest candidates of an own question checked (``small_min_candidates``); weights and the
floor of larger pools stay. Each set's counts, its numbers with and without the floor, and the
share of its no-answer questions left empty go into the provenance. When no threshold above 0
holds, nothing is written and the error says so.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import machine_info, write_json
from bench.ranker import (
    MAX_ANY5_DROP,
    VERSION_PREFIX,
    _choose_floor,
    _digest,
    choose_floor,
    evaluate,
    no_answer_curve,
)
from bench.ranker_features import read_sets


def _small(model: Any, name: str, lines: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The set's questions whose pool is under ``min_candidates``, and the fewest candidates of
    an own one; ValueError when it has no own or no no-answer question there."""
    small = [line for line in lines if len(line["candidates"]) < model.min_candidates]
    own = [line for line in small if not line["foreign"] and line["evidence"] and line["candidates"]]
    foreign = [line for line in small if line["foreign"]]
    if not own or not foreign:
        raise ValueError(
            f"{name}: needs own and no-answer questions with fewer than {model.min_candidates} "
            f"candidates (has {len(own)} and {len(foreign)}): make it with `cuemem bench small-stores`"
        )
    return own + foreign, min(len(line["candidates"]) for line in own)


def small_floor(
    model: Any, dev: dict[str, list[dict[str, Any]]], max_drop: float = MAX_ANY5_DROP
) -> tuple[float, int, dict[str, Any]]:
    """The small pools' floor, the fewest candidates it was checked on, and per set what it was
    chosen on: counts, the curve's point at the floor and without one, the set's own choice."""
    curves: dict[str, tuple[list[dict[str, float]], int, int, int]] = {}
    for name, lines in sorted(dev.items()):
        small, fewest = _small(model, name, lines)
        own = sum(1 for line in small if not line["foreign"])
        curves[name] = (no_answer_curve(model, small), fewest, own, len(small) - own)
    # Never above the model's floor: the highest threshold of the curves' grid at or under it (a
    # floor set by hand may lie between two).
    cap = max(p["threshold"] for p in next(iter(curves.values()))[0] if p["threshold"] <= model.min_relevance)
    floor = min(cap, *(choose_floor(curve, max_drop) for curve, *_ in curves.values()))
    sets: dict[str, dict[str, Any]] = {
        name: {
            "own": own,
            "no_answer": foreign,
            "fewest_candidates": fewest,
            "own_choice": choose_floor(curve, max_drop),
            "at_floor": next(p for p in curve if p["threshold"] == floor),
            "without_floor": curve[0],
        }
        for name, (curve, fewest, own, foreign) in curves.items()
    }
    return floor, min(fewest for _, fewest, _, _ in curves.values()), sets


def extend_floor(
    model_path: Path, dev_files: Sequence[Path], out_model: Path, max_drop: float = MAX_ANY5_DROP
) -> dict[str, Any]:
    """Choose the small pools' floor of the model in ``model_path`` on ``dev_files`` and write the
    model with it to ``out_model``; ValueError, writing nothing, when none above 0 holds."""
    model = _model(model_path)
    if model.min_relevance <= 0:
        raise ValueError(f"{model.version} has no floor to extend")
    headers, dev = read_sets(dev_files)
    sources = [
        {
            "features": path.name,
            "data": header.get("data"),
            "sha256": header.get("data_sha256"),
            "samples": header.get("samples"),
        }
        for path, header in zip(dev_files, headers, strict=True)
    ]
    if not dev:
        raise ValueError("extend-floor: give the --dev sets to choose the floor on")
    floor, fewest, sets = small_floor(model, dev, max_drop)
    if floor <= 0:
        worst = min(sets, key=lambda name: sets[name]["own_choice"])
        raise ValueError(
            f"{worst}: every floor above 0 costs its own questions in pools under {model.min_candidates} "
            f"more than {max_drop} of any@5, all@5 or all@10: nothing written"
        )
    provenance = dict(model.provenance or {})
    provenance["floor_extended"] = {
        "command": machine_info()["command"],
        "rule": (
            f"pools under {model.min_candidates} candidates: the highest threshold, at most the floor "
            f"{model.min_relevance}, that costs none of the sets below more than {max_drop} of any@5, "
            "all@5 or all@10 on their own questions there; from the fewest candidates of one checked"
        ),
        "sets": sets,
        "data": sources,
    }
    version = f"{VERSION_PREFIX}-{_digest(model)}-floor{model.min_relevance:g}-small{floor:g}from{fewest}"
    shipped = dataclasses.replace(
        model,
        small_min_relevance=floor,
        small_min_candidates=fewest,
        version=version,
        provenance=provenance,
    )
    write_json(out_model, shipped.to_json(), indent=1)
    return {
        "model": str(out_model),
        "version": version,
        "min_relevance": model.min_relevance,
        "min_candidates": model.min_candidates,
        "small_min_relevance": floor,
        "small_min_candidates": fewest,
        "sets": sets,
    }


def refloor(
    model_path: Path, dev_files: Sequence[Path], out_model: Path, max_drop: float = MAX_ANY5_DROP
) -> dict[str, Any]:
    """Choose only the floor of the model in ``model_path`` again, on ``dev_files``; its weights,
    its fit and its provenance stay, with the new choice recorded beside them. For choosing between
    fitted models on the dev sets: a refit on a re-ingested training split is another draw, and the
    better of two on the dev sets is kept."""
    model = _model(model_path)
    _, dev = read_sets(dev_files)
    if not any(line["foreign"] for lines in dev.values() for line in lines):
        raise ValueError("refloor: no dev set has no-answer questions to choose the floor on")
    floor, floor_rule, _, dev_curves = _choose_floor(model, [], dev, max_drop)
    provenance = dict(model.provenance or {})
    provenance.update(
        {
            "min_relevance_rule": floor_rule,
            "dev_at_min_relevance": {
                name: evaluate(model, lines, floor) for name, lines in sorted(dev.items())
            },
            "no_answer_dev": {
                name: [p for p in curve if p["threshold"] == floor] for name, curve in dev_curves.items()
            },
            "refloored": {"command": machine_info()["command"], "from_min_relevance": model.min_relevance},
        }
    )
    # A small stores' floor chosen before stays, never above the new floor (--extend-floor's rule).
    small = min(model.small_min_relevance, floor)
    version = f"{VERSION_PREFIX}-{_digest(model)}-floor{floor:g}" + (
        f"-small{small:g}from{model.small_min_candidates}" if small > 0 else ""
    )
    shipped = dataclasses.replace(
        model, min_relevance=floor, small_min_relevance=small, version=version, provenance=provenance
    )
    write_json(out_model, shipped.to_json(), indent=1)
    return {
        "model": str(out_model),
        "version": version,
        "C": provenance.get("C"),
        "min_relevance": floor,
        "dev_at_min_relevance": provenance["dev_at_min_relevance"],
        "no_answer_dev": provenance["no_answer_dev"],
        "curves": dev_curves,
    }


def _model(path: Path) -> Any:
    from shared.recall.relevance import RelevanceModel

    return RelevanceModel.from_json(json.loads(path.read_text(encoding="utf-8")))
