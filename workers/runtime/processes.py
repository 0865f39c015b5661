"""Worker processes the CLI runs for itself on the embedded default (and that tests start).

Two kinds of worker process:
- pipeline workers consume every queue except the index owner's (prefork pool);
- exactly one index owner consumes ``cuemem.search`` then ``cuemem.index`` with the solo pool,
  because the embedded Qdrant engine allows one owning process; it checks the search queue first
  (workers/reliability.py: queue_order_for). With a Qdrant server (CUEMEM_QDRANT_URL) any worker
  may index, and one worker consumes every queue.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from shared.queues import INDEX_OWNER_QUEUES, PIPELINE_QUEUES
from shared.settings import Settings
from workers.runtime.embedded import settings_env
from workers.runtime.serving import held_fd

log = logging.getLogger(__name__)


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self, timeout: float = 30.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)  # warm shutdown: finish the running task
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("worker %s did not stop in %.0f s; killing it", self.name, timeout)
            self.kill()

    def kill(self) -> None:
        """SIGKILL the worker and its pool children (a crash, as tests simulate it)."""
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def worker_command(name: str, queues: list[str], *, concurrency: int, pool: str, loglevel: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.celery_app",
        "worker",
        "-n",
        f"{name}@%h",
        "-Q",
        ",".join(queues),
        "-c",
        str(concurrency),
        "--pool",
        pool,
        "-l",
        loglevel,
        "--without-gossip",
        "--without-mingle",
    ]


def start_worker(
    settings: Settings,
    name: str,
    queues: list[str],
    *,
    concurrency: int = 1,
    pool: str = "prefork",
    extra_env: dict[str, str] | None = None,
    beat: bool = False,
) -> WorkerProcess:
    log_dir = settings.resolved_data_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    env = settings_env(settings)
    # One model thread per process: two processes with default threads fight over 2 cores.
    env.setdefault("OMP_NUM_THREADS", str(settings.embedding_threads))
    env.update(extra_env or {})
    cmd = worker_command(name, queues, concurrency=concurrency, pool=pool, loglevel=settings.log_level)
    if beat:
        # The embedded default has no separate beat: the one pipeline worker embeds it.
        cmd += ["-B", "-s", str(settings.resolved_data_dir / "celerybeat-schedule")]
    # A worker of a served data dir holds its lock too, for as long as it lives: the lock then
    # proves that no worker of the dir is alive, even after this process was SIGKILLed
    # (workers/runtime/serving.py).
    lock = held_fd(settings.resolved_data_dir)
    with open(log_path, "ab") as out:
        # A new session so that kill() can take the whole process group (pool children included).
        process = subprocess.Popen(
            cmd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=() if lock is None else (lock,),
        )
    log.info("started worker %s (pid %d) on %s, log %s", name, process.pid, ",".join(queues), log_path)
    return WorkerProcess(name, process, log_path)


def worker_queues(settings: Settings) -> list[str]:
    """What a general worker consumes: the pipeline's queues, and with a Qdrant server the index
    owner's too (any worker may then index; searches do not use the broker, but a stray one is
    still answered)."""
    queues = [*PIPELINE_QUEUES, *INDEX_OWNER_QUEUES] if settings.qdrant_url else [*PIPELINE_QUEUES]
    return [q.value for q in queues]


def index_owner_command(settings: Settings, name: str = "cuemem-index") -> list[str]:
    """The embedded index's one owner: searches, then index writes, one process."""
    queues = [q.value for q in INDEX_OWNER_QUEUES]
    return worker_command(name, queues, concurrency=1, pool="solo", loglevel=settings.log_level)


def start_index_owner(settings: Settings, name: str = "cuemem-index") -> WorkerProcess:
    return start_worker(settings, name, [q.value for q in INDEX_OWNER_QUEUES], concurrency=1, pool="solo")


def start_workers(
    settings: Settings, *, concurrency: int | None = None, prefix: str = "cuemem", beat: bool = False
) -> list[WorkerProcess]:
    concurrency = concurrency or settings.worker_concurrency
    general = start_worker(
        settings, f"{prefix}-worker", worker_queues(settings), concurrency=concurrency, beat=beat
    )
    if settings.qdrant_url:
        return [general]
    return [general, start_index_owner(settings, f"{prefix}-index")]


@contextmanager
def running_workers(
    settings: Settings, *, concurrency: int | None = None, beat: bool = False
) -> Iterator[list[WorkerProcess]]:
    workers = start_workers(settings, concurrency=concurrency, beat=beat)
    try:
        yield workers
    finally:
        for w in workers:
            w.stop()


def check_alive(workers: list[WorkerProcess]) -> None:
    for w in workers:
        code = w.process.poll()
        if code is not None:
            tail = _tail(w.log_path)
            raise RuntimeError(f"worker {w.name} exited with code {code}; last log lines:\n{tail}")


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
