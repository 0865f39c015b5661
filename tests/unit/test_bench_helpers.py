"""Pure helpers of the latency and ingest benchmarks (the benchmarks themselves are not tests)."""

from __future__ import annotations

import random
import struct
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from bench import synthetic as S
from bench.common import write_results
from bench.ingest_pipeline import parse_task_times, rate_schedule
from bench.ingest_report import evaluate_targets as ingest_targets
from bench.ingest_report import ratios, where_time_goes
from bench.latency_data import float4_array_binary, noisy_unit
from bench.latency_log import CANNED, MAX_EXTRA_TURNS, LogWriter, exchange, extra_turns, turn_seq
from bench.latency_measure import (
    _Timed,
    _timed_recall,
    fused_timings,
    mean_candidates,
    sources_key,
    stage_samples,
    summarize_records,
)
from bench.latency_report import verdict
from bench.scratch import database_url_for, libpq_url
from shared.events import TurnPublished
from tests.support.fakes import FakeStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def pool() -> tuple[list[S.PoolEntry], list[S.PoolAnalysis | None]]:
    entries = S.make_pool(150, seed=3)
    return entries, [S.analyse_entry(e) for e in entries]


# --- synthetic content -----------------------------------------------------------------------------


def test_pool_is_deterministic_and_distinct() -> None:
    a, b = S.make_pool(120, seed=5), S.make_pool(120, seed=5)
    assert [e.text for e in a] == [e.text for e in b]
    assert len({e.text for e in a}) == len(a) == 120
    assert [e.text for e in S.make_pool(120, seed=6)] != [e.text for e in a]


def test_pool_covers_the_templates_and_most_entries_make_a_memory(pool) -> None:
    entries, analyses = pool
    usable_templates = {e.template for e, a in zip(entries, analyses, strict=True) if a is not None}
    assert len(usable_templates) >= 0.8 * len(S.TEMPLATES)
    assert sum(a is not None for a in analyses) >= 0.8 * len(entries)


def test_sample_values_are_whole_tokens_only_where_their_slot_is(pool) -> None:
    entries, _ = pool
    for e in entries:
        assert e.fill(e.sample) == e.text


def test_substitute_replaces_whole_tokens_only() -> None:
    keys = ["e:350", "e:¥350", "k:2350", "e:2025-03-50", "k:138-350-1234", "e:ord-2024-350"]
    assert S.substitute(keys, {"350": "777"}) == [
        "e:777",
        "e:¥777",
        "k:2350",
        "e:2025-03-50",
        "k:138-777-1234",
        "e:ord-2024-777",
    ]
    assert S.substitute(["e:ord-2024-51234"], {"ORD-2024-51234": "ORD-2026-00001"}) == ["e:ord-2026-00001"]


def test_generated_cues_equal_the_real_pipeline(pool) -> None:
    """The generator's shortcut (substituting values in the pool entry's cue keys) must give exactly
    what extraction gives for the generated text."""
    from shared.events import Role, TurnPublished
    from shared.ingest.extraction import extract
    from shared.language import cues

    entries, analyses = pool
    memories = list(S.generate_memories("u", 400, entries, analyses, seed=1, now=NOW))
    for m in memories:
        text = m.content
        assert tuple(m.cues) == cues.cues_for_memory(text, cues.lexicon_tags(text), cues.entities(text)[:16])
        assert tuple(m.entities) == cues.entities(text)[:16]
    for m in memories[:60]:
        event = TurnPublished("e", "t", "u", "s", 1, Role.USER, m.content, NOW, {})
        drafts = extract(event, 5.0).drafts
        assert len(drafts) == 1
        assert drafts[0].content == m.content
        assert list(drafts[0].cues) == m.cues
        assert drafts[0].type.value == m.type


def test_memories_are_deterministic_per_user_and_seed(pool) -> None:
    entries, analyses = pool

    def gen(user: str, seed: int) -> list[tuple[str, str]]:
        return [
            (m.id, m.content) for m in S.generate_memories(user, 50, entries, analyses, seed=seed, now=NOW)
        ]

    assert gen("a", 1) == gen("a", 1)
    assert gen("a", 1) != gen("b", 1)
    assert gen("a", 1) != gen("a", 2)
    ids = [i for i, _ in gen("a", 1)]
    assert len(set(ids)) == len(ids)


