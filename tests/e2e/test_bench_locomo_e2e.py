"""`cuemem bench locomo`, end to end: the console script on the embedded default (real worker
processes) over a tiny LoCoMo-shaped file the test writes, and the report's numbers against a
hand count.

The file is made so that the plain BM25 baseline's answers are known in advance: each answerable
question is made of words only its evidence turns hold (BM25 finds them first), and two questions
hold a word no turn of their conversation has (BM25 returns nothing; one of them is a word of the
other conversation only: the baselines search one conversation's turns). For every system,
cuemem included, any@k / all@k are then counted again from the report's per-question ranked lists
by the code below, which shares nothing with the benchmark's metric code.

The two sample ids are a colliding pair (``conv-1`` / ``conv-10``): an event id is
``<sample>.<dia_id>``, so a prefix mix-up would credit one conversation's turns to the other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.bench import bench_dir
from tests.support.cli import Run, child_env, cuemem
from tests.support.locomo_files import BM25_FOUND, EVIDENCE, SAMPLES, TURNS, A, B, _covered


def _hand_counts(rows: list[dict[str, Any]], system: str, categories: set[int]) -> dict[str, float]:
    """any@k and all@k over the scored questions of these categories, from the ranked lists."""
    wins = {"any@1": 0, "any@5": 0, "all@5": 0, "all@10": 0}
    scored = 0
    for row in rows:
        wanted = EVIDENCE.get((row["sample_id"], row["qa"]))
        if wanted is None or row["category"] not in categories:
            continue
        scored += 1
        ranked = row["ranked"][system]
        wins["any@1"] += bool(_covered(ranked, 1) & wanted)
        wins["any@5"] += bool(_covered(ranked, 5) & wanted)
        wins["all@5"] += wanted <= _covered(ranked, 5)
        wins["all@10"] += wanted <= _covered(ranked, 10)
    return {name: n / scored for name, n in wins.items()}


def _reported(group: dict[str, Any]) -> dict[str, float]:
    at = group["at_k"]
    return {
        "any@1": at["1"]["recall_any"],
        "any@5": at["5"]["recall_any"],
        "all@5": at["5"]["recall_all"],
        "all@10": at["10"]["recall_all"],
    }


def run_bench(work: Path, *args: str) -> tuple[Run, Path]:
    data = work / "tiny_locomo.json"
    data.write_text(json.dumps(SAMPLES), encoding="utf-8")
    out = work / "out"
    out.mkdir()  # the command runs there
    # The benchmark makes its own data dir under --out; the hash embedder keeps the run short.
    env = child_env(CUEMEM_DATA_DIR=str(out / "data"), CUEMEM_EMBEDDER="hash")
    run = cuemem(None, "bench", "locomo", "--data", str(data), "--out", str(out), *args, env=env)
    return run, out


def test_bench_locomo_end_to_end_matches_a_hand_count() -> None:
    with bench_dir() as work:
        check_report(work)


def check_report(work: Path) -> None:
    run, out = run_bench(work)
    assert run.code == 0, str(run)
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in (out / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert (out / "report.md").read_text(encoding="utf-8").startswith("# LoCoMo retrieval benchmark")

    # Every turn went through the pipeline and was waited for until final.
    ingest = results["timings"]["ingest"]
    assert ingest["turns"] == sum(TURNS.values())
    for sample, turns in TURNS.items():
        states = ingest["conversations"][sample]["states"]
        assert states == {"done": turns}, (sample, states)

    # The data, as counted by hand.
    assert results["data"]["conversations"] == [A, B]
    assert results["questions"] == 7 == len(rows)
    assert results["evidence"]["questions_without_evidence"] == 1
    assert [d["id"] for d in results["evidence"]["dropped"]] == ["D7:3"]
    assert [(n["from"], n["to"]) for n in results["evidence"]["normalised"]] == [("D:2:1", "D2:1")]
    assert {(r["sample_id"], r["qa"]): set(r["evidence"]) for r in rows if r["evidence"]} == EVIDENCE
    everything = results["systems"]["bm25"]["1-5"]
    assert (everything["questions"], everything["scored"], everything["skipped_no_evidence"]) == (7, 6, 1)

    # BM25 by construction: the four findable questions, each with its evidence first.
    bm25 = _reported(everything)
    assert bm25 == pytest.approx({"any@1": 4 / 6, "any@5": 4 / 6, "all@5": 4 / 6, "all@10": 4 / 6}, abs=1e-6)
    for row in rows:
        key = (row["sample_id"], row["qa"])
        ranked = row["ranked"]["bm25"]
        if key in BM25_FOUND:
            assert set(sum(ranked[: len(EVIDENCE[key])], [])) == EVIDENCE[key], (key, ranked)
        elif key in EVIDENCE:
            assert ranked == [], (key, ranked)  # no shared token: BM25 returns nothing
    single_hop = _reported(results["systems"]["bm25"]["4"])
    assert single_hop["any@5"] == 1.0 and single_hop["all@10"] == 1.0

    # Every system's headline numbers agree with a count over its own ranked lists.
    for system in ("cuemem", "bm25", "dense", "hybrid"):
        for group, categories in (("1-5", {1, 2, 3, 4, 5}), ("1-4", {1, 2, 3, 4}), ("4", {4})):
            expected = _hand_counts(rows, system, categories)
            reported = _reported(results["systems"][system][group])
            assert reported == pytest.approx(expected, abs=1e-6), (system, group, reported, expected)
    # cuemem returned something for the questions its keyword path cannot miss.
    for key in BM25_FOUND:
        row = next(r for r in rows if (r["sample_id"], r["qa"]) == key)
        assert _covered(row["ranked"]["cuemem"], 20) & EVIDENCE[key], (key, row["ranked"]["cuemem"])
