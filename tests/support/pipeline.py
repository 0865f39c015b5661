"""The pipeline on in-memory fakes, run the way the task layer runs it: the unit tests' harness.

``Harness`` drains a turn (``say``: a conversation) through every stage (one unit of work per
step, as each Celery task commits its own); ``TurnHarness`` also indexes the conversation log;
``ask`` recalls from either.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from shared.events import EventLimits
from shared.indexing.collections import MEMORIES, TURNS, Indexes
from shared.indexing.sync import push_unindexed
from shared.ingest.conflicts import judge_by_rules
from shared.ingest.embed import embed_event
from shared.ingest.extract import extract_event
from shared.ingest.index import index_events
from shared.ingest.persist import persist_event
from shared.ingest.record import record_event
from shared.ingest.resolve import resolve_event
from shared.models import RECALLABLE_STATUSES, MemoryStatus
from shared.queues import TaskName
from shared.recall.cascade import recall
from shared.recall.request import RecallRequest
from tests.support.fake_index import FakeVectorIndex
from tests.support.fakes import FakeStore
from workers.endpoints.embedders.hashing import HashingEmbedder

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
LIMITS = EventLimits()


def turn(seq, content, *, event_id=None, user="u1", session="s1", minutes=0):
    return {
        "event_id": event_id or f"e-{user}-{session}-{seq}",
        "user_id": user,
        "session_id": session,
        "seq": seq,
        "role": "user",
        "content": content,
        "at": (NOW + timedelta(minutes=minutes + seq)).isoformat(),
    }


class Harness:
    """Runs each follow-up like the task layer: one unit of work, commit, then the next step."""

    def __init__(self, *, turns: bool = False, window: int = 3, alone: bool = False):
        self.store = FakeStore()
        self.window = window  # turns per context window, as Settings.turn_window
        self.alone = alone  # each turn embedded by itself too, as Settings.turn_alone_vector
        self.embedder = HashingEmbedder(dim=16)
        self.index = FakeVectorIndex()
        # The conversation log (every turn embedded and indexed), as the workers run by default.
        self.turns = FakeVectorIndex() if turns else None
        self.sent: list[tuple[str, tuple]] = []

    @property
    def indexes(self) -> Indexes:
        """The indexes the workers would hand the index stage: memories, and turns when indexed."""
        return {MEMORIES: self.index} if self.turns is None else {MEMORIES: self.index, TURNS: self.turns}

    def run(self, task, args):
        keep = self.turns is not None
        with self.store.uow() as uow:
            if task == TaskName.RECORD:
                out = record_event(uow, args[0], LIMITS)
            elif task == TaskName.EXTRACT:
                out = extract_event(uow, args[0], 5.0, NOW, keep_turns=keep)
            elif task == TaskName.EMBED:
                out = embed_event(
                    uow, self.embedder, args[0], keep_turns=keep, window=self.window, alone=self.alone
                )
            elif task == TaskName.PERSIST:
                out = persist_event(uow, args[0], NOW)
            elif task == TaskName.INDEX:
                # As the index task (workers/tasks/ingest.py: index) calls it: one id or a batch.
                ids = [args[0]] if isinstance(args[0], str) else list(args[0])
                resolved = len(args) > 1 and args[1] is True
                out = index_events(uow, self.indexes, self.embedder, ids, resolved)
            elif task == TaskName.RESOLVE:
                out = resolve_event(uow, args[0], judge_by_rules, self.embedder, NOW)
            elif task == TaskName.SYNC_INDEX:
                push_unindexed(uow, MEMORIES, self.index, self.embedder, *args)
                out = []
            else:
                raise AssertionError(task)
            uow.commit()
        self.sent.extend((f.task, f.args) for f in out)
        return out

    def drain(self, message):
        queue = [(TaskName.RECORD.value, (message,))]
        while queue:
            task, args = queue.pop(0)
            queue.extend((f.task, f.args) for f in self.run(task, args))

    def say(self, *contents: str) -> None:
        """Drain one conversation of u1's: a turn per content, seq 1, 2, ... a minute apart."""
        for seq, content in enumerate(contents, 1):
            self.drain(turn(seq, content))

    @property
    def state(self):
        return self.store.state


class TurnHarness(Harness):
    """The pipeline with the conversation log indexed, as the workers run it by default."""

    def __init__(self, window: int = 3, alone: bool = False) -> None:
        super().__init__(turns=True, window=window, alone=alone)
        assert self.turns is not None


# A chit-chat turn: below the extraction threshold, so it makes no memory (only a logged turn).
CHAT = "lol we saw a red fox near the old mill by the river"


ASKED = NOW + timedelta(days=1)  # when ask() asks, unless told otherwise


def ask(
    h,
    query,
    *,
    user="u1",
    now=None,
    k=5,
    statuses=RECALLABLE_STATUSES,
    reranker=None,
    tenant="default",
    turn_alone=False,
) -> Any:
    """Recall for ``query`` at ASKED (or at ``now``), from the memories and, on a TurnHarness,
    the conversation log."""
    request = RecallRequest(
        tenant, user, query, now=now or ASKED, k=k, statuses=statuses, turn_alone=turn_alone
    )
    with h.store.uow() as uow:
        return recall(
            uow,
            request,
            embedder=h.embedder,
            index=h.index,
            working_memory=None,
            turn_index=h.turns,
            reranker=reranker,
        )


def active(h, user="u1"):
    """The user's active memories."""
    return [m for m in h.state.memories.values() if m.user_id == user and m.status is MemoryStatus.ACTIVE]