def test_high_cardinality_values_differ_between_memories(pool) -> None:
    entries, analyses = pool
    memories = list(S.generate_memories("u", 300, entries, analyses, seed=1, now=NOW))
    orders = [m.high["order"] for m in memories if "order" in m.high]
    assert len(orders) > 3
    assert len(set(orders)) == len(orders)


def test_queries_alternate_and_entity_queries_hit_a_stored_entity(pool) -> None:
    from shared.language.cues import query_cues

    entries, analyses = pool
    memories = list(S.generate_memories("u", 200, entries, analyses, seed=1, now=NOW))
    queries = S.make_queries(memories, 40, seed=2)
    assert len(queries) == 40
    assert queries == S.make_queries(memories, 40, seed=2)
    kinds = [k for k, _ in queries]
    assert kinds.count("entity") >= 15 and kinds.count("semantic") >= 15
    stored = {c for m in memories for c in m.cues if c.startswith("e:")}
    for kind, q in queries:
        if kind == "entity":
            weights = query_cues(q).keys()
            assert stored & {k for k in weights if k.startswith("e:")}, q


def test_turns_mix_is_deterministic() -> None:
    turns = S.make_turns(400, users=5, seed=1)
    assert turns == S.make_turns(400, users=5, seed=1)
    assert len({t.user_id for t in turns}) == 5
    statements = sum(1 for t in turns if t.role == "user" and t.content not in S.CHIT_CHAT)
    assert 0.4 < statements / len(turns) < 0.7
    assert all(t.role == "user" and t.content not in S.CHIT_CHAT for t in S.make_turns(50, memorable=1.0))


# --- latency helpers ---------------------------------------------------------------------------------


def _record(kind: str, stage: str, **t: float) -> dict:
    return {"kind": kind, "stage": stage, "timings": t}


def test_fused_timings_adds_fusion_and_wall() -> None:
    t = fused_timings(
        {"cues_ms": 1.0, "deterministic_ms": 4.0, "embed_ms": 10.0, "vector_ms": 3.0, "total_ms": 25.0},
        {"by_cues_ms": 2.5, "get_many_ms": 6.0},
        30.0,
    )
    assert t["fusion_ms"] == pytest.approx(7.0)
    # Any stage recall times itself (here a keyword path) is not counted as fusion.
    with_keywords = fused_timings(
        {"cues_ms": 1.0, "deterministic_ms": 4.0, "vector_ms": 3.0, "keyword_ms": 2.0, "total_ms": 25.0},
        {},
        26.0,
    )
    assert with_keywords["fusion_ms"] == pytest.approx(15.0)
    assert t["wall_ms"] == 30.0 and t["by_cues_ms"] == 2.5
    deterministic = fused_timings({"cues_ms": 1.0, "deterministic_ms": 4.0, "total_ms": 5.5}, {}, 6.0)
    assert "fusion_ms" not in deterministic


def test_summaries_per_stage_kind_and_vector_path() -> None:
    records = [
        _record("entity", "deterministic", cues_ms=1.0, deterministic_ms=3.0, total_ms=4.0, wall_ms=5.0),
        _record("semantic", "vector", cues_ms=1.0, deterministic_ms=3.0, vector_ms=2.0, total_ms=20.0),
        _record("semantic", "vector", cues_ms=2.0, deterministic_ms=5.0, vector_ms=4.0, total_ms=30.0),
    ]
    samples = stage_samples(records)
    assert samples["total_ms"] == [4.0, 20.0, 30.0]
    assert samples["vector_ms"] == [2.0, 4.0]
    assert "embed_ms" not in samples
    s = summarize_records(records)
    assert s["n"] == 3
    assert s["answered_by"] == {"deterministic": 1, "vector": 2}
    assert s["all"]["total_ms"]["p50"] == 20.0
    assert s["semantic"]["total_ms"]["n"] == 2
    assert s["vector_path"]["total_ms"]["n"] == 2 and s["vector_path"]["total_ms"]["p50"] == 25.0


