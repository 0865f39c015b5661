"""`cuemem bench locomo`: retrieval recall on LoCoMo, cuemem against three baselines over raw turns.

What it does (the protocol is /work/shared/bench/README.md, "How to score retrieval"):

1. Every turn of every chosen conversation is published as an event through the real pipeline on
   the embedded default (real worker processes, no LLM): user = the sample id, session =
   ``session_<n>``, role ``user`` for both speakers (both are people; the speaker's name is in
   the content and the metadata), event id ``<sample>.<dia_id>``, explicit seq = position in the
   session, time = the session's date (UTC) plus the position in seconds. It waits until every
   event is processed.
2. Every question of a conversation is asked of that user's memory with cuemem's recall (the
   function ``cuemem recall`` uses), ``now`` = one minute after the conversation's last turn.
   A returned item covers the turns named by its sources (working-memory items included).
3. In the same run, three baselines over the same turn texts: BM25 (``bm25s`` over
   ``shared.language.text.tokens``), dense (the same embedding model as cuemem, cosine over one vector
   per turn) and hybrid (reciprocal-rank fusion, k = 60, of the two). One item = one turn.
4. Metrics (``bench.metrics``) per system and category go to ``results.json``,
   ``report.md``, ``questions.jsonl`` (each question's ranked turns per system) and two plots.

The data file is CC BY-NC: it is read from the path given, never copied.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import metrics
from bench.common import machine_info, percentiles, write_json
from bench.ingest_embedding import drafts_of, embedded_texts, measure_raw_embedding
from bench.locomo_baselines import Baselines, cached_passages
from bench.locomo_data import Conversation, LocomoDataError, Question, fit_turns, load_locomo
from bench.locomo_report import REFERENCE_BM25, render_report, write_plots
from bench.no_answer import ask_foreign, choose, curve

log = logging.getLogger(__name__)

SYSTEMS = ("cuemem", "bm25", "dense", "hybrid")
# The conversations recall's constants are tuned on (docs/BENCHMARKS.md); the rest are held out.
TUNING_SPLIT = ("conv-26", "conv-30")
DATA_MARKER = ".cuemem-bench-locomo"


@dataclass
class _Record:
    """Everything measured for one question."""

    question: Question
    items: dict[str, list[metrics.Item]] = field(default_factory=dict)
    ranked: dict[str, list[list[str]]] = field(default_factory=dict)  # dia_ids per item, per system
    stage: str = ""
    scores: list[float] = field(default_factory=list)  # cuemem's item scores, in rank order
    recall_ms: float = 0.0
    trace_ms: float = 0.0
    rank_ms: float = 0.0  # the relevance model's share (features and scores), from the trace


def _fresh_data_dir(out_dir: Path) -> Path:
    data_dir = out_dir / "data"
    if data_dir.exists() and any(data_dir.iterdir()):
        if not (data_dir / DATA_MARKER).exists():
            raise LocomoDataError(
                f"{data_dir} exists and was not made by this benchmark; remove it or pass --data-dir"
            )
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / DATA_MARKER).write_text("made by cuemem bench locomo; deleted by its next run\n")
    return data_dir


def ingest_conversations(rt: Any, convs: Sequence[Conversation], progress: bool = True) -> dict[str, Any]:
    """Publish every turn of ``convs`` through the runtime's real pipeline, one conversation at a
    time, and wait until each is processed; each conversation's counts and timings. On a data dir
    that holds them already, the turns are duplicates and nothing new is stored."""
    from producers.publisher import Publisher
    from service.operations.waiting import wait_for

    say = (lambda msg: print(msg, file=sys.stderr, flush=True)) if progress else (lambda msg: None)
    done: dict[str, Any] = {}
    for conv in convs:
        t0 = time.perf_counter()
        with Publisher.from_settings(rt.settings) as publisher:
            # An import: a conversation published as `cuemem ingest` does, in batches.
            result = publisher.publish_batch([t.event() for t in conv.turns])
            if result.errors:
                raise RuntimeError(f"{conv.sample_id}: turns refused: {result.errors[:3]}")
            ids = [p.ref for p in result.published]
        published_s = time.perf_counter() - t0
        state = wait_for(rt, ids, max(600.0, 3.0 * len(ids)), show=progress)
        took = time.perf_counter() - t0
        done[conv.sample_id] = {
            "turns": len(ids),
            "publish_s": round(published_s, 3),
            "total_s": round(took, 3),
            "turns_per_s": round(len(ids) / took, 3) if took else None,
            "states": dict(state.counts),
        }
        if state.reasons:
            log.warning(
                "%s: %d events not processed: %s",
                conv.sample_id,
                len(state.reasons),
                dict(list(state.reasons.items())[:5]),
            )
        say(f"{conv.sample_id}: {len(ids)} turns processed in {took:.1f} s {dict(state.counts)}")
    return done


def run_locomo(
    data_path: Path,
    out_dir: Path,
    conversations: int | None = None,
    data_dir: Path | None = None,
    k_max: int = 20,
    progress: bool = True,
    samples: Sequence[str] | None = None,
    questions: int | None = None,
    no_answer: bool = False,
    yardstick: bool = True,
) -> dict[str, Any]:
    """Run the benchmark and write its results into ``out_dir``; returns what results.json holds.

    ``samples``: only these sample ids (in the file's order); ``conversations``: then only the
    first N; ``questions``: only the first N questions of each. ``no_answer``: also the no-answer
    protocol (``bench.no_answer``): each conversation's questions asked of the next one's user.
    ``yardstick``: on a fresh ingest, also time the same texts through the model alone."""
    from tqdm import tqdm

    from service.operations.recall import recall_for
    from shared.language.text import approx_token_count
    from shared.models import RECALLABLE_STATUSES
    from shared.settings import Settings
    from workers.runtime.local import open_runtime

    info = machine_info()
    convs = choose(load_locomo(data_path), samples, conversations, questions)
    out_dir.mkdir(parents=True, exist_ok=True)
    fresh = data_dir is None  # a run over stored data (a recall re-run) ingests nothing new
    if data_dir is None:
        data_dir = _fresh_data_dir(out_dir)
    settings = Settings().model_copy(update={"data_dir": data_dir})
    turns_cut = fit_turns(convs, settings.max_content_chars)
    started = time.perf_counter()
    say = (lambda msg: print(msg, file=sys.stderr, flush=True)) if progress else (lambda msg: None)

    ingest: dict[str, Any] = {"conversations": {}}
    records: list[_Record] = []
    diagnostics: dict[str, Any] = {}
    baseline_ms: dict[str, list[float]] = {"index": [], "query": []}
    with open_runtime(settings, start_workers=not settings.broker_url, command="cuemem bench locomo") as rt:
        say(f"locomo: {len(convs)} conversation(s), data dir {rt.settings.resolved_data_dir}")
        # 1. Ingest, one conversation at a time so that each gets its own timing.
        ingest["conversations"] = ingest_conversations(rt, convs, progress)
        ingest["total_s"] = round(sum(c["total_s"] for c in ingest["conversations"].values()), 3)
        ingest["turns"] = sum(c["turns"] for c in ingest["conversations"].values())
        rt.stop_workers()  # frees the embedded index for this process's searches
        if fresh and yardstick and ingest["turns"]:
            # The yardstick: the same texts (drafts and context windows) through the model alone,
            # in as many single-threaded processes as the pipeline had.
            events = [t.event() for conv in convs for t in conv.turns]
            texts = embedded_texts(events, drafts_of(events))
            say(f"locomo: embedding the pipeline's {len(texts)} texts alone, for comparison")
            raw = measure_raw_embedding(texts, rt.settings.worker_concurrency, one_per_call=False)
            ingest["embedding_only"] = raw
            ingest["ratio_to_embedding_only"] = round(ingest["total_s"] / raw["batched_s"], 3)

        embedder = rt.container.embedder
        for conv in convs:
            # What became long-term memory: a turn no memory names can only come back as working memory.
            with rt.container.uow() as uow:
                kept = uow.memories.for_user(rt.settings.tenant_id, conv.sample_id, RECALLABLE_STATUSES)
            memorised = {
                dia
                for m in kept
                for s in m.sources
                if (dia := conv.dia_of_event(str(s["event_id"]))) is not None
            }
            diagnostics[conv.sample_id] = {
                "turns": len(conv.turns),
                "memories": len(kept),
                "turns_with_a_memory": len(memorised),
                "memory_tokens_mean": round(sum(approx_token_count(m.content) for m in kept) / len(kept), 2)
                if kept
                else None,
                "turn_tokens_mean": round(
                    sum(approx_token_count(t.content) for t in conv.turns) / len(conv.turns), 2
                ),
                "memorised": sorted(memorised),
            }

            # 2. cuemem's recall, the function `cuemem recall` calls.
            now = conv.now
            conv_records = [_Record(q) for q in conv.questions]
            for rec in tqdm(
                conv_records, desc=f"recall {conv.sample_id}", unit="q", disable=not progress, file=sys.stderr
            ):
                t = time.perf_counter()
                out = recall_for(rt.container, conv.sample_id, rec.question.text, k=k_max, now=now)
                rec.recall_ms = (time.perf_counter() - t) * 1e3
                rec.trace_ms = float(out["trace"]["timings_ms"].get("total_ms", 0.0))
                rec.rank_ms = float(out["trace"]["timings_ms"].get("rank_ms", 0.0))
                rec.stage = out["stage"]
                rec.scores = [float(item["score"]) for item in out["items"]]
                items, ranked = [], []
                for item in out["items"]:
                    dias = frozenset(
                        d for s in item["sources"] if (d := conv.dia_of_event(str(s["event_id"]))) is not None
                    )
                    items.append(metrics.Item(dias, approx_token_count(item["content"])))
                    ranked.append(sorted(dias))
                rec.items["cuemem"], rec.ranked["cuemem"] = items, ranked

            # 3. Baselines over the raw turns, with the same embedding model.
            t = time.perf_counter()
            say(f"{conv.sample_id}: embedding {len(conv.turns)} turns for the baselines")
            embed: Callable[[Sequence[str]], list[list[float]]] = embedder.embed_passages
            if not fresh:  # stored data: the baselines' vectors are kept beside it
                embed = cached_passages(embed, data_dir / "baseline-vectors", str(embedder.model_name))
            base = Baselines([turn.content for turn in conv.turns], embed)
            baseline_ms["index"].append((time.perf_counter() - t) * 1e3)
            turn_items = [
                metrics.Item(frozenset({turn.dia_id}), approx_token_count(turn.content))
                for turn in conv.turns
            ]
            for rec in conv_records:
                t = time.perf_counter()
                ranks = base.rank(rec.question.text, embedder.embed_query(rec.question.text), k_max)
                baseline_ms["query"].append((time.perf_counter() - t) * 1e3)
                for system, order in ranks.items():
                    rec.items[system] = [turn_items[i] for i in order]
                    rec.ranked[system] = [[conv.turns[i].dia_id] for i in order]
            records.extend(conv_records)
        foreign = ask_foreign(rt.container, convs, k_max, progress) if no_answer and len(convs) > 1 else None

    # 4. Metrics, files.
    scores = {
        system: [
            metrics.score_question(r.question.category, r.question.evidence.ids, r.items[system])
            for r in records
        ]
        for system in SYSTEMS
    }
    results_by_system = {system: metrics.aggregate(s) for system, s in scores.items()}
    tuned = [r.question.sample_id in TUNING_SPLIT for r in records]
    splits = {
        name: {
            system: metrics.aggregate([q for q, t in zip(s, tuned, strict=True) if t is want])
            for system, s in scores.items()
        }
        for name, want in (("tuning", True), ("held_out", False))
        if any(t is want for t in tuned)
    }
    ceiling = metrics.aggregate(
        [
            metrics.score_question(
                r.question.category,
                r.question.evidence.ids,
                [metrics.Item(frozenset(diagnostics[r.question.sample_id]["memorised"]), 0)],
                ks=(1,),
                budgets=(),
                k_budgets=(),
            )
            for r in records
        ]
    )
    for d in diagnostics.values():
        d.pop("memorised")
    dropped = [
        {"sample_id": r.question.sample_id, "qa": r.question.number, "id": d}
        for r in records
        for d in r.question.evidence.dropped
    ]
    normalised = [
        {"sample_id": r.question.sample_id, "qa": r.question.number, "from": a, "to": b}
        for r in records
        for a, b in r.question.evidence.normalised
    ]
    stages = Counter(r.stage for r in records)
    returned = [len(r.items["cuemem"]) for r in records]
    results: dict[str, Any] = {
        "benchmark": "locomo",
        "machine": info,
        "command": info["command"],
        "data": {
            "path": str(data_path),
            "conversations": [c.sample_id for c in convs],
            # Turns longer than the event limit, cut to it for cuemem and the baselines alike.
            "turns_cut_to_limit": turns_cut,
        },
        "settings": {
            "k_max": k_max,
            "ks": list(metrics.KS),
            "budgets": list(metrics.BUDGETS),
            "embedding_model": getattr(embedder, "model_name", None),
            "importance_threshold": settings.importance_threshold,
            "budget_rule": "rank-order prefix whose tokens fit; the first item that does not fit "
            "ends the cut",
            "tokens": "shared.language.text.approx_token_count of each returned item's content",
        },
        "questions": len(records),
        "evidence": {
            "dropped_ids": len(dropped),
            "dropped": dropped,
            "normalised_ids": len(normalised),
            "normalised": normalised,
            "questions_without_evidence": sum(1 for r in records if not r.question.evidence.ids),
        },
        "systems": results_by_system,
        # The same metrics on the tuning split (TUNING_SPLIT) and on the other conversations.
        "splits": {"tuning_conversations": list(TUNING_SPLIT), **splits},
        "cuemem": {
            "stages": dict(stages),
            "items_returned": {
                "mean": round(sum(returned) / len(returned), 3) if returned else None,
                "fewer_than_k": sum(1 for n in returned if n < k_max),
            },
            "ceiling": {
                g: {
                    "recall_any": v["at_k"]["1"]["recall_any"],
                    "recall_all": v["at_k"]["1"]["recall_all"],
                    "fraction": v["at_k"]["1"]["fraction"],
                }
                for g, v in ceiling.items()
            },
            "ceiling_note": "recall if every memory of the user were returned: only turns that are a "
            "source of some recallable memory can ever be covered",
            "memory": diagnostics,
        },
        "timings": {
            "ingest": ingest,
            "recall_ms": percentiles([r.recall_ms for r in records]),
            "recall_trace_total_ms": percentiles([r.trace_ms for r in records]),
            "recall_rank_ms": percentiles([r.rank_ms for r in records]),
            "baseline_index_ms": percentiles(baseline_ms["index"]),
            "baseline_query_ms": percentiles(baseline_ms["query"]),
            "wall_s": round(time.perf_counter() - started, 3),
        },
        "reference_bm25": REFERENCE_BM25,
    }
    if no_answer:
        results["no_answer"] = (
            curve([(r.question.evidence.ids, r.ranked["cuemem"], r.scores) for r in records], foreign)
            if foreign is not None
            else {"note": "needs two conversations or more: each one's questions go to another user"}
        )
    write_json(out_dir / "results.json", results)
    _write_questions(out_dir / "questions.jsonl", records)
    plots = write_plots(results_by_system, out_dir)
    (out_dir / "report.md").write_text(render_report(results, plots), encoding="utf-8")
    say(f"wrote {out_dir / 'results.json'}, {out_dir / 'report.md'}")
    return results


def _write_questions(path: Path, records: Sequence[_Record]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            row = {
                "sample_id": r.question.sample_id,
                "qa": r.question.number,
                "category": r.question.category,
                "question": r.question.text,
                "evidence": list(r.question.evidence.ids),
                "cuemem_stage": r.stage,
                "recall_ms": round(r.recall_ms, 3),
                "ranked": r.ranked,
                "cuemem_scores": r.scores,
            }
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
