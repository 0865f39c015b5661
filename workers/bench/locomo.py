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
   ``shared.text.tokens``), dense (the same embedding model as cuemem, cosine over one vector
   per turn) and hybrid (reciprocal-rank fusion, k = 60, of the two). One item = one turn.
4. Metrics (``workers.bench.metrics``) per system and category go to ``results.json``,
   ``report.md``, ``questions.jsonl`` (each question's ranked turns per system) and two plots.

The data file is CC BY-NC: it is read from the path given, never copied.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from workers.bench import metrics
from workers.bench.common import machine_info, machine_markdown, percentiles, write_json

log = logging.getLogger(__name__)

SYSTEMS = ("cuemem", "bm25", "dense", "hybrid")
RRF_K = 60
TARGET_ANY_AT_5 = 0.90
TARGET_ALL_AT_10_WITHIN_1000 = 0.85
# The reference BM25 figures of the benchmark README (categories 1-4, all ten conversations).
REFERENCE_BM25 = {
    "fraction@5": 0.440,
    "fraction@10": 0.517,
    "fraction@20": 0.586,
    "any@5": 0.489,
    "any@10": 0.573,
}
DATA_MARKER = ".cuemem-bench-locomo"
SESSION_KEY = re.compile(r"^session_(\d+)$")
SESSION_TIME_FORMAT = "%I:%M %p on %d %B, %Y"


class LocomoDataError(ValueError):
    """The data file is not LoCoMo as the harness knows it."""


# --- the data -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    sample_id: str
    session: int
    position: int  # 1-based, within the session
    dia_id: str
    speaker: str
    text: str
    at: datetime
    caption: str | None = None

    @property
    def content(self) -> str:
        out = f"{self.speaker}: {self.text}"
        if self.caption:
            out += f" [shares a photo: {self.caption}]"
        return out

    @property
    def event_id(self) -> str:
        return f"{self.sample_id}.{self.dia_id}"

    @property
    def session_id(self) -> str:
        return f"session_{self.session}"

    def event(self) -> dict[str, Any]:
        """The turn as a published event (the shape ``Publisher.publish_turn`` takes)."""
        return {
            "event_id": self.event_id,
            "user_id": self.sample_id,
            "session_id": self.session_id,
            "seq": self.position,
            "role": "user",
            "content": self.content,
            "at": self.at.isoformat(),
            "metadata": {"speaker": self.speaker, "dia_id": self.dia_id, "source": "locomo"},
        }


@dataclass(frozen=True)
class Question:
    sample_id: str
    number: int  # position in the sample's qa list
    text: str
    category: int
    evidence: metrics.Evidence


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]

    @property
    def now(self) -> datetime:
        """Just after the conversation: one minute after its latest turn."""
        return max(t.at for t in self.turns) + timedelta(minutes=1)

    def dia_of_event(self, event_id: str) -> str | None:
        prefix = f"{self.sample_id}."
        return event_id[len(prefix) :] if event_id.startswith(prefix) else None


