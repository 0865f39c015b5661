"""`cuemem bench footprint`: the memory and CPU of each deployed process, idle and under a small
steady load: the numbers the containers of deploy/kubernetes/ are sized from.

The processes are started as the manifests and docker-compose.yml start them, on a scratch
Postgres database (``bench.scratch``) and a Redis server of the run's own: the API
(``cuemem serve``), the pipeline worker (``cuemem worker --concurrency 2``: Celery's main process
and its prefork pool), beat, Flower and ``redis-server`` with the manifests' durability flags (a
private server, so that its memory and CPU are this run's alone and not the machine's shared
server's). Without a Qdrant server on the machine, the index is the embedded one, so the index
owner (``cuemem worker --index-owner``) runs too; the manifests have a Qdrant server instead, and
there every worker also writes the index. ``cuemem migrate`` is measured once, before the others.

Phases: **idle** (every process up, its model loaded by a warm-up) and **load**: turns published
through the API one at a time (``POST /v1/events``) and as import batches of 64
(``POST /v1/events/batch``), and recalls (``POST /v1/recall``), each at a fixed rate. Every
``interval`` seconds each process tree (main process and children) is sampled: RSS summed over the
tree (shared pages count once per process: an upper bound on what the container's memory cgroup
is charged) and CPU in cores (CPU seconds of the tree in the interval / the interval).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import machine_info, machine_markdown, write_json
from bench.scratch import DEFAULT_PG_ADMIN

BIN = Path(sys.executable).parent
# The manifests' redis-server flags (deploy/kubernetes/redis.yaml), on a port of the run's own.
BATCH = 64  # turns in one POST /v1/events/batch: the size of one import message (publish_batch)
REDIS_FLAGS = ["--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction"]


@dataclass
class FootprintConfig:
    out: Path
    idle_seconds: float = 20.0
    load_seconds: float = 60.0
    turns_per_s: float = 4.0
    recalls_per_s: float = 2.0
    batch_every_s: float = 20.0  # a batch of BATCH turns, as an import publishes them
    interval: float = 1.0
    users: int = 20
    pg_admin: str = DEFAULT_PG_ADMIN
    seed: int = 11


@dataclass
class Tree:
    """One deployed process (and its children) and its samples."""

    name: str
    command: list[str]
    popen: subprocess.Popen[bytes] | None = None
    rss_mb: dict[str, list[float]] = field(default_factory=dict)
    cores: dict[str, list[float]] = field(default_factory=dict)
    _cpu: dict[int, float] = field(default_factory=dict)

    def sample(self, phase: str, interval: float) -> None:
        import psutil

        if self.popen is None:
            return
        try:
            root = psutil.Process(self.popen.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        rss = 0.0
        cpu_now: dict[int, float] = {}
        for p in procs:
            try:
                rss += p.memory_info().rss / 2**20
                t = p.cpu_times()
                cpu_now[p.pid] = t.user + t.system
            except psutil.Error:
                continue
        spent = sum(v - self._cpu.get(pid, 0.0) for pid, v in cpu_now.items())
        self._cpu = cpu_now
        self.rss_mb.setdefault(phase, []).append(round(rss, 1))
        self.cores.setdefault(phase, []).append(round(max(spent, 0.0) / interval, 3))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(tree: Tree, env: dict[str, str], log_dir: Path) -> None:
    with open(log_dir / f"{tree.name}.log", "ab") as log:
        # A new session: stopping takes the whole group (a prefork pool included).
        tree.popen = subprocess.Popen(
            tree.command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(tree: Tree) -> None:
    if tree.popen is None or tree.popen.poll() is not None:
        return
    os.killpg(tree.popen.pid, signal.SIGTERM)
    try:
        tree.popen.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(tree.popen.pid, signal.SIGKILL)
        tree.popen.wait()


@contextmanager
def _running(trees: list[Tree], env: dict[str, str], log_dir: Path) -> Iterator[None]:
    try:
        for tree in trees:
            _start(tree, env, log_dir)
        yield
    finally:
        for tree in reversed(trees):
            _stop(tree)


def _measure_migrate(env: dict[str, str], log_dir: Path, interval: float) -> dict[str, Any]:
    """`cuemem migrate` on the (already migrated) scratch database: what the job costs on every
    rollout, its peak RSS and CPU seconds."""
    tree = Tree("migrate", [str(BIN / "cuemem"), "migrate"])
    _start(tree, env, log_dir)
    assert tree.popen is not None
    started = time.perf_counter()
    while tree.popen.poll() is None:
        tree.sample("run", interval / 4)
        time.sleep(interval / 4)
    if tree.popen.returncode != 0:
        raise RuntimeError(f"cuemem migrate failed: {(log_dir / 'migrate.log').read_text()[-2000:]}")
    return {
        "rss_peak_mb": max(tree.rss_mb.get("run", [0.0])),
        "cpu_s": round(sum(tree.cores.get("run", [])) * interval / 4, 2),
        "wall_s": round(time.perf_counter() - started, 2),
    }


def _wait_ready(base: str, trees: list[Tree], timeout: float = 300) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        dead = [t.name for t in trees if t.popen is not None and t.popen.poll() is not None]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited during start-up (see the logs in --out)")
        try:
            if httpx.get(base + "/v1/ready", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the API did not become ready")
        time.sleep(0.5)


class Load:
    """Turns and recalls through the API at fixed rates, each in its own thread."""

    def __init__(self, base: str, cfg: FootprintConfig):
        from bench import synthetic

        self._base = base
        self._cfg = cfg
        self._turns = iter(synthetic.make_turns(100_000, users=cfg.users, seed=cfg.seed))
        self._stop = threading.Event()
        self.counts = {"turns": 0, "recalls": 0, "batches": 0, "errors": 0}
        self.first_errors: list[str] = []

    def _turn(self, client: Any) -> Any:
        t = next(self._turns)
        body = {"user_id": t.user_id, "session_id": t.session_id, "role": t.role, "content": t.content}
        return client.post("/v1/events", json=body), "turns"

    def _batch(self, client: Any) -> Any:
        turns = [next(self._turns) for _ in range(BATCH)]
        body = [{"user_id": t.user_id, "session_id": t.session_id, "role": t.role, "content": t.content}
                for t in turns]  # fmt: skip
        return client.post("/v1/events/batch", json={"events": body}), "batches"

    def _recall(self, client: Any) -> Any:
        t = next(self._turns)
        body = {"user_id": t.user_id, "query": " ".join(t.content.split()[:6]), "reinforce": False}
        return client.post("/v1/recall", json=body), "recalls"

    def _loop(self, rate: float, call: Any) -> None:
        import httpx

        period = 1.0 / rate
        next_at = time.monotonic()
        with httpx.Client(base_url=self._base, timeout=60) as client:
            while not self._stop.is_set():
                answer, kind = call(client)
                if answer.status_code < 300:
                    self.counts[kind] += 1
                else:
                    self.counts["errors"] += 1
                    self.first_errors = [*self.first_errors, f"{answer.status_code} {answer.text[:200]}"][:3]
                next_at += period
                self._stop.wait(max(0.0, next_at - time.monotonic()))

    def warm_up(self) -> None:
        """Every process loads what it loads lazily (the API's and the workers' embedder)."""
        import httpx

        with httpx.Client(base_url=self._base, timeout=120) as client:
            for _ in range(10):
                self._turn(client)
            for _ in range(3):
                self._recall(client)

    @contextmanager
    def running(self) -> Iterator[None]:
        threads = [
            threading.Thread(target=self._loop, args=(self._cfg.turns_per_s, self._turn)),
            threading.Thread(target=self._loop, args=(self._cfg.recalls_per_s, self._recall)),
            threading.Thread(target=self._loop, args=(1.0 / self._cfg.batch_every_s, self._batch)),
        ]
        for t in threads:
            t.start()
        try:
            yield
        finally:
            self._stop.set()
            for t in threads:
                t.join()


def _sample_for(trees: list[Tree], phase: str, seconds: float, interval: float) -> None:
    for tree in trees:  # the CPU counters' starting point: the first interval is a whole one
        tree.sample("_start", interval)
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        time.sleep(interval)
        for tree in trees:
            tree.sample(phase, interval)


def _summary(tree: Tree) -> dict[str, Any]:
    out: dict[str, Any] = {"command": " ".join([Path(tree.command[0]).name, *tree.command[1:]])}
    for phase in ("idle", "load"):
        rss, cores = tree.rss_mb.get(phase, [0.0]), tree.cores.get(phase, [0.0])
        out[phase] = {
            "rss_median_mb": round(statistics.median(rss), 1),
            "rss_peak_mb": max(rss),
            "cores_mean": round(statistics.fmean(cores), 3),
            "cores_peak": max(cores),
        }
    return out


def run(cfg: FootprintConfig) -> dict[str, Any]:
    from bench.scratch import scratch_database

    cfg.out.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    root = Path(tempfile.mkdtemp(prefix="cuemem-bench-footprint-"))
    redis_port, api_port, flower_port = _free_port(), _free_port(), _free_port()
    broker = f"redis://127.0.0.1:{redis_port}/0"
    redis = Tree("redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                           "--dir", str(root), "--save", "", *REDIS_FLAGS])  # fmt: skip
    try:
        with ExitStack() as stack:
            stack.enter_context(_running([redis], dict(os.environ), cfg.out))
            db_url = stack.enter_context(scratch_database(cfg.pg_admin, "cuemem_bench_footprint"))
            env = {k: v for k, v in os.environ.items() if not k.startswith("CUEMEM_")}
            env |= {
                "CUEMEM_DATABASE_URL": db_url,
                "CUEMEM_BROKER_URL": broker,
                "CUEMEM_DATA_DIR": str(root / "data"),
                "CUEMEM_EMBEDDER": "e5",
                "CUEMEM_EMBEDDING_THREADS": "1",  # the manifests' ConfigMap
                "CUEMEM_RATE_LIMITS": "false",  # the load is fixed here; a budget would only refuse it
                "FLOWER_BASIC_AUTH": "bench:bench",
            }
            migrate = _measure_migrate(env, cfg.out, cfg.interval)
            cuemem, celery = str(BIN / "cuemem"), str(BIN / "celery")
            flower = ["-A", "workers.celery_app", "flower", f"--port={flower_port}", "--address=127.0.0.1"]
            trees = [
                Tree("index owner", [cuemem, "worker", "--index-owner"]),
                Tree("worker", [cuemem, "worker", "--concurrency", "2"]),
                Tree("beat", [cuemem, "beat"]),
                Tree("api", [cuemem, "serve", "--host", "127.0.0.1", "--port", str(api_port), "--no-auth"]),
                Tree("flower", [celery, *flower]),
            ]
            stack.enter_context(_running(trees, env, cfg.out))
            base = f"http://127.0.0.1:{api_port}"
            _wait_ready(base, trees)
            load = Load(base, cfg)
            load.warm_up()
            time.sleep(10)  # the warm-up's turns through the pipeline before idle is measured
            measured = [*trees, redis]
            _sample_for(measured, "idle", cfg.idle_seconds, cfg.interval)
            with load.running():
                _sample_for(measured, "load", cfg.load_seconds, cfg.interval)
            depths = _queue_depths(broker)
            results = {
                "machine": info,
                "commit": _commit(),
                "config": {**cfg.__dict__, "out": str(cfg.out)},
                "migrate": migrate,
                "processes": {t.name: _summary(t) for t in measured},
                "load": {**load.counts, "first_errors": load.first_errors, "queue_depths_after": depths},
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    write_json(cfg.out / "results.json", results)
    (cfg.out / "report.md").write_text(_report(results), encoding="utf-8")
    return results


def _commit() -> str | None:
    done = subprocess.run(
        ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None


def _queue_depths(broker: str) -> dict[str, int]:
    from infra.broker import open_redis
    from workers.broker import queue_depths

    client = open_redis(broker)
    try:
        return {k: v for k, v in queue_depths(client).items() if v}
    finally:
        client.close()


def _report(r: dict[str, Any]) -> str:
    c, load = r["config"], r["load"]
    lines = [
        "# Footprint of each deployed process (`cuemem bench footprint`)",
        "",
        machine_markdown(r["machine"]),
        f"- commit: {r['commit']}",
        "",
        f"Load: {c['turns_per_s']} turns/s and {c['recalls_per_s']} recalls/s through the API for "
        f"{c['load_seconds']} s, and a batch of {BATCH} turns every {c['batch_every_s']} s "
        f"({load['turns']} turns, {load['batches']} batches, {load['recalls']} recalls, "
        f"{load['errors']} errors; "
        f"queues after: {load['queue_depths_after'] or 'empty'}); idle {c['idle_seconds']} s before it. "
        "RSS summed over the process tree; CPU in cores, sampled every "
        f"{c['interval']} s.",
        "",
        "| process | idle RSS MB | load RSS MB median / peak | idle cores | load cores mean / peak |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, p in r["processes"].items():
        i, x = p["idle"], p["load"]
        lines.append(
            f"| {name} | {i['rss_median_mb']} | {x['rss_median_mb']} / {x['rss_peak_mb']} | "
            f"{i['cores_mean']} | {x['cores_mean']} / {x['cores_peak']} |"
        )
    m = r["migrate"]
    lines += ["", f"`cuemem migrate` on an up-to-date database: peak RSS {m['rss_peak_mb']} MB, "
              f"{m['cpu_s']} CPU s, {m['wall_s']} s."]  # fmt: skip
    return "\n".join(lines) + "\n"
