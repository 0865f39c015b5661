"""What every fault test shares: publishing while faults happen (``Ingest``), the worker
processes the tests kill and restart (``Workers``), and the checks each test ends with.

``check_exactly_once``: every published event recorded once and ``done``, no pending memory, no
event applied twice, each conversation's timeline in seq order and equal to what the producer was
told. ``check_index_matches``: the index (memories and conversation-log turns) holding exactly
what Postgres holds, each point with its row's status and version. ``CUEMEM_LONG_FAULTS=1`` runs
the long variants (5,000 events, more kills); ``CUEMEM_FAULT_SEED`` replays a run (default: a
fixed seed; ``clock`` draws one). Each test prints one ``FAULT-REPORT {json}`` line with its
figures (``pytest -rP`` shows them; docs/RELIABILITY.md quotes the last run).
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from producers.publisher import Published, Publisher
from shared.events import InvalidEvent
from shared.models import MemoryStatus, turn_point_id
from shared.queues import PIPELINE_QUEUES, Queue
from shared.settings import Settings
from shared.storage import EMBEDDING_MODEL_KEY
from tests.support.queues import assert_queues_drain, beat_sweep
from tests.support.services import progress_by_id, table_counts, wait_processed, wait_until
from workers.bootstrap import Container
from workers.index.edge import EdgeVectorIndex
from workers.redis.ledger import RedisPublishLedger
from workers.runtime.processes import WorkerProcess, start_index_owner, start_worker

LONG = os.environ.get("CUEMEM_LONG_FAULTS") == "1"
# The seed of the random fault moments, printed in the report and the assertion messages. By
# default a fixed one (what CI runs: a red run replays as it is, nothing to copy);
# CUEMEM_FAULT_SEED=N replays a run of seed N, CUEMEM_FAULT_SEED=clock draws a new one from the
# clock (to explore other moments; docs/RELIABILITY.md, "Running the fault tests").
FIXED_SEED = 326749


def fault_seed(given: str | None) -> int:
    if given is None or not given.strip():
        return FIXED_SEED
    if given.strip() == "clock":
        return time.time_ns() % 1_000_000
    try:
        return int(given)
    except ValueError:
        raise ValueError(f"CUEMEM_FAULT_SEED: {given!r} is neither a number nor 'clock'") from None


SEED = fault_seed(os.environ.get("CUEMEM_FAULT_SEED"))


def report(name: str, published: Sequence[Published], started: float, **figures: Any) -> None:
    """Print the test's figures, with how many turns it published and how long it ran since ``started``
    (a time.monotonic() reading)."""
    run = {"published": len(published), "seconds": round(time.monotonic() - started, 1)}
    print("FAULT-REPORT " + json.dumps({"test": name, **run, **figures}, sort_keys=True))


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
    # When set, a thread publishes its next turn only once this says the last one is through
    # (or after a minute): publishing then keeps step with the workers however loaded the
    # machine is, instead of running ahead of them or out of turns.
    gate: Callable[[str], bool] | None = None
    # Called with (user id, event id) after each publish (and gate), before the thread goes on:
    # what an app does between two turns (``fault_workload.Curation``: forget a memory).
    after_publish: Callable[[str, str], None] | None = None
    published: list[Published] = field(default_factory=list)
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
                            event_id = self._publish_one(pub, turn)
                            gate = self.gate
                            if gate is not None:
                                wait_until(functools.partial(gate, event_id), 60)
                            if self.after_publish is not None:
                                self.after_publish(user, event_id)
                        finally:
                            with self._lock:
                                self._publishing -= 1
                        time.sleep(self.pace_s)
        except BaseException as exc:  # surfaced by join()
            self.errors.append(exc)

    def _publish_one(self, pub: Publisher, turn: dict) -> str:
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
            return p.event_id
        raise AssertionError("unreachable: the last attempt raises")

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


# ---- when the faults strike ------------------------------------------------------------------


def spread(total: int, faults: int) -> list[int]:
    """Moments for ``faults`` faults spread evenly over a run of ``total`` events, none at its very
    start or end: fault r at (r + 1) / (faults + 2) of the run."""
    return [total * (r + 1) // (faults + 2) for r in range(faults)]


def reach(
    moments: Sequence[int],
    count: Callable[[], int],
    *,
    total: int,
    counted: str,
    fault: str,
    timeout: float,
    context: str = "",
) -> Iterator[int]:
    """For each moment in turn, wait until ``count()`` (events done, turns published: ``counted``)
    reached it, then yield its index for the caller to strike its ``fault``."""
    prefix = f"{context}: " if context else ""
    for i, moment in enumerate(moments):
        assert wait_until(lambda: count() >= moment, timeout), (  # noqa: B023 (called right here)
            f"{prefix}{count()} of {total} {counted}, {fault} {i + 1} waited for {moment}"
        )
        yield i


# ---- the checks every fault test ends with --------------------------------------------------


def check_exactly_once(
    c: Container, settings: Settings, published: list[Published], context: str
) -> dict[str, int]:
    ids = [p.event_id for p in published]
    assert len(set(ids)) == len(ids), f"{context}: the producer reported an event id twice"
    with c.uow() as uow:
        state = progress_by_id(uow, ids)
    assert state.counts == Counter({"done": len(ids)}), (
        f"{context}: of {len(ids)} published events: {dict(state.counts)}; reasons {dict(state.reasons)}"
    )
    counts = table_counts(c)
    assert counts["events"] == len(ids) and counts["event_receipts"] == len(ids), (
        f"{context}: published {len(ids)}, events {counts['events']}, receipts {counts['event_receipts']}"
    )
    if counts["dead_letters"]:
        with c.uow() as uow:
            letters = uow.session.execute(  # type: ignore[attr-defined]
                text("SELECT task_name, event_id, reason FROM dead_letters LIMIT 5")
            ).all()
        raise AssertionError(f"{context}: {counts['dead_letters']} dead letters: {letters}")
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


# What a point's payload must repeat of its Postgres row: a memory's status and version (a lost
# ``memory.sync_index`` leaves the old ones in the index, with the id still right), a turn's event
# and seq. The score is left out: decay moves it between syncs, within the sweep's tolerance.
PointFacts = tuple[Any, ...]


def _memory_facts(payload: dict[str, Any]) -> PointFacts:
    return (payload.get("status"), payload.get("version"))


def _turn_facts(payload: dict[str, Any]) -> PointFacts:
    return (payload.get("event_id"), payload.get("seq"))


def postgres_index_state(
    c: Container, settings: Settings, users: list[str]
) -> tuple[dict[str, dict[str, PointFacts]], dict[str, dict[str, PointFacts]], int]:
    """What the two indexes must hold by Postgres, per user: each memory point's (status, version)
    and each turn point's (event id, seq), by point id; and how many done turns have no vector."""
    with c.uow() as uow:
        model = uow.meta.get(EMBEDDING_MODEL_KEY)
        memories = {
            u: {
                m.id: (m.status.value, m.version)
                for m in uow.memories.for_user(settings.tenant_id, u, None)
                if m.status is not MemoryStatus.PENDING
            }
            for u in users
        }
        turns: dict[str, dict[str, PointFacts]] = {}
        unembedded = 0
        for u in users:
            states = uow.turn_index.index_states(settings.tenant_id, u)
            turns[u] = {
                turn_point_id(settings.tenant_id, u, s.event.event_id): (s.event.event_id, s.event.seq)
                for s in states
                if s.embedding_model == model
            }
            unembedded += sum(1 for s in states if s.embedding_model is None)
    return memories, turns, unembedded