def parse_session_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> 2023-05-08 13:56 UTC."""
    try:
        return datetime.strptime(" ".join(text.split()), SESSION_TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise LocomoDataError(
            f"session time {text!r} does not read as e.g. '1:56 pm on 8 May, 2023'"
        ) from None


def parse_conversation(sample: Any) -> Conversation:
    if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
        raise LocomoDataError("each sample must be an object with a 'conversation' object")
    sample_id = sample.get("sample_id")
    if not isinstance(sample_id, str) or not sample_id:
        raise LocomoDataError("a sample has no 'sample_id'")
    conv = sample["conversation"]
    sessions: list[tuple[int, list[Any]]] = []
    for key, value in conv.items():
        match = SESSION_KEY.match(key)
        if match and isinstance(value, list):  # date-only sessions (no turn list) are ignored
            sessions.append((int(match.group(1)), value))
    turns: list[Turn] = []
    for number, raw_turns in sorted(sessions):
        when = conv.get(f"session_{number}_date_time")
        if not isinstance(when, str):
            raise LocomoDataError(f"{sample_id}: session_{number} has no session_{number}_date_time")
        start = parse_session_time(when)
        for position, raw in enumerate(raw_turns, 1):
            try:
                turns.append(
                    Turn(
                        sample_id=sample_id,
                        session=number,
                        position=position,
                        dia_id=str(raw["dia_id"]),
                        speaker=str(raw["speaker"]),
                        text=str(raw["text"]),
                        at=start + timedelta(seconds=position),
                        caption=str(raw["blip_caption"]) if raw.get("blip_caption") else None,
                    )
                )
            except (KeyError, TypeError):
                raise LocomoDataError(
                    f"{sample_id}: session_{number} turn {position} lacks speaker, dia_id or text"
                ) from None
    if not turns:
        raise LocomoDataError(f"{sample_id}: no turns")
    known = {t.dia_id for t in turns}
    questions = []
    for number, qa in enumerate(sample.get("qa") or []):
        if not isinstance(qa, dict) or "question" not in qa or "category" not in qa:
            raise LocomoDataError(f"{sample_id}: qa {number} lacks 'question' or 'category'")
        questions.append(
            Question(
                sample_id=sample_id,
                number=number,
                text=str(qa["question"]),
                category=int(qa["category"]),
                evidence=metrics.parse_evidence(qa.get("evidence") or [], known),
            )
        )
    speakers = (str(conv.get("speaker_a", "")), str(conv.get("speaker_b", "")))
    return Conversation(sample_id, speakers, turns, questions)


def load_locomo(path: Path) -> list[Conversation]:
    """Read and parse the data file; LocomoDataError (with the reason) when it cannot be used."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LocomoDataError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LocomoDataError(f"{path} is not readable JSON: {exc}") from None
    if not isinstance(raw, list) or not raw:
        raise LocomoDataError(f"{path} must hold a non-empty JSON list of LoCoMo samples")
    return [parse_conversation(sample) for sample in raw]


# --- baselines ----------------------------------------------------------------------------------


def _top(scores: Sequence[float], k: int, *, positive_only: bool = False) -> list[int]:
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if positive_only:
        order = [i for i in order if scores[i] > 0]
    return order[:k]