def test_fused_timings_leaves_the_log_searches_out_of_fusion() -> None:
    t = fused_timings(
        {"cues_ms": 1.0, "deterministic_ms": 4.0, "vector_ms": 3.0, "turns_ms": 6.0, "total_ms": 25.0},
        {"turn_vector_ms": 4.0, "turn_keyword_ms": 1.5, "turn_rows_ms": 2.0, "log_sources_ms": 3.0},
        26.0,
    )
    # The proxied calls nest inside recall's own stages or fusion; they are not subtracted again.
    assert t["fusion_ms"] == pytest.approx(11.0)
    assert t["turn_vector_ms"] == 4.0


def test_mean_candidates_per_path_over_the_queries_where_it_ran() -> None:
    records = [
        {"candidates": {"cue": 2, "working": 20}},
        {"candidates": {"cue": 0, "working": 20, "vector": 50, "turn_keyword": 7}},
        {"candidates": {}},
        {},
    ]
    assert mean_candidates(records) == {"cue": 1.0, "turn_keyword": 7.0, "vector": 50.0, "working": 20.0}
    summary = summarize_records([{**_record("semantic", "vector", total_ms=1.0), **records[1]}])
    assert summary["candidates_mean"]["vector"] == 50.0


def test_by_sources_is_timed_under_the_step_that_called_it() -> None:
    class Repo:
        def by_sources(self) -> str:
            return "rows"

        def of_user(self) -> str:
            return "turns"

    sink: dict[str, float] = {}
    memories = _Timed(Repo(), sink, {"by_sources": sources_key})
    events = _Timed(Repo(), sink, {"of_user": "turn_rows_ms"})
    assert memories.by_sources() == "rows"  # stage 1: turns in a time window
    assert set(sink) == {"window_sources_ms"}
    events.of_user()  # stage 2 re-reads the log's hits first, then the memories citing them
    memories.by_sources()
    memories.by_sources()
    assert set(sink) == {"window_sources_ms", "turn_rows_ms", "log_sources_ms"}


def test_timed_recall_times_the_repositories_and_working_memory_into_the_sink() -> None:
    class NoTurns:
        def recent(
            self, tenant_id: str, user_id: str, session_id: str | None, limit: int
        ) -> list[TurnPublished]:
            return []

    sink: dict[str, float] = {}
    working_memory = _Timed(NoTurns(), sink, {"recent": "working_memory_ms"})
    result = _timed_recall(FakeStore().uow, sink, "u1", "what do I eat for lunch?", NOW, working_memory)
    assert result.items == []  # no embedder and no index: the vector stage is skipped
    assert "vector_ms" not in result.trace["timings_ms"]
    assert {"working_memory_ms", "by_cues_ms"} <= set(sink)


# --- the conversation log of the latency benchmark ---------------------------------------------------


def test_turn_seqs_are_unique_blocks_per_memory() -> None:
    seqs = [turn_seq(m, o) for m in range(1, 41) for o in range(MAX_EXTRA_TURNS + 1)]
    assert len(set(seqs)) == len(seqs)
    assert turn_seq(1, 0) == 1 and turn_seq(2, 0) == MAX_EXTRA_TURNS + 2
    assert sorted(seqs) == seqs  # a memory's exchange comes before the next memory's
    with pytest.raises(ValueError):
        turn_seq(1, MAX_EXTRA_TURNS + 1)


def test_extra_turns_average_the_requested_mean() -> None:
    rng = random.Random(3)
    draws = [extra_turns(rng, 1.4) for _ in range(4000)]
    assert set(draws) == {1, 2}
    assert sum(draws) / len(draws) == pytest.approx(1.4, abs=0.03)
    assert extra_turns(rng, 0.0) == 0
    assert extra_turns(rng, float(MAX_EXTRA_TURNS)) == MAX_EXTRA_TURNS
    with pytest.raises(ValueError):
        extra_turns(rng, MAX_EXTRA_TURNS + 0.5)


def test_log_writer_wants_one_vector_per_canned_text() -> None:
    with pytest.raises(ValueError, match=f"expected {len(CANNED)} canned vectors, got 1"):
        LogWriter(None, np.zeros((1, 4)), 2.0, 0.01, 7, NOW)
    assert LogWriter(None, np.zeros((len(CANNED), 4)), 2.0, 0.01, 7, NOW).turns == {}


