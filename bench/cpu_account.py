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
    server processes (all of them: other users of the machine's servers count too) and this process,
    each process counted from its own counters (``_deltas``)."""

    def __init__(
        self, workers: Sequence[WorkerProcess], this_process: str = "benchmark process (publisher, poller)"
    ):
        self._workers = list(workers)
        self._this_process = this_process
        self._start: dict[tuple[int, float], tuple[str, float, float]] = {}
        self._system_start: Any = None
        self._wall_start = 0.0
        self.result: dict[str, Any] = {}

    def _processes(self) -> dict[tuple[int, float], tuple[str, float, float]]:
        """Each counted process, keyed by (pid, start time) so a reused pid is another process:
        its group, its own CPU seconds and those of its children it has reaped (a backend that
        ended, a pool process replaced)."""
        import psutil

        def times(p: Any) -> tuple[float, float]:
            t = p.cpu_times()
            return float(t.user + t.system), float(t.children_user + t.children_system)

        found: list[tuple[str, Any]] = []
        for w in self._workers:
            try:
                main = psutil.Process(w.process.pid)
                found += [(f"workers: {w.name}", p) for p in (main, *main.children(recursive=True))]
            except psutil.Error:
                continue
        for p in psutil.process_iter(["name"]):
            name = (p.info.get("name") or "").lower()
            if name.startswith("postgres"):
                found.append(("postgres (all backends)", p))
            elif name.startswith("redis-server"):
                found.append(("redis-server", p))
        found.append((self._this_process, psutil.Process()))
        out: dict[tuple[int, float], tuple[str, float, float]] = {}
        for group, p in found:
            try:
                out[(p.pid, p.create_time())] = (group, *times(p))
            except psutil.Error:
                continue
        return out

    def _deltas(self, end: dict[tuple[int, float], tuple[str, float, float]]) -> dict[str, float]:
        """CPU seconds per group between the start and ``end``, process by process: a process alive
        at both counts what it spent in between, one born since counts all it spent; one that ended
        counts through its parent's reaped children (whose total includes what it had spent before
        the start, taken off again)."""
        out: dict[str, float] = defaultdict(float)
        for key, (group, own, reaped) in end.items():
            before = self._start.get(key)
            out[group] += own + reaped - ((before[1] + before[2]) if before else 0.0)
        for key, (group, own, _) in self._start.items():
            if key not in end:
                out[group] -= own
        return {k: max(0.0, v) for k, v in out.items()}

    def start(self) -> None:
        import psutil

        self._start = self._processes()
        self._system_start = psutil.cpu_times()
        self._wall_start = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        import psutil

        deltas = self._deltas(self._processes())
        system = psutil.cpu_times()
        wall = time.perf_counter() - self._wall_start
        busy = (system.user + system.system + getattr(system, "irq", 0) + getattr(system, "softirq", 0)) - (
            self._system_start.user
            + self._system_start.system
            + getattr(self._system_start, "irq", 0)
            + getattr(self._system_start, "softirq", 0)
        )
        cores = psutil.cpu_count() or 1
        cpu_s = {k: round(deltas[k], 2) for k in sorted(deltas)}
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