def rrf(rankings: Iterable[Sequence[int]], k: int, rrf_k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion of full rankings; ties broken by turn order."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (rrf_k + rank + 1)
    return sorted(fused, key=lambda d: (-fused[d], d))[:k]


class Baselines:
    """BM25, dense and hybrid over one conversation's turns (one item = one turn)."""

    def __init__(self, texts: Sequence[str], embed_passages: Callable[[Sequence[str]], list[list[float]]]):
        import bm25s
        import numpy as np

        from shared.text import tokens

        self._tokens = tokens
        self.size = len(texts)
        self._bm25 = bm25s.BM25()
        self._bm25.index([tokens(t) for t in texts], show_progress=False)
        matrix = np.asarray(embed_passages(list(texts)), dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self._vectors = matrix / np.where(norms == 0, 1.0, norms)

    def bm25_scores(self, query: str) -> list[float]:
        query_tokens = self._tokens(query)
        if not query_tokens:
            return [0.0] * self.size
        return [float(s) for s in self._bm25.get_scores(query_tokens)]

    def dense_scores(self, query_vector: Sequence[float]) -> list[float]:
        import numpy as np

        q = np.asarray(query_vector, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        return [float(s) for s in self._vectors @ (q / (norm or 1.0))]

    def rank(self, query: str, query_vector: Sequence[float], k: int) -> dict[str, list[int]]:
        """Each baseline's top ``k`` turn indices. BM25 returns only turns sharing a token."""
        bm25_full = _top(self.bm25_scores(query), self.size, positive_only=True)
        dense_full = _top(self.dense_scores(query_vector), self.size)
        return {
            "bm25": bm25_full[:k],
            "dense": dense_full[:k],
            "hybrid": rrf([bm25_full, dense_full], k),
        }


# --- the run --------------------------------------------------------------------------------


@dataclass
class _Record:
    """Everything measured for one question."""

    question: Question
    items: dict[str, list[metrics.Item]] = field(default_factory=dict)
    ranked: dict[str, list[list[str]]] = field(default_factory=dict)  # dia_ids per item, per system
    stage: str = ""
    recall_ms: float = 0.0
    trace_ms: float = 0.0


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


def run_locomo(
    data_path: Path,
    out_dir: Path,
    conversations: int | None = None,
    data_dir: Path | None = None,
    k_max: int = 20,
    progress: bool = True,
) -> dict[str, Any]:
    """Run the benchmark and write its results into ``out_dir``; returns what results.json holds."""
    from tqdm import tqdm

    from producers.publisher import Publisher
    from shared.models import RECALLABLE_STATUSES
    from shared.settings import Settings
    from shared.text import approx_token_count
    from workers.cli import run_recall, wait_for
    from workers.local_runtime import open_runtime

    info = machine_info()
    convs = load_locomo(data_path)
    if conversations is not None:
        convs = convs[:conversations]
    out_dir.mkdir(parents=True, exist_ok=True)
    if data_dir is None:
        data_dir = _fresh_data_dir(out_dir)
    settings = Settings().model_copy(update={"data_dir": data_dir})
    started = time.perf_counter()
    say = (lambda msg: print(msg, file=sys.stderr, flush=True)) if progress else (lambda msg: None)

    ingest: dict[str, Any] = {"conversations": {}}
    records: list[_Record] = []
    diagnostics: dict[str, Any] = {}
    baseline_ms: dict[str, list[float]] = {"index": [], "query": []}
    with open_runtime(settings, start_workers=not settings.broker_url) as rt:
        say(f"locomo: {len(convs)} conversation(s), data dir {rt.settings.resolved_data_dir}")
        # 1. Ingest, one conversation at a time so that each gets its own timing.
        for conv in convs:
            t0 = time.perf_counter()
            with Publisher.from_settings(rt.settings) as publisher:
                ids = [
                    publisher.publish_turn(t.event()).event_id
                    for t in tqdm(
                        conv.turns,
                        desc=f"publishing {conv.sample_id}",
                        unit="turn",
                        disable=not progress,
                        file=sys.stderr,
                    )
                ]
            published_s = time.perf_counter() - t0
            state = wait_for(rt, ids, max(600.0, 3.0 * len(ids)), show=progress)
            took = time.perf_counter() - t0
            ingest["conversations"][conv.sample_id] = {
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
        ingest["total_s"] = round(sum(c["total_s"] for c in ingest["conversations"].values()), 3)
        ingest["turns"] = sum(c["turns"] for c in ingest["conversations"].values())
        rt.stop_workers()  # frees the embedded index for this process's searches

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
                out = run_recall(rt, conv.sample_id, rec.question.text, k=k_max, now=now, session=None)
                rec.recall_ms = (time.perf_counter() - t) * 1e3
                rec.trace_ms = float(out["trace"]["timings_ms"].get("total_ms", 0.0))
                rec.stage = out["stage"]
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
            base = Baselines([turn.content for turn in conv.turns], embedder.embed_passages)
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

    # 4. Metrics, files.
    scores = {
        system: [
            metrics.score_question(r.question.category, r.question.evidence.ids, r.items[system])
            for r in records
        ]
        for system in SYSTEMS
    }
    results_by_system = {system: metrics.aggregate(s) for system, s in scores.items()}
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
        "data": {"path": str(data_path), "conversations": [c.sample_id for c in convs]},
        "settings": {
            "k_max": k_max,
            "ks": list(metrics.KS),
            "budgets": list(metrics.BUDGETS),
            "embedding_model": getattr(embedder, "model_name", None),
            "importance_threshold": settings.importance_threshold,
            "budget_rule": "rank-order prefix whose tokens fit; the first item that does not fit "
            "ends the cut",
            "tokens": "shared.text.approx_token_count of each returned item's content",
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
            "baseline_index_ms": percentiles(baseline_ms["index"]),
            "baseline_query_ms": percentiles(baseline_ms["query"]),
            "wall_s": round(time.perf_counter() - started, 3),
        },
        "reference_bm25": REFERENCE_BM25,
    }
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
            }
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


# --- report ----------------------------------------------------------------------------------


def _f(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _group_title(group: str) -> str:
    if group in ("1-4", "1-5"):
        return f"categories {group}"
    return f"category {group} ({metrics.CATEGORY_NAMES[int(group)]})"


def headline(results: dict[str, Any], system: str, group: str = "1-4") -> dict[str, float | None]:
    g = results["systems"][system][group]
    return {
        "any@5": g["at_k"]["5"]["recall_any"],
        "all@10": g["at_k"]["10"]["recall_all"],
        "fraction@5": g["at_k"]["5"]["fraction"],
        "fraction@10": g["at_k"]["10"]["fraction"],
        "fraction@20": g["at_k"]["20"]["fraction"] if "20" in g["at_k"] else None,
        "any@10": g["at_k"]["10"]["recall_any"],
        "any@1000tok": g["at_budget"]["1000"]["recall_any"],
        "all@1000tok": g["at_budget"]["1000"]["recall_all"],
        "fraction@1000tok": g["at_budget"]["1000"]["fraction"],
        "all@10 within 1000tok": g["at_k_budget"]["10@1000"]["recall_all"],
        "tokens@10": g["at_k"]["10"]["tokens"],
    }


def _met(value: float | None, target: float) -> str:
    if value is None:
        return "not measured"
    return "**met**" if value >= target else "**not met**"


def render_report(results: dict[str, Any], plots: Sequence[str]) -> str:
    systems = list(results["systems"])
    out: list[str] = ["# LoCoMo retrieval benchmark\n"]
    out.append(machine_markdown(results["machine"]))
    convs = results["data"]["conversations"]
    ev = results["evidence"]
    ingest = results["timings"]["ingest"]
    out.append(
        f"- data: `{results['data']['path']}` ({len(convs)} conversation(s): {', '.join(convs)}); "
        f"{results['questions']} questions, {ev['questions_without_evidence']} without evidence "
        f"(skipped for recall), {ev['dropped_ids']} evidence id(s) dropped as naming no turn "
        f"({', '.join(d['id'] for d in ev['dropped']) or 'none'}), {ev['normalised_ids']} normalised\n"
        f"- embedding model: {results['settings']['embedding_model']}; k = {results['settings']['k_max']}; "
        f"tokens = `approx_token_count` of each item's content; budget rule: "
        f"{results['settings']['budget_rule']}\n"
        f"- ingest: {ingest['turns']} turns in {ingest['total_s']:.1f} s "
        f"({ingest['turns'] / ingest['total_s']:.2f} turns/s, real worker processes on the "
        "embedded default)\n"
        f"- cuemem recall per question: p50 {results['timings']['recall_ms'].get('p50', 0):.1f} ms, "
        f"p95 {results['timings']['recall_ms'].get('p95', 0):.1f} ms (wall time of the "
        "CLI's recall function)\n"
    )

    out.append("\n## Headline (categories 1–4)\n")
    keys = [
        "any@5",
        "all@10",
        "fraction@5",
        "fraction@10",
        "any@1000tok",
        "all@1000tok",
        "fraction@1000tok",
        "all@10 within 1000tok",
        "tokens@10",
    ]
    out.append("| system | " + " | ".join(keys) + " |")
    out.append("|---|" + "---|" * len(keys))
    for s in systems:
        h = headline(results, s)
        out.append(f"| {s} | " + " | ".join(_f(h[k], 1 if k == "tokens@10" else 3) for k in keys) + " |")

    h = headline(results, "cuemem")
    out.append("\n## Targets (cuemem, categories 1–4)\n")
    out.append("| target | measured | |")
    out.append("|---|---|---|")
    out.append(
        f"| recall_any@5 ≥ {TARGET_ANY_AT_5:.2f} | {_f(h['any@5'])} | {_met(h['any@5'], TARGET_ANY_AT_5)} |"
    )
    out.append(
        f"| recall_all@10 ≥ {TARGET_ALL_AT_10_WITHIN_1000:.2f} within 1,000 tokens "
        f"(top 10, cut at 1,000 tokens) | {_f(h['all@10 within 1000tok'])} | "
        f"{_met(h['all@10 within 1000tok'], TARGET_ALL_AT_10_WITHIN_1000)} |"
    )

    out.append("\n## What this means\n")
    out.append(what_this_means(results) + "\n")

    b = headline(results, "bm25") if "bm25" in results["systems"] else None
    if b is not None:
        ref = results["reference_bm25"]
        out.append("\n## BM25 sanity check (categories 1–4)\n")
        out.append("| | fraction@5 | fraction@10 | fraction@20 | any@5 | any@10 |")
        out.append("|---|---|---|---|---|---|")
        out.append(
            f"| this run | {_f(b['fraction@5'])} | {_f(b['fraction@10'])} | {_f(b['fraction@20'])} | "
            f"{_f(b['any@5'])} | {_f(b['any@10'])} |"
        )
        out.append(
            f"| reference (README, 10 conversations) | {ref['fraction@5']:.3f} | {ref['fraction@10']:.3f} | "
            f"{ref['fraction@20']:.3f} | {ref['any@5']:.3f} | {ref['any@10']:.3f} |"
        )
        if len(convs) < 10:
            out.append(
                f"\nOnly {len(convs)} conversation(s) here: expect a gap to the 10-conversation reference."
            )

    out.append("\n## By k\n\nEach cell: recall_any / recall_all / mean fraction covered (mean tokens).\n")
    for group in metrics.GROUPS:
        first = results["systems"][systems[0]][group]
        out.append(
            f"\n### {_group_title(group)} — {first['questions']} questions, {first['scored']} with evidence\n"
        )
        ks = list(first["at_k"])
        out.append("| system | " + " | ".join(f"k={k}" for k in ks) + " |")
        out.append("|---|" + "---|" * len(ks))
        for s in systems:
            cells = [results["systems"][s][group]["at_k"][k] for k in ks]
            out.append(f"| {s} | " + " | ".join(_cell(c) for c in cells) + " |")

    out.append(
        "\n## By token budget\n\nEach cell: recall_any / recall_all / mean fraction covered "
        "(mean items taken).\n"
    )
    for group in metrics.GROUPS:
        first = results["systems"][systems[0]][group]
        out.append(f"\n### {_group_title(group)}\n")
        budgets = list(first["at_budget"])
        out.append("| system | " + " | ".join(f"{int(b):,} tokens" for b in budgets) + " |")
        out.append("|---|" + "---|" * len(budgets))
        for s in systems:
            cells = [results["systems"][s][group]["at_budget"][b] for b in budgets]
            out.append(f"| {s} | " + " | ".join(_cell(c, items=True) for c in cells) + " |")

    cm = results["cuemem"]
    out.append("\n## cuemem diagnostics\n")
    out.append(
        f"- recall stages: {cm['stages']}; items returned per question: mean "
        f"{cm['items_returned']['mean']}, {cm['items_returned']['fewer_than_k']} question(s) got fewer "
        f"than k"
    )
    out.append("- " + cm["ceiling_note"] + ":")
    out.append("\n| group | any | all | fraction |")
    out.append("|---|---|---|---|")
    for group, v in cm["ceiling"].items():
        out.append(f"| {group} | {_f(v['recall_any'])} | {_f(v['recall_all'])} | {_f(v['fraction'])} |")
    out.append("\n| conversation | turns | memories | turns with a memory | tokens/memory | tokens/turn |")
    out.append("|---|---|---|---|---|---|")
    for sid, d in cm["memory"].items():
        out.append(
            f"| {sid} | {d['turns']} | {d['memories']} | {d['turns_with_a_memory']} | "
            f"{_f(d['memory_tokens_mean'], 1)} | {_f(d['turn_tokens_mean'], 1)} |"
        )

    if plots:
        out.append("\n## Plots\n")
        out.extend(f"![{p}]({p})\n" for p in plots)
    out.append(
        "\nData: LoCoMo (Maharana et al., ACL 2024, snap-research/LoCoMo), CC BY-NC 4.0; "
        "read from the path above, not redistributed.\n"
    )
    return "\n".join(out) + "\n"


def _cell(c: dict[str, Any], *, items: bool = False) -> str:
    extra = f"{_f(c['items'], 1)} items" if items else f"{_f(c['tokens'], 0)} tok"
    return f"{_f(c['recall_any'], 2)} / {_f(c['recall_all'], 2)} / {_f(c['fraction'], 2)} ({extra})"


def what_this_means(results: dict[str, Any]) -> str:
    systems = results["systems"]
    h = {s: headline(results, s) for s in systems}
    baselines = [s for s in systems if s != "cuemem"]
    if "cuemem" not in h or not baselines:
        return "Only one system was measured."
    best = max(baselines, key=lambda s: h[s]["any@5"] or 0.0)
    c, b = h["cuemem"], h[best]
    ceiling = results["cuemem"]["ceiling"]["1-4"]
    cm = results["cuemem"]
    parts = [
        f"On categories 1–4, cuemem covers some evidence turn in its top 5 for {_pct(c['any@5'])} of the "
        f"questions, against {_pct(b['any@5'])} for the best baseline ({best}); all the evidence is in its "
        f"top 10 for {_pct(c['all@10'])} (baseline {_pct(b['all@10'])}), and within a 1,000-token context "
        f"for {_pct(c['all@1000tok'])} (baseline {_pct(b['all@1000tok'])})."
    ]
    if ceiling["fraction"] is not None:
        parts.append(
            f"Only turns that became a long-term memory can be covered: had cuemem returned every memory "
            f"of the user, it would still cover only {_pct(ceiling['fraction'])} of the evidence turns "
            f"(all the evidence of {_pct(ceiling['recall_all'])} of the questions), so extraction's "
            f"importance threshold ({results['settings']['importance_threshold']}) bounds recall before "
            f"ranking does."
        )
    det = cm["stages"].get("deterministic", 0)
    if det:
        parts.append(
            f"{det} of {results['questions']} questions were answered by the deterministic cue stage alone "
            f"(no vector search), and {cm['items_returned']['fewer_than_k']} got fewer than "
            f"{results['settings']['k_max']} items."
        )
    parts.append(
        "The targets ask for much more than a plain retriever over single turns gives; multi-hop and "
        "temporal questions, whose evidence spans several sessions, are where every system falls short."
    )
    return " ".join(parts)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def write_plots(by_system: dict[str, dict[str, Any]], out_dir: Path) -> list[str]:
    """recall_by_k.png and recall_by_budget.png: one panel per category group, one colour per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[str] = []
    groups = list(metrics.GROUPS)
    styles = {"recall_any": "-", "fraction": "--", "recall_all": ":"}
    for axis, name, label in (
        ("at_k", "recall_by_k.png", "k"),
        ("at_budget", "recall_by_budget.png", "token budget"),
    ):
        cols = 4
        rows = math.ceil(len(groups) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.4 * rows), squeeze=False)
        for ax, group in zip(axes.flat, groups, strict=False):
            for i, (system, data) in enumerate(by_system.items()):
                xs = [int(x) for x in data[group][axis]]
                for metric, style in styles.items():
                    ys = [data[group][axis][str(x)][metric] for x in xs]
                    ax.plot(
                        xs,
                        [math.nan if y is None else y for y in ys],
                        style,
                        marker="o",
                        markersize=3,
                        color=f"C{i}",
                        label=f"{system} {metric}",
                    )
            ax.set_title(_group_title(group), fontsize=9)
            ax.set_xlabel(label)
            ax.set_ylim(0, 1)
            ax.grid(alpha=0.3)
            if axis == "at_k":
                ax.set_xscale("log")
                ax.set_xticks([int(x) for x in metrics.KS], [str(x) for x in metrics.KS])
        for ax in list(axes.flat)[len(groups) :]:
            ax.axis("off")
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower right", fontsize=7, ncol=2)
        fig.suptitle(f"LoCoMo recall by {label} (solid: any, dashed: fraction, dotted: all)")
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        written.append(name)
    return written