def test_exchange_starts_with_the_memorys_source_turn(pool) -> None:
    entries, analyses = pool
    memories = list(S.generate_memories("u", 300, entries, analyses, seed=1, now=NOW))
    rng, again = random.Random(5), random.Random(5)
    exchanges = [exchange(m, rng, 2.0) for m in memories]
    assert exchanges == [exchange(m, again, 2.0) for m in memories]
    turns = [t for ex in exchanges for t in ex]
    assert len(turns) == 2 * len(memories)
    for m, ex in zip(memories, exchanges, strict=True):
        source = ex[0]
        assert (source.event_id, source.content, source.at) == (m.event_id, m.content, m.created_at)
        assert source.canned is None  # it takes the memory's own vector
        assert source.role == "user" and source.seq == turn_seq(m.seq, 0)
        for t in ex[1:]:
            assert t.canned is not None and t.content == CANNED[t.canned]
            assert t.role == ("user" if t.content in S.CHIT_CHAT else "assistant")
            assert t.session_id == m.session_id and t.at > m.created_at
    keys = [(t.session_id, t.seq) for t in turns]
    assert len(set(keys)) == len(keys)
    assert len({t.event_id for t in turns}) == len(turns)
    replies = [t for t in turns if t.role == "assistant"]
    assert 0.3 < len(replies) / (len(turns) - len(memories)) < 0.5


def test_verdict() -> None:
    assert verdict(24.9, 25) == "met"
    assert verdict(25.1, 25) == "not met"
    assert verdict(None, 25) == "not measured"


def test_noisy_unit_stays_near_its_base() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(size=384).astype(np.float32)
    base /= np.linalg.norm(base)
    v = noisy_unit(base, rng, 0.01)
    assert v.dtype == np.float32
    assert float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-5)
    assert 0.95 < float(v @ base) < 1.0


def test_float4_array_binary_is_postgres_wire_format() -> None:
    values = [0.5, -1.25, 3.0]
    raw = float4_array_binary(values)
    ndim, has_null, oid, size, lower = struct.unpack(">iiiii", raw[:20])
    assert (ndim, has_null, oid, size, lower) == (1, 0, 700, 3, 1)
    body = raw[20:]
    decoded = [struct.unpack(">if", body[i : i + 8]) for i in range(0, len(body), 8)]
    assert decoded == [(4, 0.5), (4, -1.25), (4, 3.0)]


# --- ingest helpers ------------------------------------------------------------------------------------


def test_parse_task_times_reads_celery_success_lines() -> None:
    lines = [
        "[2026-01-01 10:00:00,000: INFO/ForkPoolWorker-1] Task memory.embed[a-1] succeeded in 0.0305s: None",
        "[2026-01-01 10:00:00,001: INFO/MainProcess] Task memory.index[x] succeeded in 1.5e-02s: None",
        "[2026-01-01 10:00:00,002: INFO/ForkPoolWorker-2] Task bench.noop[y] succeeded in 0.0004s: None",
        "[2026-01-01 10:00:00,003: INFO/ForkPoolWorker-2] memory.embed abc done in 30.1 ms, 1 follow-ups",
        "garbage",
    ]
    times = parse_task_times(lines)
    assert times["memory.embed"] == [pytest.approx(30.5)]
    assert times["memory.index"] == [pytest.approx(15.0)]
    assert times["bench.noop"] == [pytest.approx(0.4)]


def test_ratios() -> None:
    r = ratios(events=100, pipeline_s=10.0, passages=50, raw_s=2.0, noop_tasks=1000, noop_s=2.0)
    assert r["embedding_ratio"] == pytest.approx(0.2)
    assert r["overhead_per_event_ms"] == pytest.approx(80.0)
    assert r["noop_ms"] == pytest.approx(2.0)
    assert r["overhead_vs_noop"] == pytest.approx(40.0)
    empty = ratios(events=0, pipeline_s=0.0, passages=0, raw_s=0.0, noop_tasks=0, noop_s=0.0)
    assert set(empty.values()) == {None}


def test_rate_schedule() -> None:
    assert rate_schedule(4.0, 1.0) == [0.0, 0.25, 0.5, 0.75]
    assert rate_schedule(0.0, 10.0) == []
    assert len(rate_schedule(80.0, 30.0)) == 2400


