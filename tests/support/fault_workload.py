"""The fault tier's workload and its oracle for memory status.

``fault_turns``: ``make_turns``' conversations where, per user, some chit-chat turns become
statements that replace earlier ones by the rules path's slots (a job changed twice, a phone
number three times: each older statement ends ``superseded``) and a statement the user then asks to
forget (``Curation`` forgets it through the API's operation once its turn is done, while the run
goes on: ``forgotten``). ``Curation`` also runs one archive sweep for everyone at a moment of the
run (every memory active then ends ``archived``).

``reference_statuses``: the same turns and operations in the same places, run without faults and
one step at a time on the in-memory pipeline (``tests/support/pipeline.py``): the status every
memory must end with, whatever the faults did. Conflict resolution orders statements by event
time and seq, never by arrival (``shared/ingest/conflicts.py``), so a fault run, whatever order its
workers took the turns in, ends in the same statuses.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from typing import Any

from sqlalchemy import text

from producers.publisher import Published
from service.operations import curation as operations
from shared.lifecycle import curation, sweeps
from shared.models import Memory, MemoryStatus
from shared.queues import TaskName
from shared.settings import Settings
from shared.storage import FollowUp
from tests.support.fake_state import FakeRepository, FakeState
from tests.support.fakes import FakeStore, FakeUnitOfWork
from tests.support.faults import Ingest, Workers, check_and_stop, done_count, tolerant
from tests.support.pipeline import NOW, Harness
from tests.support.queues import beat_sweep
from tests.support.services import wait_until
from tests.support.workload import make_turns
from workers.bootstrap import Container, build_api_container, build_container
from workers.endpoints.embedders.hashing import HashingEmbedder

COMPANIES = ["阿里", "腾讯", "字节", "美团", "京东", "百度", "网易", "小米"]
# The chit-chat turns of make_turns (好的，谢谢 / lol ok / 哈哈哈) that become statements, in order:
# a job changed twice and a phone number three times (the slots profile:job and profile:phone),
# and a code to forget. ``{a}``..``{c}``: companies, ``{n}``: a number, each the user's own.
STORY = [
    "我在{a}上班",
    "我的手机号是138{n}",
    "我跳槽到{b}了",
    "记住我的储物柜密码是 7{n}",  # forgotten on request (FORGET_AT)
    "My new phone number is 137{n}",
    "我的新手机号是139{n}",
    "我入职{c}了",
]
FORGET_AT = 3  # the STORY line whose memories the user asks to forget
CHIT_CHAT = {"好的，谢谢", "lol ok", "哈哈哈"}
# The archive sweep of a fault run: every active memory (any score, any age) becomes archived.
ARCHIVE_EVERYTHING = {"archive_threshold": 1e9, "archive_after_days": 0.0}


class _InPlace(FakeUnitOfWork):
    """A unit of work on the store's state itself: the reference never rolls back, and the fake's
    copy of the whole state per step cost minutes for a fault run's 400 turns."""

    def __enter__(self) -> _InPlace:
        state, self._store.state = self._store.state, FakeState()
        try:
            super().__enter__()  # its repositories, on a copy of an empty state
        finally:
            self._store.state = state
        self._work = state
        for repo in vars(self).values():
            if isinstance(repo, FakeRepository):
                repo.s = state
        return self

    def commit(self) -> None:
        self._store.commits += 1
        self.committed = True


class _InPlaceStore(FakeStore):
    def uow(self) -> FakeUnitOfWork:
        return _InPlace(self)


def fault_turns(users: int, per_user: int) -> tuple[dict[str, list[dict]], set[str]]:
    """The conversations, and the event ids whose memories are to be forgotten once published."""
    turns = make_turns(users=users, per_user=per_user)
    forget: set[str] = set()
    for u, user in enumerate(sorted(turns)):
        chat = [t for t in turns[user] if t["content"] in CHIT_CHAT]
        n = f"{u:02d}{1000 + u:04d}"[:8]
        company = {k: COMPANIES[(u + i) % len(COMPANIES)] for i, k in enumerate("abc")}
        for i, (t, line) in enumerate(zip(chat, STORY, strict=False)):
            t["content"] = line.format(n=n, **company)
            t["role"] = "user"
            if i == FORGET_AT:
                forget.add(t["event_id"])
    return turns, forget


