"""Fault: Redis crashed (SIGKILL) mid-ingest, losing the last second of its append-only file, as a
host crash with ``appendfsync everysec`` would: at most that second is lost and no seq is reused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from shared import keys
from shared.events import event_ref
from shared.queues import Queue
from shared.settings import Settings
from tests.support import faults
from tests.support.own_servers import OwnRedis
from tests.support.queues import beat_sweep, queue_report, queues_empty
from tests.support.services import progress_by_id
from tests.support.workload import make_turns
from workers.bootstrap import Container, build_container
from workers.runtime.processes import check_alive

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
    c: Container,
    ingest: faults.Ingest,
    server: OwnRedis,
    workers: faults.Workers,
    span: float,
    timeout: float = 180,
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
                    if len(uow.receipts.get_many(ingest.settings.tenant_id, recent)) == len(recent):
                        return
            workers.revive()  # the recorder may have exited on the previous crash
            time.sleep(0.02)
    finally:
        client.close()
    raise AssertionError(f"no moment with the recent turns recorded in {timeout} s")


def crash_redis(server: OwnRedis, watch: AofWatch, ingest: faults.Ingest) -> Crash:
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
    c: Container, settings: Settings, ids: list[str], workers: faults.Workers, timeout: float
) -> tuple[Any, list[str]]:
    """Wait until every published turn is done or provably lost: it has no receipt, and nothing
    could still record it (the publish ledger is empty, no message is queued or unacked), twice
    in a row. The stalled sweep runs every 5 s meanwhile, as beat would send it."""
    broker = settings.broker_url
    assert broker is not None
    # Sooner than beat's 5 minutes: what the crash resurrected in the ledger (a settle it cut)
    # is only re-sent by the sweep. A re-sent turn still queued is a harmless duplicate.
    sweep = beat_sweep(settings, older_than_s=10)
    deadline = time.monotonic() + timeout
    next_sweep = time.monotonic() + 5
    quiet = 0
    while True:
        if time.monotonic() >= next_sweep:
            sweep()
            next_sweep = time.monotonic() + 5
        with c.uow() as uow:
            state = progress_by_id(uow, ids)
        moving = [i for i, s in state.states.items() if s not in ("done", "queued", "rejected", "duplicate")]
        unrecorded = [i for i, s in state.states.items() if s == "queued"]
        idle = not moving and faults.ledger_pending(c) == 0 and queues_empty(broker)
        quiet = quiet + 1 if idle else 0
        if quiet >= 2:
            return state, unrecorded
        # A Redis crash may make a worker exit (kombu, see "A crash of Redis" in RELIABILITY.md).
        workers.revive()
        assert time.monotonic() < deadline, (
            f"not settled in {timeout} s: {dict(state.counts)}, ledger {faults.ledger_pending(c)}, "
            f"{queue_report(broker)}"
        )
        time.sleep(3 if idle else 0.5)


def test_redis_crash_mid_ingest_loses_at_most_the_unsynced_second_and_reuses_no_seq(
    redelivery_settings, own_redis, workers_of
):
    users, crashes = (40, 4) if faults.LONG else (4, 2)
    settings = redelivery_settings.model_copy(
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
    ingest = faults.Ingest(settings, turns, pace_s=0.05).start()

    def recorded(event_id: str) -> bool:
        with c.uow() as uow:
            return bool(uow.receipts.get_many(ingest.settings.tenant_id, [event_id]))

    done: list[Crash] = []
    # Crashes spread over the publishing, each in the middle of the conversations under way
    # (a quarter into the current user's 40 turns).
    moments = [total * (4 * r + 1) // (4 * crashes) for r in range(crashes)]
    for r in faults.reach(
        moments, lambda: len(ingest.published), total=total, counted="published", fault="crash", timeout=120
    ):
        # Every other crash when the recorder has caught up (slower publishing lets it): every turn
        # the crash may cut is in Postgres, and their seqs are what Redis forgets.
        caught_up = r % 2 == 1
        if caught_up:
            # Each turn waits for the one before it to be recorded: the recorder keeps up however
            # loaded the machine is, and the turns left are not used up while it catches up.
            ingest.pace_s = 0.1
            ingest.gate = recorded
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
        ingest.gate = None
        ingest.release()
        ingest.pace_s = 0.05
        workers.revive()
    watch.stop()

    published = ingest.join(timeout=300)
    assert len(published) == total
    ids = [p.event_id for p in published]
    state, unrecorded = settle_or_lost(c, settings, ids, workers, timeout=600 if faults.LONG else 300)
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
        receipts = uow.receipts.get_many(settings.tenant_id, ids)
        for p in published:
            receipt = receipts.get(p.event_id)
            reason = receipt.reason if receipt is not None else None
            if reason is not None and reason.startswith("renumbered"):
                stored = uow.events.get(event_ref(settings.tenant_id, p.event_id))
                assert stored is not None and stored.event.seq > p.seq, (p, stored)
                assert reason.startswith(f"renumbered from seq {p.seq} to {stored.event.seq}:")
                renumbered[p.event_id] = stored.event.seq
    assert renumbered, (
        f"no turn was handed a taken seq; the test proved nothing: {[k.fell_back for k in done]}"
    )
    expected = [
        dataclasses.replace(p, seq=renumbered.get(p.event_id, p.seq))
        for p in published
        if p.event_id not in lost
    ]
    figures = faults.check_and_stop(c, settings, workers, expected, sorted(turns), "after the Redis crash")
    faults.report(
        "redis_crash",
        published,
        started,
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
        **figures,
    )
