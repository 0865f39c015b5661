"""`cuemem bench suite`: every dev set in one run, one table.

Each set is a LoCoMo-shaped file (../shared/bench/README.md) run by ``bench.locomo.run_locomo``:
every turn through the real pipeline, cuemem's recall against the BM25, dense and hybrid
baselines of the same run over the same turns. The suite then puts the sets' headline metrics
side by side, with a do-no-harm verdict per cell (cuemem at least the best of the three baselines),
the tokens each system returns, cuemem's recall time and the no-answer protocol's curve
(``bench.no_answer``). Each set's own report stays in ``--out/<set>``.

``--data-dir DIR`` keeps each set's cuemem state in ``DIR/<set>``: a set already ingested there is
re-published as duplicates (nothing new is stored) and only recalled again.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import machine_info, machine_markdown, write_json

BASELINES = ("bm25", "dense", "hybrid")
SYSTEMS = ("cuemem", *BASELINES)
# (label, path into a group of ``bench.metrics.aggregate``)
RETRIEVAL = (
    ("any@5", ("at_k", "5", "recall_any")),
    ("all@5", ("at_k", "5", "recall_all")),
    ("all@10", ("at_k", "10", "recall_all")),
    ("all@10 within 1,000 tokens", ("at_k_budget", "10@1000", "recall_all")),
)
# MADial's recall@k is the harness's fraction@k; its hit@k is any@k (README).
MADIAL = (
    ("R@1", ("at_k", "1", "fraction")),
    ("R@5", ("at_k", "5", "fraction")),
    ("hit@5", ("at_k", "5", "recall_any")),
)
TOKENS = ("at_k", "10", "tokens")


@dataclass(frozen=True)
class DevSet:
    file: str
    samples: tuple[str, ...] | None  # None: every sample of the file
    group: str  # the categories of the headline (bench.metrics.GROUPS)
    metrics: tuple[tuple[str, tuple[str, str, str]], ...]


SETS: dict[str, DevSet] = {
    "locomo": DevSet("locomo10.json", None, "1-4", RETRIEVAL),
    "longmemeval-dev": DevSet("longmemeval_s_dev40.json", None, "1-5", RETRIEVAL),
    "madial-zh": DevSet("madial_dev_bart.json", ("madial-zh-Bart",), "1-5", MADIAL),
    "madial-en": DevSet("madial_dev_bart.json", ("madial-en-Bart",), "1-5", MADIAL),
}


def parse_sets(value: str) -> list[str]:
    """``"all"`` or a comma-separated list of set names; ValueError naming the unknown ones."""
    if value.strip() == "all":
        return list(SETS)
    names = list(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    unknown = [n for n in names if n not in SETS]
    if unknown or not names:
        raise ValueError(
            f"unknown set {', '.join(unknown) or '(none given)'}; choose from all, {', '.join(SETS)}"
        )
    return names


def _at(group: dict[str, Any], path: tuple[str, str, str]) -> float | None:
    value = group[path[0]][path[1]][path[2]]
    return None if value is None else float(value)


def verdict(cuemem: float | None, baselines: Sequence[float | None]) -> str:
    """Do no harm: cuemem at least the best baseline (to the 6 decimals results.json keeps)."""
    known = [b for b in baselines if b is not None]
    if cuemem is None or not known:
        return "n/a"
    best = max(known)
    return "holds" if round(cuemem - best, 6) >= 0 else f"fails by {best - cuemem:.3f}"


def summarise_set(name: str, spec: DevSet, results: dict[str, Any]) -> dict[str, Any]:
    """The suite's view of one set's results.json."""
    groups = {s: results["systems"][s][spec.group] for s in SYSTEMS}
    cells = []
    for label, path in spec.metrics:
        values = {s: _at(groups[s], path) for s in SYSTEMS}
        cells.append(
            {"metric": label, **values, "verdict": verdict(values["cuemem"], [values[b] for b in BASELINES])}
        )
    recall_ms = results["timings"]["recall_ms"]
    rank_ms = results["timings"].get("recall_rank_ms", {})
    return {
        "file": results["data"]["path"],
        "conversations": results["data"]["conversations"],
        "group": spec.group,
        "questions": groups["cuemem"]["questions"],
        "scored": groups["cuemem"]["scored"],
        "cells": cells,
        "tokens@10": {s: _at(groups[s], TOKENS) for s in SYSTEMS},
        "recall_ms": {"p50": recall_ms.get("p50"), "p95": recall_ms.get("p95")},
        "rank_ms": {"p50": rank_ms.get("p50"), "p95": rank_ms.get("p95")},
        "no_answer": results.get("no_answer"),
    }


def run_suite(
    data_root: Path,
    out: Path,
    sets: Sequence[str],
    *,
    data_dir: Path | None = None,
    conversations: int | None = None,
    questions: int | None = None,
    no_answer: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    from bench.locomo import run_locomo

    info = machine_info()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    summary: dict[str, Any] = {}
    for name in sets:
        spec = SETS[name]
        if progress:
            print(f"suite: {name} ({spec.file})", file=sys.stderr, flush=True)
        results = run_locomo(
            data_root / spec.file,
            out / name,
            conversations=conversations,
            data_dir=None if data_dir is None else data_dir / name,
            progress=progress,
            samples=spec.samples,
            questions=questions,
            no_answer=no_answer,
            yardstick=False,  # the ingest's cost is `cuemem bench locomo`'s and `bench ingest`'s to measure
        )
        summary[name] = summarise_set(name, spec, results)
    suite = {
        "benchmark": "suite",
        "machine": info,
        "command": info["command"],
        "settings": {
            "data_root": str(data_root),
            "data_dir": None if data_dir is None else str(data_dir),
            "conversations_per_set": conversations,
            "questions_per_conversation": questions,
            "no_answer": no_answer,
            "rule": "do no harm: cuemem >= the best of BM25, dense and hybrid of the same run, per cell",
        },
        "sets": summary,
        "wall_s": round(time.perf_counter() - started, 3),
    }
    write_json(out / "results.json", suite)
    (out / "report.md").write_text(render(suite), encoding="utf-8")
    return suite


def _f(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def render(suite: dict[str, Any]) -> str:
    lines = ["# Dev-set suite: cuemem against BM25, dense and hybrid", "", machine_markdown(suite["machine"])]
    s = suite["settings"]
    limits = []
    if s["conversations_per_set"] is not None:
        limits.append(f"the first {s['conversations_per_set']} conversation(s) of each set")
    if s["questions_per_conversation"] is not None:
        limits.append(f"the first {s['questions_per_conversation']} question(s) of each")
    lines += [
        f"- sets: {', '.join(suite['sets'])}" + (f" ({'; '.join(limits)})" if limits else ""),
        f"- {s['rule']}; each set's full report is in its own directory",
        "",
        "| set | metric | cuemem | BM25 | dense | hybrid | do no harm |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for name, r in suite["sets"].items():
        for c in r["cells"]:
            lines.append(
                f"| {name} | {c['metric']} | {_f(c['cuemem'])} | {_f(c['bm25'])} | {_f(c['dense'])} | "
                f"{_f(c['hybrid'])} | {c['verdict']} |"
            )
        t = r["tokens@10"]
        lines.append(
            f"| {name} | tokens@10 (mean) | " + " | ".join(_f(t[system], 1) for system in SYSTEMS) + " | |"
        )
    lines += [
        "",
        "| set | categories | questions (scored) | cuemem recall p50 / p95 ms "
        "| of it the ranking p50 / p95 ms | no answer: empty as is |",
    ]
    lines.append("|---|---|---|---|---|---|")
    for name, r in suite["sets"].items():
        na = r["no_answer"] or {}
        as_is = na.get("as_is")
        empty = _f(as_is["empty"]) if as_is else na.get("note", "not run")
        lines.append(
            f"| {name} | {r['group']} | {r['questions']} ({r['scored']}) | "
            f"{_f(r['recall_ms']['p50'], 1)} / {_f(r['recall_ms']['p95'], 1)} | "
            f"{_f(r['rank_ms']['p50'], 2)} / {_f(r['rank_ms']['p95'], 2)} | {empty} |"
        )
    for name, r in suite["sets"].items():
        na = r["no_answer"] or {}
        if not na.get("curve"):
            continue
        best = na["best_meeting_target"]
        lines += [
            "",
            f"## No answer, {name}: {na['foreign_queries']} foreign queries, "
            f"{na['own_questions']} own questions",
            "",
            f"Target: {na['target']}; "
            + (f"met at threshold {best['threshold']}." if best else "no threshold meets it."),
            "",
            "| score floor | foreign queries left empty | own any@5 | drop |",
            "|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {p['threshold']} | {_f(p['empty'])} | {_f(p['own_any@5'])} | {_f(p['drop'])} |"
            for p in na["curve"]
        ]
    return "\n".join(lines) + "\n"
