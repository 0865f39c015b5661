"""`cuemem bench suite`, end to end on tiny dev files the test writes (each set's file under the
name the suite looks for): the console script on the embedded default, then its one table against
a hand count, and a second run over the stored data that re-ingests nothing and answers the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.bench import bench_dir
from tests.support.cli import Run, child_env, cuemem
from tests.support.locomo_files import BM25_FOUND, EVIDENCE, SAMPLES, _covered, _sample

BASELINES = ("bm25", "dense", "hybrid")


def _madial(sample_id: str, records: list[str], queries: list[tuple[str, list[str]]]) -> dict[str, Any]:
    """MADial's shape: each record a one-turn session of its own; the query is the dialogue so far."""
    sample = _sample(sample_id, "user", "assistant", [[r] for r in records], [])
    sample["qa"] = [{"question": q, "answer": "", "evidence": ev, "category": 4} for q, ev in queries]
    return sample


FILES: dict[str, list[dict[str, Any]]] = {
    "locomo10.json": SAMPLES,
    "longmemeval_s_dev40.json": [
        _sample(
            "lme-1",
            "user",
            "assistant",
            [["I adopted a greyhound called Comet last spring."], ["My new job starts in Lisbon in March."]],
            [{"question": "greyhound?", "answer": "", "evidence": ["D1:1"], "category": 4}],
        ),
        _sample(
            "lme-10",
            "user",
            "assistant",
            [["I switched from piano to the cello this year."], ["We repainted the kitchen yellow."]],
            [{"question": "cello?", "answer": "", "evidence": ["D1:1"], "category": 3}],
        ),
    ],
    "madial_dev_bart.json": [
        _madial(
            "madial-zh-Bart",
            [
                "去年夏天在青岛学会了冲浪 [海边, 开心]",
                "考研失败后在家哭了一整天 [家里, 难过]",
                "第一次养猫 [家里, 温暖]",
            ],
            [("用户: 最近想去海边玩。\n助手: 好啊，想去哪里？\n用户: 想再试试冲浪", ["D1:1"])],
        ),
        _madial(
            "madial-en-Bart",
            ["Ran my first marathon in Boston [city, proud]", "Lost my grandfather's watch [home, sad]"],
            [
                (
                    "user: I'm thinking of running again.\nassistant: Any race in mind?\nuser: a marathon",
                    ["D1:1"],
                )
            ],
        ),
    ],
}


def run_suite(work: Path, *args: str) -> tuple[Run, dict[str, Any]]:
    root = work / "dev"
    root.mkdir(exist_ok=True)
    for name, samples in FILES.items():
        (root / name).write_text(json.dumps(samples, ensure_ascii=False), encoding="utf-8")
    out = work / f"out{len(list(work.glob('out*')))}"
    out.mkdir()
    state = work / "state"
    env = child_env(CUEMEM_DATA_DIR=str(state), CUEMEM_EMBEDDER="hash")
    run = cuemem(
        None,
        "bench",
        "suite",
        "--data-root",
        str(root),
        "--out",
        str(out),
        "--data-dir",
        str(state),
        *args,
        env=env,
    )
    assert run.code == 0, str(run)
    assert (out / "report.md").read_text(encoding="utf-8").startswith("# Dev-set suite")
    return run, {"suite": json.loads((out / "results.json").read_text(encoding="utf-8")), "out": out}


def _rows(out: Path, name: str) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in (out / name / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    ]


def test_bench_suite_runs_every_set_and_its_table_matches_a_hand_count() -> None:
    with bench_dir() as work:
        check_suite(work)


