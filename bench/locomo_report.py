"""The LoCoMo benchmark's report: headline figures, report.md and its plots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import metrics
from bench.common import machine_markdown

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
        "embedded default, each conversation published in batches)" + _embedding_only(ingest) + "\n"
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
            f"Long-term memories alone cover {_pct(ceiling['fraction'])} of the evidence turns (all the "
            f"evidence of {_pct(ceiling['recall_all'])} of the questions): extraction keeps a turn only "
            f"when its importance reaches {results['settings']['importance_threshold']}. The "
            f"conversation-log path (every turn, when `CUEMEM_INDEX_TURNS` is on) is what lets recall "
            f"reach the rest."
        )
    det = cm["stages"].get("deterministic", 0)
    if det:
        parts.append(
            f"{det} of {results['questions']} questions had confident cue hits, which answered first "
            f"(the fused search filled the remaining slots), and {cm['items_returned']['fewer_than_k']} "
            f"got fewer than {results['settings']['k_max']} items."
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
            if not any(data[group]["scored"] for data in by_system.values()):
                # A file without questions of this group (a one-category set, say): nothing to draw,
                # and a log-scaled axis with no point on it cannot be drawn at all.
                ax.set_title(_group_title(group), fontsize=9)
                ax.text(0.5, 0.5, "no questions", ha="center", va="center", transform=ax.transAxes)
                ax.set_xticks([])
                ax.set_yticks([])
                continue
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


def _embedding_only(ingest: dict[str, Any]) -> str:
    """The ingest time next to the time the model alone takes for the same texts."""
    raw = ingest.get("embedding_only")
    if not raw:
        return ""
    return (
        f"; the embedding model alone: {raw['passages']} texts (drafts and context windows, "
        f"{raw['tokens']} tokens) in {raw['batched_s']:.1f} s in {raw['processes']} single-threaded "
        f"processes, so ingest took {ingest['ratio_to_embedding_only']:.2f} × the model's time"
    )