def test_where_time_goes() -> None:
    tp = {
        "events": 100,
        "elapsed_s": 10.0,
        "task_busy_s": {"memory.record": 1.0, "memory.embed": 5.0, "memory.index": 4.0},
    }
    w = where_time_goes(tp, concurrency=2)
    assert w["pipeline_pool_utilisation"] == pytest.approx(0.3)
    assert w["index_owner_utilisation"] == pytest.approx(0.4)
    assert w["share_of_task_time"]["memory.embed"] == pytest.approx(0.5)
    assert w["per_event_busy_ms"]["memory.index"] == pytest.approx(40.0)


def test_ingest_targets_judge_each_worker_count() -> None:
    def phase(embed: float, overhead: float, wm: float, lt: float, rss: float) -> dict:
        steady = {"working_memory_after_return_ms": {"p95": wm, "p99": wm}, "long_term_ms": {"p95": lt}}
        return {
            "ratios": {"embedding_ratio": embed, "overhead_vs_noop": overhead},
            "pipeline": {"steady": steady, "rss_peak_mb": {"w main": rss, "w child": rss / 2}},
        }

    results = {"phases": {"1": phase(0.95, 1.5, 2.0, 300.0, 210.0), "2": phase(0.5, 3.0, 2.0, 1500.0, 410.0)}}
    verdicts = {t["target"].split()[0]: t["verdict"] for t in ingest_targets(results)}
    assert verdicts["ingest"] == "met at N=1 only"
    assert verdicts["pipeline"] == "met at N=1 only"
    assert verdicts["working"] == "met"
    assert verdicts["long-term"] == "met at N=1 only"
    assert verdicts["each"] == "met at N=1 only"


# --- scratch services --------------------------------------------------------------------------------


def test_scratch_urls() -> None:
    assert database_url_for("postgresql+psycopg://postgres@127.0.0.1:5432/test", "x") == (
        "postgresql+psycopg://postgres@127.0.0.1:5432/x"
    )
    assert database_url_for("postgresql+psycopg://u@/postgres?host=/tmp/pg", "b") == (
        "postgresql+psycopg://u@/b?host=/tmp/pg"
    )
    assert libpq_url("postgresql+psycopg://u:p@h:1/d") == "postgresql://u:p@h:1/d"
    assert libpq_url("postgresql://u@h/d") == "postgresql://u@h/d"


def test_random_suffix_is_seeded() -> None:
    assert S.random_suffix(random.Random(1)) == S.random_suffix(random.Random(1))


def test_write_results_records_the_settings_without_the_admin_url(tmp_path: Path) -> None:
    @dataclass
    class Config:
        out: Path
        pg_admin: str = "postgresql+psycopg://admin:secret@db/test"
        sizes: tuple[int, ...] = (1000,)

    def targets(results: dict) -> list[dict]:
        return [{"target": "t", "verdict": "met", "measured": results["measured"]}]

    results = write_results(
        Config(tmp_path),
        tmp_path,
        {"measured": 3},
        time.perf_counter(),
        targets,
        lambda r: f"# {r['measured']}\n",
    )
    assert results["config"] == {"out": str(tmp_path), "sizes": (1000,)}
    assert results["targets"] == [{"target": "t", "verdict": "met", "measured": 3}]
    assert results["duration_s"] >= 0
    assert "secret" not in (tmp_path / "results.json").read_text(encoding="utf-8")
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == "# 3\n"


def test_csv_options_parse_once_and_only_some_want_positive_numbers() -> None:
    import typer

    from bench.cli import _csv_ints, _csv_positive_ints

    assert _csv_ints("100000, 1_000_000,", "--sizes") == [100000, 1000000]
    assert _csv_ints("", "--index-sizes") == []  # decay: no index sync
    assert _csv_positive_ints("1,2,4", "--workers") == [1, 2, 4]
    for bad in ("", "0,1"):
        with pytest.raises(typer.BadParameter, match="must list positive integers"):
            _csv_positive_ints(bad, "--workers")
    for parse in (_csv_ints, _csv_positive_ints):
        with pytest.raises(typer.BadParameter, match="not a comma-separated list of integers"):
            parse("1,x", "--sizes")