def check_suite(work: Path) -> None:
    run, got = run_suite(work)
    suite, out = got["suite"], got["out"]
    sets = suite["sets"]
    assert list(sets) == ["locomo", "longmemeval-dev", "madial-zh", "madial-en"]
    assert [sets[s]["conversations"] for s in sets] == [
        ["conv-1", "conv-10"], ["lme-1", "lme-10"], ["madial-zh-Bart"], ["madial-en-Bart"]
    ]  # fmt: skip
    assert [c["metric"] for c in sets["locomo"]["cells"]] == [
        "any@5",
        "all@5",
        "all@10",
        "all@10 within 1,000 tokens",
    ]
    assert [c["metric"] for c in sets["madial-en"]["cells"]] == ["R@1", "R@5", "hit@5"]

    # LoCoMo's headline is categories 1-4: five scored questions, four of which BM25 finds in full.
    locomo = {c["metric"]: c for c in sets["locomo"]["cells"]}
    assert (sets["locomo"]["questions"], sets["locomo"]["scored"]) == (6, 5)
    assert locomo["any@5"]["bm25"] == pytest.approx(len(BM25_FOUND) / 5)
    assert locomo["all@10"]["bm25"] == pytest.approx(4 / 5)
    rows = _rows(out, "locomo")
    own = [r for r in rows if (r["sample_id"], r["qa"]) in EVIDENCE and r["category"] != 5]
    expected_any5 = sum(
        bool(_covered(r["ranked"]["cuemem"], 5) & EVIDENCE[(r["sample_id"], r["qa"])]) for r in own
    )
    assert locomo["any@5"]["cuemem"] == pytest.approx(expected_any5 / 5, abs=1e-6)

    # Every cell's verdict, recounted: cuemem at least the best baseline, or by how much it fails.
    for name, s in sets.items():
        for c in s["cells"]:
            best = max(c[b] for b in BASELINES)
            want = "holds" if c["cuemem"] >= best - 1e-6 else f"fails by {best - c['cuemem']:.3f}"
            assert c["verdict"] == want, (name, c)
            assert f"{c['verdict']:>14}  {name} {c['metric']}: cuemem {c['cuemem']}" in run.stdout
        assert set(s["tokens@10"]) == {"cuemem", *BASELINES}
        assert s["recall_ms"]["p50"] is not None
        assert s["rank_ms"]["p50"] is not None  # the ranking's own share, from every trace

    # The no-answer protocol: each conversation's questions asked of the other's user.
    na = sets["locomo"]["no_answer"]
    assert (na["foreign_queries"], na["own_questions"]) == (7, 6)
    assert na["as_is"]["threshold"] == 0.0 and na["as_is"]["drop"] == 0.0
    every_own = sum(
        bool(_covered(r["ranked"]["cuemem"], 5) & EVIDENCE[(r["sample_id"], r["qa"])])
        for r in rows
        if (r["sample_id"], r["qa"]) in EVIDENCE
    )
    assert na["as_is"]["own_any@5"] == pytest.approx(every_own / 6, abs=1e-6)
    empties = [p["empty"] for p in na["curve"]]
    assert empties == sorted(empties) and empties[-1] <= 1.0
    assert sets["longmemeval-dev"]["no_answer"]["foreign_queries"] == 2
    assert "two conversations" in sets["madial-zh"]["no_answer"]["note"]

    # Again over the stored data, two sets: nothing new stored, the same answers.
    assert sorted(p.name for p in (work / "state").iterdir()) == sorted(sets)  # DIR/<set>
    _, again = run_suite(work, "--sets", "madial-en,locomo", "--no-no-answer")
    assert list(again["suite"]["sets"]) == ["madial-en", "locomo"]
    for name in ("madial-en", "locomo"):
        assert again["suite"]["sets"][name]["cells"] == sets[name]["cells"], name
        first, second = (
            json.loads((o / name / "results.json").read_text(encoding="utf-8")) for o in (out, again["out"])
        )
        # Re-published turns are the stored ones (same event ids): final at once, nothing added.
        states = {sample: c["states"] for sample, c in second["timings"]["ingest"]["conversations"].items()}
        assert all(set(s) == {"done"} for s in states.values()), states
        assert second["cuemem"]["memory"] == first["cuemem"]["memory"], name
        assert again["suite"]["sets"][name]["no_answer"] is None


def test_bench_suite_names_an_unknown_set_and_a_missing_file(tmp_path: Path) -> None:
    env = child_env(CUEMEM_DATA_DIR=str(tmp_path / "state"), COLUMNS="300")  # no wrapped error lines
    bad = cuemem(None, "bench", "suite", "--sets", "locomo,madial", "--out", str(tmp_path / "o"), env=env)
    assert bad.code == 2 and "--sets" in bad.stderr and "madial" in bad.stderr, str(bad)
    missing = cuemem(
        None,
        "bench",
        "suite",
        "--sets",
        "madial-en",
        "--data-root",
        str(tmp_path),
        "--out",
        str(tmp_path / "o"),
        env=env,
    )
    assert missing.code == 2 and "--data-root" in missing.stderr and "madial_dev_bart.json" in missing.stderr
