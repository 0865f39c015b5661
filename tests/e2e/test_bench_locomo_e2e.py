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

A, B = "conv-1", "conv-10"


def _turn(dia: str, speaker: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia, "text": text}


def _qa(question: str, evidence: list[str], category: int) -> dict[str, Any]:
    answer = "adversarial_answer" if category == 5 else "answer"  # as in the real file
    return {"question": question, answer: "x", "evidence": evidence, "category": category}


def _sample(
    sample_id: str, a: str, b: str, sessions: list[list[str]], qa: list[dict[str, Any]]
) -> dict[str, Any]:
    conversation: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    for n, texts in enumerate(sessions, 1):
        conversation[f"session_{n}_date_time"] = f"{n + 1}:05 pm on {n + 2} May, 2023"
        conversation[f"session_{n}"] = [
            _turn(f"D{n}:{i}", a if i % 2 else b, text) for i, text in enumerate(texts, 1)
        ]
    # A date without a session list, as conv-26 has: ignored.
    conversation[f"session_{len(sessions) + 1}_date_time"] = "9:00 am on 30 June, 2023"
    return {"sample_id": sample_id, "conversation": conversation, "qa": qa, "observation": {}}


SAMPLES = [
    _sample(
        A,
        "Caroline",
        "Melanie",
        [
            [
                "Hey Mel, how was your week?",
                "I found a quokkaberry at the farmers market on Saturday.",
                "My cousin restores marzipanium clocks in his garage.",
                "That sounds like a lot of fun.",
            ],
            [
                "Good morning! Did you sleep well?",
                "We finally bought a velocitrope for the kids.",
                "See you at the park later.",
            ],
        ],
        [
            _qa("quokkaberry?", ["D1:2"], 4),
            _qa("marzipanium velocitrope?", ["D1:3", "D2:2"], 1),
            _qa("What would she like?", [], 3),
            _qa("zyxquavormelt?", ["D2:1"], 2),
        ],
    ),
    _sample(
        B,
        "Jon",
        "Gina",
        [
            [
                "I polished the glimmerstone from my grandmother yesterday.",
                "Nice, I am still busy with the dance studio.",
                "Shall we meet on Friday?",
            ],
            [
                "My thornquill collection grew by three this month.",
                "The studio opens next week, finally.",
                "Congratulations, that is great news!",
            ],
        ],
        [
            # D7:3 names no turn (dropped); D:2:1 is spelled as in the real file's quirk (normalised).
            _qa("glimmerstone?", ["D1:1; D7:3"], 4),
            _qa("thornquill?", ["D:2:1"], 4),
            # Only conv-1 holds this word: nothing of conv-10 shares a token with it.
            _qa("quokkaberry?", ["D1:2"], 5),
        ],
    ),
]
TURNS = {A: 7, B: 6}
# Evidence after parsing, by hand: (sample, qa) -> ids; questions without any are absent.
EVIDENCE = {
    (A, 0): {"D1:2"},
    (A, 1): {"D1:3", "D2:2"},
    (A, 3): {"D2:1"},
    (B, 0): {"D1:1"},
    (B, 1): {"D2:1"},
    (B, 2): {"D1:2"},
}
# BM25's answers, by construction: the scored questions it finds in full at k = 5, out of 6.
BM25_FOUND = {(A, 0), (A, 1), (B, 0), (B, 1)}


def _covered(ranked: list[list[str]], k: int) -> set[str]:
    out: set[str] = set()
    for item in ranked[:k]:
        out.update(item)
    return out


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
