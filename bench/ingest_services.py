"""The ingest benchmark's services and workers for one phase: scratch database and Redis, worker
RSS sampling, and the no-op task floor (CPU: ``bench/cpu_account.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.ingest import IngestConfig
    from shared.settings import Settings
    from workers.runtime.processes import WorkerProcess

NOOP_TASK = "bench.noop"  # defined in bench/noop_tasks.py (importing it needs a broker URL)
NOOP_QUEUE = "bench.noop"


@contextmanager
def phase_services(cfg: IngestConfig, tag: str) -> Iterator[Settings]:
    from bench.scratch import scratch_database, scratch_redis
    from shared.settings import Settings

    data_dir = Path(tempfile.mkdtemp(prefix=f"cuemem-bench-ingest-{tag}-"))
    try:
        with (
            scratch_database(cfg.pg_admin, "cuemem_bench_ingest", keep=cfg.keep) as db_url,
            scratch_redis(cfg.redis_url),
        ):
            yield Settings(
                data_dir=data_dir,
                database_url=db_url,
                broker_url=cfg.redis_url,
                redis_url=cfg.redis_url,
                embedder="e5",
                log_level="INFO",
            )
    finally:
        if not cfg.keep:
            shutil.rmtree(data_dir, ignore_errors=True)


class RssSampler:
    """Samples the RSS of worker processes (each main process and its pool children) in a thread."""

    def __init__(self, workers: Sequence[WorkerProcess], interval: float = 0.5):
        self._workers = list(workers)
        self._interval = interval
        self._stop = threading.Event()
        self.peak_mb: dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()

    def sample(self) -> None:
        import psutil

        for w in self._workers:
            try:
                main = psutil.Process(w.process.pid)
                procs = [("main", main), *[(f"child {c.pid}", c) for c in main.children(recursive=True)]]
            except psutil.Error:
                continue
            for role, p in procs:
                try:
                    mb = p.memory_info().rss / 2**20
                except psutil.Error:
                    continue
                key = f"{w.name} {role}"
                self.peak_mb[key] = round(max(self.peak_mb.get(key, 0.0), mb), 1)


def _spawn_noop_worker(settings: Settings, concurrency: int, name: str) -> WorkerProcess:
    """``cuemem``'s worker command with ``-A bench.noop_tasks``: same app, same settings."""
    import subprocess

    from workers.runtime.embedded import settings_env
    from workers.runtime.processes import WorkerProcess, worker_command

    cmd = worker_command(name, [NOOP_QUEUE], concurrency=concurrency, pool="prefork", loglevel="INFO")
    cmd[cmd.index("-A") + 1] = "bench.noop_tasks"
    log_dir = settings.resolved_data_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    env = settings_env(settings)
    env.setdefault("OMP_NUM_THREADS", str(settings.embedding_threads))
    # The wheel leaves `bench` out (cli/bench_loader.py finds it in the checkout at run time): the
    # worker, started anywhere, finds `bench.noop_tasks` the same way, through the checkout.
    checkout = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (checkout, env.get("PYTHONPATH", "")) if p)
    with open(log_path, "ab") as out:
        process = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return WorkerProcess(name, process, log_path)


def _queue_drained(client: Any, queue: str) -> bool:
    # kombu's Redis transport: the queue is a list; a delivered, not yet acknowledged message
    # (late acks) sits in the "unacked" hash until the task finished.
    return int(client.llen(queue)) == 0 and int(client.hlen("unacked")) == 0


def _wait(predicate: Callable[[], bool], timeout: float, interval: float, what: str) -> float:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return time.perf_counter()


def measure_noop(cfg: IngestConfig, settings: Settings, concurrency: int) -> dict[str, Any]:
    import redis
    from tqdm import tqdm

    from infra.broker import send_only_app
    from workers.runtime.processes import check_alive

    client = redis.Redis.from_url(cfg.redis_url)
    app = send_only_app(cfg.redis_url)
    worker = _spawn_noop_worker(settings, concurrency, f"bench-noop-{concurrency}")
    try:
        for _ in range(20 * concurrency):  # warm-up: the pool is up and consuming
            app.send_task(NOOP_TASK, queue=NOOP_QUEUE)

        def warmed() -> bool:
            check_alive([worker])
            return _queue_drained(client, NOOP_QUEUE)

        _wait(warmed, 120, 0.05, "no-op warm-up")
        with RssSampler([worker]) as rss:
            started = time.perf_counter()
            for _ in tqdm(
                range(cfg.noop_tasks), desc=f"no-op tasks, c={concurrency}", unit="task", leave=False
            ):
                app.send_task(NOOP_TASK, queue=NOOP_QUEUE)
            sent = time.perf_counter()
            ended = _wait(lambda: _queue_drained(client, NOOP_QUEUE), 300, 0.01, "no-op tasks")
        elapsed = ended - started
        return {
            "tasks": cfg.noop_tasks,
            "elapsed_s": round(elapsed, 3),
            "send_s": round(sent - started, 3),
            "tasks_per_s": round(cfg.noop_tasks / elapsed, 1),
            "wall_ms_per_task": round(elapsed / cfg.noop_tasks * 1e3, 4),
            "rss_peak_mb": rss.peak_mb,
        }
    finally:
        worker.stop()
        app.close()
        client.close()
