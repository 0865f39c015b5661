"""The per-user advisory lock that persist takes (``lock_user``), on real Postgres: a second
transaction persisting for the same user waits until the first commits (two workers persisting
one repeat at once would otherwise both find no active copy and both create one), while other
users and other tenants go on, and the waiting persist looks for a repeat only once it holds the
lock (it then finds what the holder committed). The fake unit of work's lock is a no-op, so only
this tier can see it.

The second transaction runs in a thread; that it waits is read from Postgres itself (its backend
in ``pg_locks``, an advisory lock not granted), not inferred from time."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from shared.events import EventLimits
from shared.ingest.embed import embed_event
from shared.ingest.extract import extract_event
from shared.ingest.persist import persist_event
from shared.ingest.record import record_event
from shared.models import MemoryStatus
from workers.bootstrap import Container

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
WAIT_S = 30.0  # how long to wait for Postgres to show the lock wait: a bound, not a measurement


def _embedded_event(c: Container, user: str, seq: int = 1) -> str:
    """A memorable turn of ``user`` carried up to persist: its draft is pending."""
    event_id = f"lock-{user}" if seq == 1 else f"lock-{user}-{seq}"
    message = {
        "event_id": event_id,
        "user_id": user,
        "session_id": "s1",
        "seq": seq,
        "role": "user",
        "content": "我不吃香菜",
        "at": NOW.isoformat(),
    }
    for step in (
        lambda uow: record_event(uow, message, EventLimits()),
        lambda uow: extract_event(uow, event_id, 5.0, NOW, keep_turns=False),
        lambda uow: embed_event(uow, c.embedder, event_id, keep_turns=False, window=1),
    ):
        with c.uow() as uow:
            step(uow)
            uow.commit()
    return event_id


class Persisting(threading.Thread):
    """``persist_event`` in a transaction of its own, noting its backend pid first."""

    def __init__(self, c: Container, event_id: str) -> None:
        super().__init__(daemon=True)
        self.c, self.event_id = c, event_id
        self.pid: int | None = None
        self.pid_known = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.c.uow() as uow:
                session = uow.session  # type: ignore[attr-defined]
                self.pid = int(session.execute(text("SELECT pg_backend_pid()")).scalar_one())
                self.pid_known.set()
                persist_event(uow, self.event_id, NOW)
                uow.commit()
        except BaseException as exc:  # handed to the test thread
            self.error = exc
        finally:
            self.pid_known.set()
            self.done.set()


def _waits_for_advisory_lock(c: Container, pid: int) -> bool:
    with c.uow() as uow:
        session = uow.session  # type: ignore[attr-defined]
        return bool(
            session.execute(
                text(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks"
                    " WHERE pid = :pid AND locktype = 'advisory' AND NOT granted)"
                ),
                {"pid": pid},
            ).scalar_one()
        )


def _observed_waiting(c: Container, worker: Persisting) -> bool:
    """True once Postgres shows ``worker`` waiting for an advisory lock; False if it finished first."""
    assert worker.pid_known.wait(WAIT_S) and worker.pid is not None, worker.error
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if _waits_for_advisory_lock(c, worker.pid):
            return True
        if worker.done.is_set():
            return False
        time.sleep(0.02)
    raise AssertionError(f"persist neither finished nor waited for a lock in {WAIT_S} s")


def _status(c: Container, user: str, event_id: str) -> list[MemoryStatus]:
    with c.uow() as uow:
        return [m.status for m in uow.memories.from_event("default", user, event_id)]


def test_persist_waits_for_the_users_lock_until_the_holder_commits(c: Container) -> None:
    event_id = _embedded_event(c, "u1")
    with c.uow() as holder:
        holder.memories.lock_user("default", "u1")
        worker = Persisting(c, event_id)
        worker.start()
        assert _observed_waiting(c, worker), "persist did not wait for the user's advisory lock"
        assert not worker.done.is_set()
        assert _status(c, "u1", event_id) == [MemoryStatus.PENDING]
        holder.commit()
    assert worker.done.wait(WAIT_S), "persist still waits after the lock's holder committed"
    assert worker.error is None, worker.error
    assert _status(c, "u1", event_id) == [MemoryStatus.ACTIVE]


@pytest.mark.parametrize(("tenant", "user"), [("default", "u1"), ("acme", "u2")])
def test_the_lock_of_one_user_holds_up_no_other_user_or_tenant(c: Container, tenant: str, user: str) -> None:
    event_id = _embedded_event(c, "u2")  # persist locks ("default", "u2")
    with c.uow() as holder:
        holder.memories.lock_user(tenant, user)  # another user of the tenant, or u2 of another tenant
        worker = Persisting(c, event_id)
        worker.start()
        waited = _observed_waiting(c, worker)
        holder.commit()
    assert worker.done.wait(WAIT_S) and worker.error is None, worker.error
    assert not waited, f"persisting for default/u2 waited for the lock of {tenant}/{user}"
    assert _status(c, "u2", event_id) == [MemoryStatus.ACTIVE]


def test_the_duplicate_lookup_is_inside_the_users_lock(c: Container) -> None:
    """Two workers persist one repeat at once: the lock is there so that the second looks for the
    first's memory only after the first committed it. The worker here waits for the lock while the
    holder persists the same fact and commits; the worker must then find that memory and reinforce
    it. Had it looked before taking the lock, it found nothing, and the user keeps two copies."""
    first, repeat = _embedded_event(c, "u1", seq=1), _embedded_event(c, "u1", seq=2)
    with c.uow() as holder:
        holder.memories.lock_user("default", "u1")
        worker = Persisting(c, repeat)
        worker.start()
        assert _observed_waiting(c, worker), "persist did not wait for the user's advisory lock"
        persist_event(holder, first, NOW)  # the other worker, holding the lock, persists the fact
        holder.commit()
    assert worker.done.wait(WAIT_S), "persist still waits after the lock's holder committed"
    assert worker.error is None, worker.error
    with c.uow() as uow:
        active = uow.memories.for_user("default", "u1", [MemoryStatus.ACTIVE])
        drafts = uow.memories.from_event("default", "u1", repeat)
    assert len(active) == 1, f"the repeat was looked up outside the lock: {len(active)} active copies"
    assert sorted(s["event_id"] for s in active[0].sources) == sorted([first, repeat])
    assert drafts == [], "the repeat's draft outlived its reinforcement"
