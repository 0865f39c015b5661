"""The ingest benchmark's ratios, targets and report.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.common import machine_markdown

TARGET_EMBED_RATIO = 0.9
TARGET_OVERHEAD_RATIO = 2.0
TARGET_WM_MS = 50.0
TARGET_LONG_TERM_P95_MS = 1000.0
TARGET_RSS_MB = 400.0


def ratios(
    *,
    events: int,
    pipeline_s: float,
    passages: int,
    raw_s: float,
    noop_tasks: int,
    noop_s: float,
) -> dict[str, float | None]:
    """The issue's ratios, all from wall-clock times at the same worker count.

    - ``embedding_ratio``: pipeline passages/s ÷ raw passages/s on the same passages (equal to the
      raw embedding time of those passages ÷ the pipeline's time for their events);
    - ``overhead_per_event_ms``: pipeline wall time per event minus raw embedding wall time per event;
    - ``overhead_vs_noop``: that overhead ÷ the wall time per no-op task.
    """
    if events <= 0 or pipeline_s <= 0:
        return {
            "embedding_ratio": None,
            "overhead_per_event_ms": None,
            "noop_ms": None,
            "overhead_vs_noop": None,
        }
    embedding_ratio = (raw_s / pipeline_s) if passages and raw_s > 0 else None
    overhead = (pipeline_s - raw_s) / events * 1e3
    noop_ms = noop_s / noop_tasks * 1e3 if noop_tasks and noop_s > 0 else None
    return {
        "embedding_ratio": round(embedding_ratio, 3) if embedding_ratio is not None else None,
        "overhead_per_event_ms": round(overhead, 3),
        "noop_ms": round(noop_ms, 4) if noop_ms is not None else None,
        "overhead_vs_noop": round(overhead / noop_ms, 2) if noop_ms else None,
    }


def where_time_goes(throughput: dict[str, Any], concurrency: int) -> dict[str, Any]:
    """Busy time per stage (from the workers' task logs) against the wall clock of the run.

    Pipeline stages share ``concurrency`` pool processes; the index owner is one process alone.
    """
    busy = throughput.get("task_busy_s", {})
    wall = float(throughput.get("elapsed_s") or 0.0)
    pipeline_busy = sum(v for k, v in busy.items() if k not in ("memory.index", "memory.search"))
    index_busy = float(busy.get("memory.index", 0.0))
    total = sum(busy.values()) or 1.0
    return {
        "share_of_task_time": {k: round(v / total, 3) for k, v in busy.items()},
        "pipeline_pool_utilisation": round(pipeline_busy / (wall * concurrency), 3) if wall else None,
        "index_owner_utilisation": round(index_busy / wall, 3) if wall else None,
        "per_event_busy_ms": {
            k: round(v * 1e3 / max(1, int(throughput.get("events", 1))), 2) for k, v in busy.items()
        },
    }


def steady_label(results: dict[str, Any]) -> str:
    """How the steady load's rate was chosen: a fixed rate, or a share of the burst's capacity."""
    steady = results.get("steady") or {}
    if steady.get("rate_per_s"):
        return f"a steady {steady['rate_per_s']:g} turns/s"
    return f"{100 * steady.get('fraction_of_capacity', 0.8):.0f}% of the measured capacity"


def evaluate_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    phases: dict[str, Any] = results["phases"]
    steady = steady_label(results)

    def per_n(fn: Callable[[dict[str, Any]], float | None]) -> dict[str, float | None]:
        return {n: fn(p) for n, p in phases.items()}

    def judge(values: dict[str, float | None], ok: Callable[[float], bool]) -> str:
        met = [n for n, v in values.items() if v is not None and ok(v)]
        if not values or all(v is None for v in values.values()):
            return "not measured"
        if len(met) == len(values):
            return "met"
        return f"met at N={','.join(met)} only" if met else "not met"

    embed = per_n(lambda p: p["ratios"]["embedding_ratio"])
    overhead = per_n(lambda p: p["ratios"]["overhead_vs_noop"])
    wm = per_n(lambda p: p["pipeline"]["steady"]["working_memory_after_return_ms"].get("p95"))
    wm_max = per_n(lambda p: max(p["pipeline"]["steady"]["working_memory_after_return_ms"].get("p99", 0), 0))
    lt = per_n(lambda p: p["pipeline"]["steady"]["long_term_ms"].get("p95"))
    rss = per_n(lambda p: max(p["pipeline"]["rss_peak_mb"].values(), default=None))

    def fmt(values: dict[str, Any], unit: str = "") -> str:
        return ", ".join(f"N={n}: {v}{unit}" for n, v in values.items())

    return [
        {
            "target": "ingest >= 0.9 x raw embedding throughput",
            "measured": "pipeline passages/s ÷ raw batched passages/s: " + fmt(embed),
            "verdict": judge(embed, lambda v: v >= TARGET_EMBED_RATIO),
        },
        {
            "target": "pipeline overhead per event <= 2 x a no-op Celery task",
            "measured": "overhead per event ÷ no-op task wall time: "
            + fmt(overhead, "x")
            + "; per task of the chain: "
            + fmt(per_n(lambda p: p["ratios"].get("overhead_per_task_vs_noop")), "x"),
            "verdict": judge(overhead, lambda v: v <= TARGET_OVERHEAD_RATIO),
        },
        {
            "target": "working memory <= 50 ms after publish returns",
            "measured": "p95 " + fmt(wm, " ms") + "; p99 " + fmt(wm_max, " ms"),
            "verdict": judge(wm, lambda v: v <= TARGET_WM_MS),
        },
        {
            "target": "long-term memory <= 1 s p95 at steady load",
            "measured": f"publish → done p95 at {steady}: " + fmt(lt, " ms"),
            "verdict": judge(lt, lambda v: v <= TARGET_LONG_TERM_P95_MS),
        },
        {
            "target": "each worker process <= 400 MB RSS",
            "measured": "largest worker process: " + fmt(rss, " MB"),
            "verdict": judge(rss, lambda v: v <= TARGET_RSS_MB),
        },
    ]


def _fmt(p: dict[str, Any] | None) -> str:
    if not p or not p.get("n"):
        return "–"
    return f"{p['p50']:.1f} / {p['p95']:.1f} / {p['p99']:.1f}"


def render_report(r: dict[str, Any]) -> str:
    steady = steady_label(r)
    loads = {n: p["pipeline"]["throughput"]["cpu"].get("load_average_at_end") for n, p in r["phases"].items()}
    lines = [
        "# Ingest benchmark",
        "",
        machine_markdown(r["machine"]),
        f"- duration: {r['duration_s']} s; load average after each throughput phase {loads} "
        "(other jobs on the machine skew the numbers: see 'other processes' CPU below)",
        "",
    ]
    lines += ["## Targets", "", "| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t['target']} | {t['measured']} | **{t['verdict']}** |" for t in r["targets"]]
    lines += [
        "",
        "## Throughput",
        "",
        "| N | events/s | passages/s | raw passages/s (batched / one per call) | raw tokens/s | "
        "embedding ratio | no-op tasks/s | overhead/event ms | ÷ no-op | states |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, p in r["phases"].items():
        tp, raw, rt, noop = p["pipeline"]["throughput"], p["raw_embedding"], p["ratios"], p["noop"]
        lines.append(
            f"| {n} | {tp['events_per_s']} | {tp['passages_per_s']} | {raw['batched_passages_per_s']} / "
            f"{raw['one_per_call_passages_per_s']} | {raw['batched_tokens_per_s']} | {rt['embedding_ratio']} "
            f"(one per call: {p['ratios_one_per_call']['embedding_ratio']}) | {noop['tasks_per_s']} | "
            f"{rt['overhead_per_event_ms']} | {rt['overhead_vs_noop']} | {tp['states']} |"
        )
    lines += [
        "",
        "Events: a realistic mix (about 55% user statements worth keeping, the rest chit-chat and "
        "assistant replies, which stop after extraction). Passages are what the pipeline embeds (the "
        "memorable turns' drafts and every turn's context window); raw embedding embeds exactly "
        "those, in N processes of 1 thread. The burst is published in batches of 64 "
        "(`publish_batch`, as `cuemem ingest` does); the steady load one turn at a time.",
        "",
        f"## Freshness at steady load ({steady})",
        "",
        "| N | rate/s (achieved) | publish call p50/p95/p99 ms | working memory after publish returns | "
        "long-term (publish → done) | chit-chat → done | not done |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, p in r["phases"].items():
        s = p["pipeline"]["steady"]
        lines.append(
            f"| {n} | {s['rate_per_s']} ({s['achieved_rate_per_s']}) | {_fmt(s['publish_call_ms'])} | "
            f"{_fmt(s['working_memory_after_return_ms'])} | {_fmt(s['long_term_ms'])} | "
            f"{_fmt(s['chit_chat_done_ms'])} | {s['not_done_after_wait']} |"
        )
    lines += ["", "## Where the time goes", ""]
    for n, p in r["phases"].items():
        tp, wt = p["pipeline"]["throughput"], p["where_time_goes"]
        lines += [
            f"### N = {n}",
            "",
            f"Pool utilisation {wt['pipeline_pool_utilisation']}, index owner utilisation "
            f"{wt['index_owner_utilisation']}; {tp['tasks_per_event']} tasks per event; burst publish → "
            f"done (memorable events) {_fmt(tp['publish_to_done_ms_burst'])} ms. Machine CPU busy "
            f"{tp['cpu']['machine_busy_share']} of {r['machine']['cores']} cores over "
            f"{tp['cpu']['wall_s']} s; "
            "CPU seconds: " + ", ".join(f"{k} {v}" for k, v in tp["cpu"]["cpu_s"].items()) + ".",
            "",
            "| task | runs | run time p50/p95/p99 ms | busy ms per event | share of task time |",
            "|---|---|---|---|---|",
        ]
        for task, pct in tp["task_run_ms"].items():
            lines.append(
                f"| {task} | {pct.get('n')} | {_fmt(pct)} | {wt['per_event_busy_ms'].get(task)} | "
                f"{wt['share_of_task_time'].get(task)} |"
            )
        lines += [
            "",
            "Peak RSS per process (MB): "
            + ", ".join(f"{k} {v}" for k, v in p["pipeline"]["rss_peak_mb"].items()),
            "",
        ]
    return "\n".join(lines) + "\n"