def index_state(
    settings: Settings, users: list[str]
) -> tuple[dict[str, dict[str, PointFacts]], dict[str, dict[str, PointFacts]]]:
    """Read both embedded indexes (the same facts by point id as ``postgres_index_state``); only
    when no worker owns them (after the workers stopped)."""
    out = []
    for name, facts in (("qdrant", _memory_facts), ("qdrant-turns", _turn_facts)):
        index = EdgeVectorIndex(settings.resolved_data_dir / name)
        try:
            out.append(
                {u: {i: facts(p) for i, p in index.payloads(settings.tenant_id, u).items()} for u in users}
            )
        finally:
            index.close()
    return out[0], out[1]


def _differences(held: dict[str, PointFacts], truth: dict[str, PointFacts]) -> str:
    missing = truth.keys() - held.keys()
    extra = held.keys() - truth.keys()
    stale = sorted(i for i in truth.keys() & held.keys() if held[i] != truth[i])
    shown = "; ".join(f"{i}: index {held[i]} != Postgres {truth[i]}" for i in stale[:3])
    counts = f"missing {len(missing)}, extra {len(extra)}, stale {len(stale)}"
    return f"{counts} ({shown})" if shown else counts


def check_index_matches(c: Container, settings: Settings, users: list[str], context: str) -> dict[str, int]:
    """Both indexes hold exactly Postgres's points, each with its row's status and version
    (memories) or event and seq (turns)."""
    memories, turns, unembedded = postgres_index_state(c, settings, users)
    points, turn_points = index_state(settings, users)
    for u in users:
        assert points[u] == memories[u], (
            f"{context}: {u}: Postgres has {len(memories[u])} memories, the index {len(points[u])} points "
            f"({_differences(points[u], memories[u])})"
        )
        assert turn_points[u] == turns[u], (
            f"{context}: {u}: Postgres has {len(turns[u])} embedded turns, the turn index "
            f"{len(turn_points[u])} ({_differences(turn_points[u], turns[u])})"
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


def stop_and_check_index(
    c: Container, settings: Settings, workers: Workers, users: list[str], context: str
) -> dict[str, int]:
    """Stop the workers (the embedded indexes can be read only once no worker owns them), check
    that the index matches Postgres, and close the container: the figures of the check."""
    workers.stop()
    figures = check_index_matches(c, settings, users, context)
    c.close()
    return figures


def check_and_stop(
    c: Container,
    settings: Settings,
    workers: Workers,
    published: list[Published],
    users: list[str],
    context: str,
) -> dict[str, int]:
    """What every fault test ends with: each published event applied exactly once, then, workers
    stopped, the index matching Postgres; the figures of both checks."""
    figures = check_exactly_once(c, settings, published, context)
    return figures | stop_and_check_index(c, settings, workers, users, context)


def finish(
    c: Container, settings: Settings, ids: list[str], workers: Workers, timeout: float, revive: bool = False
) -> None:
    """Wait for every event to be done, as beat would send the stalled sweep meanwhile; with
    ``revive``, start again any worker that exits by itself, as a supervisor would."""
    # Older than the visibility timeout: what Redis will hand out again is left to it; what a
    # killed worker lost (popped, not yet noted as unacked) is re-driven by the sweep.
    broker = settings.broker_url
    assert broker is not None
    sweep_stalled = beat_sweep(settings, older_than_s=settings.visibility_timeout_s + 5)
    if not revive:
        wait_processed(c, ids, workers.alive, timeout=timeout, sweep=sweep_stalled)
    else:

        def sweep() -> None:
            workers.revive()
            sweep_stalled()

        wait_processed(c, ids, [], timeout=timeout, sweep=sweep, sweep_every_s=2.0)
        workers.revive()
    assert_queues_drain(broker, 90)
