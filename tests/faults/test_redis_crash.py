"""Fault: Redis crashed (SIGKILL) mid-ingest, losing the tail of its append-only file that a host
crash with ``appendfsync everysec`` loses: what is lost is exactly what the cut tail held, the app can
tell which turns those are and send them again, and no seq is reused.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from infra import redis_layout
from producers.publisher import Published, Publisher
from shared.events import event_ref
from shared.queues import Queue
from shared.settings import Settings
from tests.support import faults
from tests.support.own_servers import OwnRedis
from tests.support.queues import beat_sweep, queue_report, queues_empty
from tests.support.services import progress_by_id, wait_until
from tests.support.workload import make_turns
from workers.bootstrap import Container, build_container
from workers.runtime.processes import check_alive

# With `appendfsync everysec` (Redis's usual setting; docker-compose.yml runs `always`) Redis
# writes every command to its append-only file before it answers and fsyncs the file once a
# second. A crash of the host (power loss, kernel panic, a VM killed) loses the tail written since
# the last fsync: about a second of acknowledged writes, more on a slow disk. The test emulates it
# without measuring time: it SIGKILLs Redis, cuts the file back to the last whole command before
# the writes of the last TAIL_TURNS publishes (however long they took), and restarts Redis on it.
# What the test asserts holds for a tail of any length: the loss is the cut tail's, nothing older.
TAIL_TURNS = 15


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


@dataclass
class Crash:
    caught_up: bool  # every turn published since the previous crash was recorded, publishing held
    aof_bytes_after_kill: int
    aof_bytes_kept: int
    kept: bytes = field(repr=False)  # what survived: the file Redis restarts on
    cut: bytes = field(repr=False)  # what the crash took: the rest of the file
    tail: list[str] = field(default_factory=list)  # the event ids of the last TAIL_TURNS publishes
    record_queue_at_kill: int = 0  # memory.record messages waiting in the queue
    counters_behind: int = 0  # conversations whose seq counter came back lower than before the kill
    fell_back: dict[str, tuple[int, int]] = field(default_factory=dict)  # their counter: before, after


def ledger_entries(aof: bytes, tenant: str) -> set[str]:
    """The event ids whose publish ledger member (written by their publish, or by the settle of
    their record) a piece of an append-only file holds: each member is a whole bulk string."""
    prefix = redis_layout.ledger_member(tenant, "").encode()
    return {m.decode() for m in re.findall(re.escape(b"\r\n" + prefix) + rb"([^\r\n]+)\r\n", aof)}


def published_since_restart(server: OwnRedis, previous: Crash, ingest: faults.Ingest) -> list[str]:
    """The turns published since ``previous``'s restart, as the append-only file tells: those whose
    ledger entry Redis wrote after the part it restarted on (or whose record settled since; those
    are recorded). Not every publish counted after the crash: publishing went on at full pace
    until the kill, so turns published between the moment the crash counted them and the kill
    were cut, lost for good, and would be waited for in vain."""
    aof = server.aof_tail().read_bytes()
    assert aof.startswith(previous.kept), "Redis rewrote its append-only file since the crash"
    written = ledger_entries(aof[len(previous.kept) :], ingest.settings.tenant_id)
    with ingest._lock:
        return [p.event_id for p in ingest.published if p.event_id in written]


def await_all_recorded(
    c: Container, ingest: faults.Ingest, server: OwnRedis, workers: faults.Workers, previous: Crash | None
) -> None:
    """With publishing held, wait until the record queue is empty and every turn published since
    the ``previous`` crash (what it cut stays lost until the end) is recorded: the seqs Redis is
    about to forget then belong to turns Postgres holds."""
    if previous is None:
        with ingest._lock:
            ids = [p.event_id for p in ingest.published]
    else:
        ids = published_since_restart(server, previous, ingest)
    assert len(ids) > TAIL_TURNS, f"only {len(ids)} turns published since the previous crash"
    client = redis.Redis.from_url(server.url)

    def recorded() -> bool:
        workers.revive()  # the recorder may have exited on the previous crash
        if client.llen(Queue.INGEST.value):
            return False
        with c.uow() as uow:
            return len(uow.receipts.get_many(ingest.settings.tenant_id, ids)) == len(ids)

    try:
        assert wait_until(recorded, 180), f"the {len(ids)} published turns were never all recorded"
    finally:
        client.close()


def crash_redis(server: OwnRedis, ingest: faults.Ingest, caught_up: bool) -> Crash:
    # Unless publishing is held, turns are still published until the kill: the cut takes them too.
    with ingest._lock:
        conversations = sorted({(p.user_id, p.session_id) for p in ingest.published})
        tail = [p.event_id for p in ingest.published[-TAIL_TURNS:]]
    tenant = ingest.settings.tenant_id
    counter_keys = [redis_layout.seq_key(tenant, user, session) for user, session in conversations]
    client = redis.Redis.from_url(server.url)
    try:
        queued = int(client.llen(Queue.INGEST.value))
        before = client.mget(counter_keys)
        server.kill()
    finally:
        client.close()
    aof = server.aof_tail()
    data = aof.read_bytes()
    # The first write of the oldest publish of the tail: its ledger entry (the publish writes it in
    # one transaction with its message and seq).
    first = data.find(redis_layout.ledger_member(tenant, tail[0]).encode())
    assert first > 0, f"the ledger entry of {tail[0]} is not in the append-only file Redis appends to"
    keep = whole_commands(data[:first])  # cut where Redis itself would stop loading
    with aof.open("r+b") as fh:
        fh.truncate(keep)
    server.start()
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
        caught_up,
        len(data),
        keep,
        data[:keep],
        data[keep:],
        tail,
        queued,
        len(fell_back),
        fell_back,
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


def test_redis_crash_mid_ingest_loses_only_the_cut_tail_which_the_app_can_resend_and_reuses_no_seq(
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
    # Turns recorded as soon as they are published: a turn of the cut tail is then usually in
    # Postgres already, while Redis forgets the seq it was handed, and the next turn of its
    # conversation is handed the same seq again (the case that lost turns, see RELIABILITY.md).
    workers.start("ingest")
    ingest = faults.Ingest(settings, turns, pace_s=0.05).start()

    done: list[Crash] = []
    # Crashes spread over the publishing, each in the middle of the conversations under way
    # (a quarter into the current user's 40 turns), each more than TAIL_TURNS publishes after the
    # one before (the cut stays after the previous restart).
    moments = [total * (4 * r + 1) // (4 * crashes) for r in range(crashes)]
    assert min(moments) > TAIL_TURNS and total // crashes > 2 * TAIL_TURNS
    for r in faults.reach(
        moments, lambda: len(ingest.published), total=total, counted="published", fault="crash", timeout=120
    ):
        # Every other crash once the recorder has caught up, publishing held: every turn of the
        # tail is in Postgres, and their seqs are what Redis forgets.
        caught_up = r % 2 == 1
        if caught_up:
            ingest.hold()
            await_all_recorded(c, ingest, own_redis, workers, done[-1] if done else None)
        # Otherwise at full pace: turns of the tail may still be queued, and are lost.
        assert not ingest.finished, "publishing finished before the crash; the test proved nothing"
        done.append(crash_redis(own_redis, ingest, caught_up))
        ingest.release()
        workers.revive()

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
    # What may be lost, by the file, not by the clock: a turn whose publish wrote into a tail the
    # crash cut (its ledger entry is in the cut part and nowhere in the part that survived). A lost
    # turn whose entry survived is a loss the sweep should have prevented; one whose publish wrote
    # into no cut tail was lost by something else than the crash.
    tenant = settings.tenant_id

    def member(event_id: str) -> bytes:
        return redis_layout.ledger_member(tenant, event_id).encode()

    durable = [e for e in unrecorded if any(member(e) in k.kept for k in done)]
    assert not durable, f"{len(durable)} turns were lost although their ledger entry survived: {durable}"
    uncut = [e for e in unrecorded if not any(member(e) in k.cut for k in done)]
    assert not uncut, f"{len(uncut)} lost turns had written nothing the crashes cut: {uncut}"
    lost = set(unrecorded)
    lost_by_crash = [sum(1 for e in lost if member(e) in k.cut) for k in done]
    # When every turn the crash could cut was recorded before it, nothing may be lost.
    caught_up_lost = [n for n, k in zip(lost_by_crash, done, strict=True) if k.caught_up]
    assert not any(caught_up_lost), f"crashes after the recorder had caught up lost turns: {lost_by_crash}"

    renumbered = renumbered_turns(c, tenant, published)
    assert renumbered, (
        f"no turn was handed a taken seq; the test proved nothing: {[k.fell_back for k in done]}"
    )

    # The app can tell which turns were lost (no receipt: the status it reads says "queued"
    # forever) and sends each again with its event id, as after a publish that failed: recorded
    # once, with the seq the new publish returned, or renumbered like any turn when the counter
    # handed it a taken seq. That happens when the caught-up crash cut the last counter writes
    # (a renumbering's too) of a conversation that published nothing after it: its counter
    # stays behind its recorded turns until the next publish, the re-send, draws from it.
    resent = resend(settings, turns, published, lost)
    assert wait_until(lambda: faults.done_count(c, sorted(lost)) == len(lost), 300), (
        f"{len(lost) - faults.done_count(c, sorted(lost))} of {len(lost)} re-sent turns never got done"
    )
    resent_renumbered = renumbered_turns(c, tenant, resent)
    expected = [
        dataclasses.replace(p, seq=renumbered.get(p.event_id, p.seq))
        for p in published
        if p.event_id not in lost
    ] + [dataclasses.replace(p, seq=resent_renumbered.get(p.event_id, p.seq)) for p in resent]
    figures = faults.check_and_stop(c, settings, workers, expected, sorted(turns), "after the Redis crash")
    faults.report(
        "redis_crash",
        published,
        started,
        crashes=len(done),
        tail_turns=TAIL_TURNS,
        caught_up=[k.caught_up for k in done],
        lost=lost_by_crash,
        resent=len(resent),
        renumbered=len(renumbered),
        resent_renumbered=len(resent_renumbered),
        counters_behind=[k.counters_behind for k in done],
        record_queue_at_kill=[k.record_queue_at_kill for k in done],
        aof_bytes_cut=[k.aof_bytes_after_kill - k.aof_bytes_kept for k in done],
        republished_after_retries=ingest.republished,
        worker_exits=workers.exits,
        **figures,
    )


def renumbered_turns(c: Container, tenant: str, published: list[Published]) -> dict[str, int]:
    """The seq each renumbered turn of ``published`` is recorded under. A turn handed a seq that a
    recorded turn holds is renumbered above its conversation, and its receipt says from which seq
    to which; every other turn keeps the seq the producer returned."""
    renumbered: dict[str, int] = {}
    with c.uow() as uow:
        receipts = uow.receipts.get_many(tenant, [p.event_id for p in published])
        for p in published:
            receipt = receipts.get(p.event_id)
            reason = receipt.reason if receipt is not None else None
            if reason is not None and reason.startswith("renumbered"):
                stored = uow.events.get(event_ref(tenant, p.event_id))
                assert stored is not None and stored.event.seq > p.seq, (p, stored)
                assert reason.startswith(f"renumbered from seq {p.seq} to {stored.event.seq}:")
                renumbered[p.event_id] = stored.event.seq
    return renumbered


def resend(
    settings: Settings, turns: dict[str, list[dict]], published: list[Published], lost: set[str]
) -> list[Published]:
    """Publish each lost turn again, as it was first published (its event id and content), in
    its conversation's order."""
    seq = {p.event_id: p.seq for p in published}
    by_id = {t["event_id"]: t for ts in turns.values() for t in ts}
    with Publisher.from_settings(settings) as pub:
        return [pub.publish_turn(by_id[e]) for e in sorted(lost, key=lambda e: seq[e])]