def reference_statuses(
    tenant_id: str,
    turns: Mapping[str, list[dict]],
    seqs: Mapping[str, int],
    forget: Iterable[str],
    archived_after: Mapping[str, int] | None,
    dim: int,
) -> Counter[tuple[str, str, str, str]]:
    """The status of every memory (by id) after the user's turns that were published (``seqs``:
    the seq the producer returned, by event id), one at a time without faults: each forget right
    after its turn, and, when ``archived_after`` is given, the archive sweep once each user's first
    ``archived_after[user]`` turns are through."""
    h = Harness()
    h.store = _InPlaceStore()
    h.embedder = HashingEmbedder(dim=dim)
    forget = set(forget)
    later: list[tuple[str, dict]] = []

    def step(user: str, t: dict) -> None:
        h.drain(t | {"tenant_id": tenant_id, "seq": seqs[t["event_id"]]})

    for user in sorted(turns):
        sent = [t for t in turns[user] if t["event_id"] in seqs]
        cut = len(sent) if archived_after is None else archived_after.get(user, 0)
        for t in sent[:cut]:
            step(user, t)
        later.extend((user, t) for t in sent[cut:])
    if archived_after is not None:
        policy = sweeps.LifecyclePolicy(archive_threshold=1e9, archive_after=timedelta(0))
        sweeps.archive_stale(h.store.uow, NOW + timedelta(days=1), policy)
    for user, t in later:
        step(user, t)
    # Forgotten last: nothing else relates to what is forgotten, so when the run forgot it (any
    # time after its turn was done) changes no other memory's status.
    with h.store.uow() as uow:
        for t in (
            t for ts in turns.values() for t in ts if t["event_id"] in forget and t["event_id"] in seqs
        ):
            made = uow.memories.from_event(tenant_id, t["user_id"], t["event_id"])
            assert made, f"the turn to forget made no memory: {t['content']!r}"
            for m in made:
                curation.forget(uow, tenant_id, t["user_id"], m.id, NOW)
        uow.commit()
    return status_counts(h.state.memories.values())


def status_counts(memories: Iterable[Memory]) -> Counter[tuple[str, str, str, str]]:
    """How many memories hold each (user, type, content, status). By content, not by id: of a
    statement said twice, the memory is the first turn's that a worker took (the other is a
    repeat of it), so ids depend on arrival; what each statement ends as does not."""
    return Counter(
        (m.user_id, m.type.value, m.content, m.status.value)
        for m in memories
        if m.status is not MemoryStatus.PENDING
    )


# ---- the operations of a fault run and its check ----------------------------------------------


