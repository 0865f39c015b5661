"""The ingest benchmark's pipeline phases: burst throughput and steady load through real workers."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bench.common import percentiles
from bench.cpu_account import CpuAccount
from bench.ingest_embedding import drafts_of, embedded_texts
from bench.ingest_services import RssSampler

if TYPE_CHECKING:
    from bench.ingest import IngestConfig
    from bench.synthetic import Turn
    from shared.settings import Settings
    from workers.runtime.processes import WorkerProcess

FINAL = frozenset({"done", "duplicate", "rejected", "failed"})
PUBLISH_BATCH = 64
_TASK_LINE = re.compile(r"Task (memory\.\w+|bench\.noop)\[[^\]]+\] succeeded in ([0-9.eE+-]+)s")


def parse_task_times(lines: Sequence[str]) -> dict[str, list[float]]:
    """Run time in ms per task name, from Celery's "Task name[id] succeeded in 0.0123s" log lines."""
    out: dict[str, list[float]] = defaultdict(list)
    for line in lines:
        m = _TASK_LINE.search(line)
        if m:
            out[m.group(1)].append(float(m.group(2)) * 1e3)
    return dict(out)


def rate_schedule(rate: float, seconds: float) -> list[float]:
    """Offsets (s) at which to publish for a steady ``rate`` per second over ``seconds``."""
    if rate <= 0 or seconds <= 0:
        return []
    n = max(1, int(rate * seconds))
    return [i / rate for i in range(n)]


def _turn_dict(turn: Turn) -> dict[str, Any]:
    return {
        "user_id": turn.user_id,
        "session_id": turn.session_id,
        "role": turn.role,
        "content": turn.content,
    }


def _states(uow_factory: Callable[[], Any], refs: Mapping[str, str]) -> dict[str, str]:
    """Each event's state (``shared.ingest.progress``), looked up by its pipeline key (``refs``:
    event id -> ``Published.ref``), keyed by event id."""
    from shared.ingest.progress import progress

    with uow_factory() as uow:
        states = progress(uow, list(refs.values())).states
    return {event_id: states[ref] for event_id, ref in refs.items()}


def _done_times(db_url: str, ids: Sequence[str]) -> dict[str, float]:
    """Epoch seconds of each event's done_at (the start of the transaction that finished it)."""
    import psycopg

    from bench.scratch import libpq_url

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
    50 ms for the last few), and runs the full ``shared.ingest.progress`` check (receipts, dead letters:
    duplicate, rejected, failed) only every 5 s.
    """
    import psycopg
    from tqdm import tqdm

    from bench.scratch import libpq_url
    from workers.runtime.processes import check_alive

    ids: list[str] = []
    refs: dict[str, str] = {}  # event id -> pipeline key
    published_at: list[float] = []
    started = time.perf_counter()
    bar = tqdm(total=len(turns), desc=f"{desc}: publish", unit="event", leave=False)
    # An import or a backlog: published as `cuemem ingest` and the API's batch endpoint do, in
    # batches of PUBLISH_BATCH turns (one message each); the steady phase publishes one by one.
    for start in range(0, len(turns), PUBLISH_BATCH):
        chunk = [_turn_dict(t) for t in turns[start : start + PUBLISH_BATCH]]
        result = publisher.publish_batch(chunk)
        if result.errors:
            refused = f"{len(result.errors)} turns: {result.errors[0]}"
            raise RuntimeError(f"{desc}: the publisher refused {refused}")
        ids += [p.event_id for p in result.published]
        refs.update({p.event_id: p.ref for p in result.published})
        published_at += [time.time()] * len(result.published)
        bar.update(len(chunk))
    bar.close()
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
                for event_id, state in _states(uow_factory, {e: refs[e] for e in pending}).items():
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
                left = Counter(_states(uow_factory, {e: refs[e] for e in pending}).values())
                raise TimeoutError(
                    f"{desc}: pipeline did not finish in {timeout:.0f} s; pending: {dict(left)}"
                )
            time.sleep(0.05 if len(pending) <= 10 else 0.25)
    bar.close()
    return ids, published_at, started, ended, states


def measure_pipeline(cfg: IngestConfig, settings: Settings, n: int, phase_seed: int) -> dict[str, Any]:
    import psycopg
    import redis

    from bench import synthetic
    from bench.scratch import libpq_url
    from producers.publisher import Publisher
    from workers.bootstrap import sql_uow_factory
    from workers.redis.working_memory import RedisWorkingMemory
    from workers.runtime.processes import start_workers

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
            drafts = drafts_of([_turn_dict(t) for t in turns])
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
            passages = embedded_texts([_turn_dict(t) for t in turns], drafts)
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
            rate = cfg.steady_rate or cfg.steady_fraction * len(ids) / elapsed
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

    from bench.scratch import libpq_url

    schedule = rate_schedule(rate, seconds)
    drafts = drafts_of([_turn_dict(t) for t in turns[: len(schedule)]])
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
