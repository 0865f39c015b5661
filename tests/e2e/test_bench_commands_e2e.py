"""Every `cuemem bench` command, end to end on tiny data: the console script as a subprocess, then
the report's shape and counts (never its timings: the benchmarks measure time, these tests only
check that each one still runs to its report and counts what it was given).

`cuemem bench locomo`, `cuemem bench suite` and the ranker's two commands have their own files
(``test_bench_locomo_e2e.py``, ``test_bench_ranker_e2e.py``,
``test_bench_suite_e2e.py``). ``BENCH_COMMANDS`` lists the
commands these files cover; a new command without a test here fails
``test_every_bench_command_has_an_end_to_end_test``.

The services: the machine's Postgres (a scratch database per run, made and dropped by the
benchmark on ``PG_ADMIN``), the test Redis database (``CUEMEM_TEST_REDIS``, which the benchmarks
flush), for `bench serve` the embedded default, and for `bench footprint` a redis-server of its
own. Each run's temporary directories (data dirs, Qdrant shards) go under a directory of the
test's own (``TMPDIR``; ``tests.support.bench`` says why not pytest's), and no process of theirs
may outlive the command.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.bench import bench_dir
from tests.support.cli import Run, child_env, cuemem
from tests.support.databases import PG_ADMIN, REDIS_URL

BENCH_COMMANDS = {
    "decay",
    "footprint",
    "ingest",
    "latency",
    "locomo",
    "ranker-features",
    "serve",
    "small-stores",
    "suite",
    "train-ranker",
}


@pytest.fixture
def work() -> Iterator[Path]:
    with bench_dir() as path:
        yield path


def run_bench(work: Path, command: str, *args: str, **env: str) -> tuple[Run, Path]:
    out = work / "out"
    # CUEMEM_DATA_DIR only names the directory whose processes must all be gone afterwards.
    run_env = child_env(CUEMEM_DATA_DIR=str(work), TMPDIR=str(work), **env)
    run = cuemem(None, "bench", command, "--out", str(out), *args, env=run_env)
    assert run.code == 0, str(run)
    return run, out


def results_of(out: Path) -> dict[str, Any]:
    assert (out / "report.md").read_text(encoding="utf-8").startswith("# ")
    results: dict[str, Any] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["machine"]["command"].startswith("cuemem bench ")
    return results


def test_every_bench_command_has_an_end_to_end_test() -> None:
    from bench.cli import bench_app

    names = {c.name or (c.callback.__name__ if c.callback else "") for c in bench_app.registered_commands}
    assert names == BENCH_COMMANDS, "a `cuemem bench` command without an end-to-end test, or one gone"


def test_bench_decay_recomputes_and_syncs_the_sizes_given(work: Path) -> None:
    _, out = run_bench(
        work, "decay", "--sizes", "300,120", "--index-sizes", "200", "--database-url", PG_ADMIN
    )
    results = results_of(out)
    recompute = results["recompute"]
    assert [r["memories"] for r in recompute] == [300, 120]
    for r in recompute:
        # Every row starts at score 0: the first run writes most of them, the same `now` again none.
        assert 0 < r["changed"] <= r["memories"], r
        assert r["rerun_changed"] == 0, r
        assert 0 <= r["one_hour_later_changed"] <= r["memories"], r
    assert [r["points"] for r in results["index_sync"]] == [200]


def test_bench_latency_loads_and_asks_what_it_was_told(tmp_path: Path, work: Path) -> None:
    _, out = run_bench(
        work, "latency",
        "--sizes", "60", "--queries", "10", "--clients", "2", "--pool-size", "50",
        "--no-deterministic-1m", "--no-hnsw", "--pg-admin", PG_ADMIN, "--redis-url", REDIS_URL,
        HOME=str(tmp_path),  # the pool's vector cache (~/.cache/cuemem-bench) stays in the test
    )  # fmt: skip
    results = results_of(out)
    load = results["load"]
    others = [u for u in load if u.startswith("other-")]
    assert load["user-60"]["rows"] == 60 and load["user-60"]["turns"] == 120  # 2 turns per memory
    assert results["vector_backend"]["points"] == 60 + sum(load[u]["rows"] for u in others)
    assert results["conversation_log"]["points"] == sum(
        v["turns"] for v in load.values() if isinstance(v, dict)
    )
    assert results["pool"]["size"] == 50
    modes = {"single/precomputed", "single/e5", "concurrent2/precomputed", "concurrent2/e5"}
    assert set(results["recall"]["60"]) == modes
    for mode, summary in results["recall"]["60"].items():
        assert summary["n"] == 10 and sum(summary["answered_by"].values()) == 10, (mode, summary)
        # CPU per recall from the processes' counters: the recall process spent some, and the total
        # is at least that (Postgres, which every recall reads, adds to it).
        cpu = summary["cpu_ms_per_recall"]
        assert cpu["recall process (clients, embedded index, embedder)"] > 0, (mode, cpu)
        assert cpu["total"] >= cpu["recall process (clients, embedded index, embedder)"], (mode, cpu)
        assert cpu.get("postgres (all backends)", 0) > 0, (mode, cpu)
    assert results["recall_without_log"]["60"]["single/e5"]["n"] == 10
    assert "recall_hnsw" not in results and "deterministic_1m" not in results
    verdicts = {t["target"]: t["verdict"] for t in results["targets"]}
    assert verdicts["deterministic stage p95 <= 5 ms at 1M memories"] == "not measured"
    # Measured at 60 memories, a 100k target is never called met.
    assert all(v.endswith("not 100k)") for t, v in verdicts.items() if "100k" in t), verdicts


def test_bench_latency_times_stage_1_for_a_large_user_and_shows_the_cue_querys_plan(work: Path) -> None:
    # The scale test on a small --big-rows: the big user's stage 1 and the plan of its cue query
    # (``bench/latency_postgres.explain_cue_query`` binds the statement recall builds once).
    _, out = run_bench(
        work, "latency",
        "--sizes", "60", "--queries", "10", "--clients", "1", "--pool-size", "50", "--no-hnsw",
        "--big-rows", "1000", "--pg-admin", PG_ADMIN, "--redis-url", REDIS_URL,
    )  # fmt: skip
    scale = results_of(out)["deterministic_1m"]
    assert scale["user"] == "user-big-1000" and scale["rows_for_user"] == 1000
    plans = scale["explain"]["user-big-1000"]
    fetched = [p for p in plans if p["fetched"]]
    assert fetched, plans
    for p in fetched:
        # The plan is of the query recall runs, with this user's scope and the cues it fetched.
        text = "\n".join(p["plan"])
        assert "holding" in text and "'user-big-1000'" in text, text
        assert all(cue in text for cue in p["fetched"]), (p["fetched"], text)


def test_bench_ingest_counts_every_turn_to_the_end(work: Path) -> None:
    _, out = run_bench(
        work, "ingest",
        "--events", "20", "--workers", "1", "--steady-seconds", "2", "--steady-rate", "2",
        "--noop-tasks", "100", "--pg-admin", PG_ADMIN, "--redis-url", REDIS_URL,
    )  # fmt: skip
    results = results_of(out)
    assert list(results["phases"]) == ["1"]
    phase = results["phases"]["1"]
    assert phase["noop"]["tasks"] == 100
    burst = phase["pipeline"]["throughput"]
    assert burst["events"] == 20 and burst["states"] == {"done": 20}, burst
    assert 0 < burst["memorable_events"] <= 20
    # The raw-embedding yardstick embeds exactly the passages the pipeline embedded.
    assert phase["raw_embedding"]["passages"] == burst["passages"] > 0
    assert phase["pipeline"]["steady"]["events"] == 4  # 2 turns/s for 2 s
    assert len(results["targets"]) == 5


def test_bench_serve_ingests_then_answers_recalls(work: Path) -> None:
    _, out = run_bench(work, "serve", "--workers", "1", "--clients", "1", "--seconds", "5", "--turns", "50")
    results = results_of(out)
    assert results["ingest"]["turns"] == 50
    summary = json.loads(results["ingest"]["summary"].strip().splitlines()[-1])
    assert summary["published"] == 50 and summary["pending"] == 0, summary
    [run] = results["runs"]
    assert run["api_processes"] == 1 and run["errors"] == 0, run
    # The clients start before the run's end, so each asks at least once; how many is a timing.
    assert run["recalls"] >= 1 and run["speedup"] == 1.0, run


def test_bench_footprint_samples_every_deployed_process(work: Path) -> None:
    _, out = run_bench(
        work, "footprint",
        "--idle-seconds", "5", "--load-seconds", "5", "--batch-every-s", "60", "--pg-admin", PG_ADMIN,
    )  # fmt: skip
    results = results_of(out)
    processes = results["processes"]
    assert set(processes) == {"api", "worker", "index owner", "beat", "flower", "redis"}
    for name, p in processes.items():
        for phase in ("idle", "load"):
            # Every process was alive and sampled: a tree that died reads 0 MiB.
            assert p[phase]["rss_median_mb"] > 0 and p[phase]["cores_mean"] >= 0, (name, p)
    load = results["load"]
    # Each load thread sends once at its start, so each kind is counted; how many is a timing.
    assert load["errors"] == 0 and load["turns"] >= 1 and load["recalls"] >= 1, load
    assert load["batches"] >= 1, load
    assert results["migrate"]["rss_peak_mb"] > 0


def test_bench_small_stores_writes_a_file_of_one_store_per_question(work: Path) -> None:
    from bench.locomo_data import load_locomo

    def session(sample_id: str, n: int) -> list[dict[str, str]]:
        return [{"speaker": "Ann", "dia_id": f"D{n}:1", "text": f"{sample_id} said thing {n}"}]

    samples = []
    for sample_id in ("u1", "u10"):
        conv: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bo"}
        for n in range(1, 6):
            conv[f"session_{n}"] = session(sample_id, n)
            conv[f"session_{n}_date_time"] = f"1:00 pm on {n} May, 2023"
        qa = [
            {"question": f"thing {n}?", "answer": "x", "evidence": [f"D{n}:1"], "category": 4} for n in (1, 3)
        ]
        samples.append({"sample_id": sample_id, "conversation": conv, "qa": qa})
    data, out = work / "tiny.json", work / "stores" / "small.json"
    data.write_text(json.dumps(samples), encoding="utf-8")
    env = child_env(CUEMEM_DATA_DIR=str(work), TMPDIR=str(work))
    run = cuemem(
        None, "bench", "small-stores", "--data", str(data), "--out", str(out), "--extra", "1", env=env
    )
    assert run.code == 0, str(run)
    assert "4 stores of 8 sessions in all (0 questions left out" in run.stdout
    stores = load_locomo(out)
    assert [c.sample_id for c in stores] == ["u1-q0", "u1-q1", "u10-q0", "u10-q1"]
    for store in stores:
        (question,) = store.questions
        assert len({t.session for t in store.turns}) == 2
        assert set(question.evidence.ids) <= {t.dia_id for t in store.turns}
        assert all(t.text.startswith(store.sample_id.split("-q")[0] + " ") for t in store.turns)
    # Bad input: a clear error naming the option, and nothing written.
    missing = cuemem(
        None,
        "bench",
        "small-stores",
        "--data",
        str(work / "nope.json"),
        "--out",
        str(work / "x.json"),
        env=env,
    )
    assert missing.code == 2 and "--data" in missing.stderr and "does not exist" in missing.stderr, str(
        missing
    )
    data.write_text(json.dumps([{"sample_id": "u1", "conversation": {}, "qa": []}]), encoding="utf-8")
    empty = cuemem(None, "bench", "small-stores", "--data", str(data), "--out", str(work / "x.json"), env=env)
    assert empty.code == 2 and "no turns" in empty.stderr, str(empty)
    assert not (work / "x.json").exists()
    same = cuemem(None, "bench", "small-stores", "--data", str(data), "--out", str(data), env=env)
    assert same.code == 2 and "--out" in same.stderr and "overwrite --data" in same.stderr, str(same)
    data.write_text(json.dumps(samples), encoding="utf-8")
    stores_dir = out.parent  # a directory where the file should go
    blocked = cuemem(
        None, "bench", "small-stores", "--data", str(work / "tiny.json"), "--out", str(stores_dir), env=env
    )
    assert blocked.code == 2 and "--out" in blocked.stderr and "cannot write" in blocked.stderr, str(blocked)
