"""CPU seconds per group of processes over a phase, from their CPU counters (psutil): given worker
processes, Postgres and Redis servers, and this process. What `cuemem bench ingest` and `cuemem bench
latency` report as CPU (per event, per recall)."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.runtime.processes import WorkerProcess


class CpuAccount:
    """CPU seconds spent during a phase: the whole machine, our worker processes, Postgres and Redis
    server processes (all of them: other users of the machine's servers count too) and this process."""

    def __init__(
        self, workers: Sequence[WorkerProcess], this_process: str = "benchmark process (publisher, poller)"
    ):
        self._workers = list(workers)
        self._this_process = this_process
        self._start: dict[str, float] = {}
        self._system_start: Any = None
        self._wall_start = 0.0
        self.result: dict[str, Any] = {}

    def _groups(self) -> dict[str, float]:
        import psutil

        def cpu(p: Any) -> float:
            try:
                t = p.cpu_times()
                return float(t.user + t.system)
            except psutil.Error:
                return 0.0

        out: dict[str, float] = defaultdict(float)
        for w in self._workers:
            try:
                main = psutil.Process(w.process.pid)
                procs = [main, *main.children(recursive=True)]
            except psutil.Error:
                continue
            for p in procs:
                out[f"workers: {w.name}"] += cpu(p)
        for p in psutil.process_iter(["name"]):
            name = (p.info.get("name") or "").lower()
            if name.startswith("postgres"):
                out["postgres (all backends)"] += cpu(p)
            elif name.startswith("redis-server"):
                out["redis-server"] += cpu(p)
        out[self._this_process] += cpu(psutil.Process())
        return dict(out)

    def start(self) -> None:
        import psutil

        self._start = self._groups()
        self._system_start = psutil.cpu_times()
        self._wall_start = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        import psutil

        end = self._groups()
        system = psutil.cpu_times()
        wall = time.perf_counter() - self._wall_start
        busy = (system.user + system.system + getattr(system, "irq", 0) + getattr(system, "softirq", 0)) - (
            self._system_start.user
            + self._system_start.system
            + getattr(self._system_start, "irq", 0)
            + getattr(self._system_start, "softirq", 0)
        )
        cores = psutil.cpu_count() or 1
        cpu_s = {k: round(end[k] - self._start.get(k, 0.0), 2) for k in sorted(end)}
        # Whatever else ran on the machine meanwhile (other users' jobs skew the numbers).
        cpu_s["other processes"] = round(max(0.0, busy - sum(cpu_s.values())), 2)
        self.result = {
            "wall_s": round(wall, 2),
            "machine_busy_share": round(busy / (wall * cores), 3) if wall else None,
            "cpu_s": cpu_s,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        }
        return self.result

    def per_item_ms(self, n: int) -> dict[str, float]:
        """The last phase's CPU milliseconds per item (event, recall) by group, and their sum
        without "other processes" (what the phase's own processes spent) as ``total``."""
        cpu_s = {k: v for k, v in self.result["cpu_s"].items() if k != "other processes"}
        out = {k: round(v * 1e3 / n, 2) for k, v in cpu_s.items()} if n else {}
        out["total"] = round(sum(cpu_s.values()) * 1e3 / n, 2) if n else 0.0
        return out