class Curation:
    """What the fault run does besides publishing: once a ``forget`` turn is done, forget its
    memories through the API's operation (from a thread of its own while publishing and the
    faults go on; asked again while a fault refuses it, as an app would), and once ``archive_at``
    turns are published, hold publishing, let every published turn finish, send the archive sweep
    to the workers (as beat does) and release once no memory is left active. ``check`` compares
    the status of every memory with ``reference_statuses``."""

    def __init__(self, c: Container, ingest: Ingest, forget: set[str], archive_at: int | None) -> None:
        self.c = c
        self.ingest = ingest
        self.forget = forget
        self.archive_at = archive_at
        self.forgotten: list[str] = []  # memory ids
        self.archived_after: dict[str, int] | None = None
        self.errors: list[BaseException] = []
        self.phase = "not started"  # the archive's, for a message when publishing never ends
        # Seconds publishing was held for the archive, until every turn was done and until the
        # sweep was through (reported, never asserted).
        self.held_s: dict[str, float] = {}
        ingest.after_publish = self._after_publish
        self._to_forget: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._forget, daemon=True)]
        if archive_at is not None:
            self._threads.append(threading.Thread(target=self._archive, daemon=True))

    def start(self) -> Curation:
        for t in self._threads:
            t.start()
        return self

    def join(self, timeout: float) -> list[Published]:
        """``Ingest.join``, saying where the archive was when publishing did not finish."""
        try:
            return self.ingest.join(timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; archive: {self.phase}; errors: {self.errors}") from None

    def _all_done(self, ids: list[str]) -> bool:
        return bool(tolerant(lambda: done_count(self.c, ids) == len(ids), False))

    def _after_publish(self, user: str, event_id: str) -> None:
        if event_id in self.forget:
            self._to_forget.put((user, event_id))

    def _forget(self) -> None:
        try:
            while (item := self._to_forget.get()) is not None:
                self._forget_one(*item)
        except BaseException as exc:  # surfaced by check()
            self.errors.append(exc)

    def _forget_one(self, user: str, event_id: str) -> None:
        assert wait_until(lambda: self._all_done([event_id]), 600), f"{event_id} never got done to forget"
        tenant = self.ingest.settings.tenant_id

        def made_by_event() -> list[str] | None:
            with self.c.uow() as uow:
                return [m.id for m in uow.memories.from_event(tenant, user, event_id)]

        # Read as the app would during a fault: a Postgres going down between the done check and
        # this read fails the read, and the app asks again.
        reads: list[list[str]] = []

        def read() -> bool:
            got = tolerant(made_by_event, None)
            if got is not None:
                reads.append(got)
            return got is not None

        assert wait_until(read, 300), f"{event_id}'s memories could not be read"
        made = reads[0]
        assert made, f"{event_id} made no memory to forget"

        def forget_all() -> bool:
            api = build_api_container(self.ingest.settings)
            try:
                for memory in made:
                    operations.forget(api, tenant, user, memory)
            except Exception:  # a fault under way: the app asks again
                return False
            finally:
                api.close()
            return True

        assert wait_until(forget_all, 300, interval=1.0), f"forgetting {made} never succeeded"
        self.forgotten.extend(made)

    def _archive(self) -> None:
        settings = self.ingest.settings
        try:
            at = self.archive_at
            assert at is not None
            self.phase = f"waiting for {at} published"
            assert wait_until(lambda: len(self.ingest.published) >= at, 600), "the archive moment never came"
            self.ingest.hold()
            held = time.monotonic()
            try:
                with self.ingest._lock:
                    ids = [p.event_id for p in self.ingest.published]
                    counts = Counter(p.user_id for p in self.ingest.published)
                # A fault may have stalled an event (a follow-up that could not be sent): the
                # stalled sweep re-drives it, sent as beat would.
                sweep = beat_sweep(settings, older_than_s=settings.visibility_timeout_s + 5)
                polls = Counter[str]()

                def through() -> bool:
                    if self._all_done(ids):
                        return True
                    polls["n"] += 1
                    if polls["n"] % 20 == 0:
                        with contextlib.suppress(Exception):
                            sweep()
                    return False

                self.phase = f"waiting for the {len(ids)} published turns to be done"
                assert wait_until(through, 240), f"archive: {self.phase} in vain"
                self.held_s["turns_done"] = round(time.monotonic() - held, 1)
                self.archived_after = dict(counts)

                def archived() -> bool:
                    # Sent again each time it is not through yet, as beat would on its next round
                    # (a fault may have taken the task); a second sweep finds nothing left.
                    with contextlib.suppress(Exception):
                        self.c.dispatch([FollowUp(TaskName.ARCHIVE.value, ())])
                    return wait_until(lambda: tolerant(self._active_left, 1) == 0, 30)

                self.phase = "waiting for the archive sweep"
                # Shorter than the fault tests wait for their next moment: a sweep that leaves a
                # memory active fails here, by name, and publishing goes on.
                assert wait_until(archived, 120), (
                    f"the archive sweep left {tolerant(self._active_left, -1)} memories active"
                )
                self.phase = "archived"
                self.held_s["archived"] = round(time.monotonic() - held, 1)
            finally:
                self.ingest.release()
        except BaseException as exc:  # surfaced by check()
            self.errors.append(exc)
            self.ingest.release()

    def _active_left(self) -> int:
        with self.c.uow() as uow:
            session = uow.session  # type: ignore[attr-defined]
            return int(
                session.execute(text("SELECT count(*) FROM memories WHERE status = 'active'")).scalar_one()
            )

    def check(self, settings: Settings, published: Sequence[Published], context: str) -> dict[str, Any]:
        """Every memory (active, superseded, archived, forgotten) in the status the run without
        faults ends with; the figures."""
        self._to_forget.put(None)
        for t in self._threads:
            t.join(300)
        assert not any(t.is_alive() for t in self._threads), f"{context}: a forget or the archive never ended"
        assert not self.errors, self.errors
        assert self.archive_at is None or self.archived_after is not None, f"{context}: no archive ran"
        seqs = {p.event_id: p.seq for p in published}
        expected = reference_statuses(
            settings.tenant_id, self.ingest.turns, seqs, self.forget, self.archived_after, self.c.embedder.dim
        )
        users = sorted({p.user_id for p in published})
        with self.c.uow() as uow:
            got = status_counts(m for u in users for m in uow.memories.for_user(settings.tenant_id, u, None))
        missing, extra = expected - got, got - expected
        assert not missing and not extra, (
            f"{context}: memory statuses differ from the run without faults: expected but not found "
            f"{sorted(missing.items())[:5]}, found but not expected {sorted(extra.items())[:5]}"
        )
        statuses = Counter(status for (_, _, _, status), n in got.items() for _ in range(n))
        wanted = {"superseded", "forgotten"} | ({"archived"} if self.archive_at is not None else set())
        assert wanted <= set(statuses), f"{context}: the workload proved nothing: {dict(statuses)}"
        figures: dict[str, Any] = {f"memories_{status}": n for status, n in sorted(statuses.items())}
        return figures | {"archive_held_s": self.held_s}


@dataclass
class CuratedRun:
    """A fault run under way: its turns published by ``ingest`` while ``curation`` forgets and
    archives, on real workers."""

    settings: Settings
    turns: dict[str, list[dict]]
    total: int
    started: float  # time.monotonic() at the start, for the report
    c: Container
    workers: Workers
    ingest: Ingest
    curation: Curation

    def check(self, published: list[Published], context: str) -> dict[str, Any]:
        """What every curated fault run ends with: each memory in the status of the run without
        faults, each event applied exactly once, then the index matching Postgres (the workers
        stopped); the figures of the checks."""
        figures = self.curation.check(self.settings, published, context)
        return figures | check_and_stop(
            self.c, self.settings, self.workers, published, sorted(self.turns), context
        )


def start_curated_run(
    settings: Settings, workers: Workers, users: int, archive_share: Fraction, pace_s: float = 0.0
) -> CuratedRun:
    """Start ``workers``, then publish 50 turns of ``fault_turns`` per user while ``Curation``
    supersedes by the turns themselves, forgets between them and holds for an archive sweep once
    ``archive_share`` of the turns are published."""
    turns, forget = fault_turns(users=users, per_user=50)
    total = users * 50
    started = time.monotonic()
    c = build_container(settings)
    workers.start_all()
    ingest = Ingest(settings, turns, pace_s=pace_s)
    archive_at = total * archive_share.numerator // archive_share.denominator
    curation = Curation(c, ingest, forget, archive_at=archive_at).start()
    ingest.start()
    return CuratedRun(settings, turns, total, started, c, workers, ingest, curation)
