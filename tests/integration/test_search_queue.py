"""A search waits for the index owner's task in hand, never behind its write backlog (issue 8).

The index owner consumes ``cuemem.search`` then ``cuemem.index`` and checks the search queue
first. A real owner process (the production command) is started on a broker holding a backlog of
index writes plus searches sent through ``RemoteSearchIndex``; the test asserts on the order the
owner took its messages in (its log) and on what the index queue still held when a search was
sent, never on time.
"""

from __future__ import annotations

import re
import threading

import redis
from celery import Celery
from celery.signals import after_task_publish

from shared.ports import IndexHit, IndexPoint
from shared.queues import ROUTES, Queue, TaskName
from shared.settings import Settings
from tests.support.services import wait_until
from workers.endpoints.embedders import build_embedder
from workers.index.edge import EdgeVectorIndex
from workers.index.remote import RemoteSearchIndex
from workers.runtime.processes import WorkerProcess, check_alive, start_index_owner

TENANT, USER = "t1", "alice"
BACKLOG = 400  # memory.sync_index messages for users without memories: cheap, but each one real
SEARCHES = 3  # waiting before the owner starts
TIMEOUT_S = 120  # only so that a broken owner fails the test instead of hanging it
RECEIVED = re.compile(r"Task (memory\.[a-z_]+)\[[0-9a-f-]+\] received")


def _seed(settings: Settings) -> tuple[list[float], list[str]]:
    """Two points for alice, written by this process before the owner exists (then let go)."""
    embedder = build_embedder(settings)
    vectors = embedder.embed_passages(["I prefer green tea over coffee", "I live in Berlin"])
    ids = ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"]
    index = EdgeVectorIndex(settings.resolved_data_dir / "qdrant")
    try:
        index.ensure(embedder.dim, embedder.model_name)
        index.upsert(
            [
                IndexPoint(pid, TENANT, USER, vec, {"status": "active", "type": "preference"})
                for pid, vec in zip(ids, vectors, strict=True)
            ]
        )
    finally:
        index.close()
    return list(vectors[0]), ids


def _received(owner: WorkerProcess) -> list[str]:
    """The task names in the order the owner took them off the broker."""
    return RECEIVED.findall(owner.log_path.read_text(errors="replace"))


class _Search(threading.Thread):
    def __init__(self, remote: RemoteSearchIndex, vector: list[float]) -> None:
        super().__init__(daemon=True)
        self.remote, self.vector = remote, vector
        self.hits: list[IndexHit] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.hits = self.remote.search(TENANT, USER, self.vector, 2)
        except BaseException as exc:  # surfaced by the test
            self.error = exc


def test_searches_are_answered_ahead_of_the_index_backlog(it_settings: Settings) -> None:
    settings = it_settings.model_copy(update={"embedder": "hash", "embedding_dim": 64})
    broker = settings.broker_url
    assert broker is not None
    vector, seeded = _seed(settings)
    app = Celery("test-producer", broker=broker, backend=broker, set_as_current=False)
    app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
    remote = RemoteSearchIndex(app, timeout_s=TIMEOUT_S)
    r = redis.Redis.from_url(broker)
    owner: WorkerProcess | None = None
    try:
        with app.producer_or_acquire() as producer:
            for i in range(BACKLOG):
                app.send_task(
                    TaskName.SYNC_INDEX.value,
                    args=[TENANT, f"nobody-{i}"],
                    queue=ROUTES[TaskName.SYNC_INDEX].value,
                    producer=producer,
                )
        searches = [_Search(remote, vector) for _ in range(SEARCHES)]
        for s in searches:
            s.start()
        assert wait_until(lambda: r.llen(Queue.SEARCH.value) == SEARCHES, TIMEOUT_S)
        assert r.llen(Queue.INDEX.value) == BACKLOG  # nothing consumes either queue yet

        owner = start_index_owner(settings)
        for s in searches:
            s.join(TIMEOUT_S)
        check_alive([owner])
        for s in searches:
            assert s.error is None, s.error
            assert s.hits is not None and [h.id for h in s.hits] == seeded
        # Strict order, read from the owner's log (not from how much of the backlog is left when
        # this thread looks, which races the owner draining it): every waiting search before the
        # first index message (FIFO behind the writes would put them last; round robin would have
        # alternated search, index, search, ...).
        assert _received(owner)[:SEARCHES] == [TaskName.SEARCH.value] * SEARCHES, _received(owner)[:10]

        log = owner.log_path.read_text(errors="replace")
        assert "queue order priority: cuemem.search, cuemem.index" in log

        # A search sent while the owner is working through the backlog waits only for the task in
        # hand. Counted, not timed: the index queue's length is read the moment the search is on
        # the broker (in Celery's after-publish signal, before the answer is awaited), so at least
        # ``taken`` index messages had left it before the search came; the log, read after the
        # answer, says how many the owner took before the search. The difference is at most what
        # the search waited behind (the one in hand and one being popped), however slowly this
        # thread ran; a search queued behind the backlog would show all ``left`` of it.
        assert wait_until(lambda: r.llen(Queue.INDEX.value) <= BACKLOG - 20, TIMEOUT_S, interval=0.01)
        left_when_sent: list[int] = []

        def note_backlog(sender: object = None, **_: object) -> None:
            if sender == TaskName.SEARCH.value:
                left_when_sent.append(int(r.llen(Queue.INDEX.value)))

        after_task_publish.connect(note_backlog, weak=False)
        try:
            hits = remote.search(TENANT, USER, vector, 2)
        finally:
            after_task_publish.disconnect(note_backlog)
        assert [h.id for h in hits] == seeded
        [left] = left_when_sent
        assert left > 2, "the owner drained the backlog before the search was sent: nothing shown"
        taken = BACKLOG - left
        received = _received(owner)
        fourth = [i for i, name in enumerate(received) if name == TaskName.SEARCH.value][SEARCHES]
        waited_behind = received[:fourth].count(TaskName.SYNC_INDEX.value) - taken
        assert waited_behind <= 2, (
            f"the search waited behind {waited_behind} index messages of the {left} left when it was sent"
        )
    finally:
        if owner is not None:
            owner.stop(timeout=20)
        r.delete(Queue.INDEX.value, Queue.SEARCH.value)
        r.close()
        app.close()


def test_a_recalls_searches_of_both_indexes_are_one_message_to_the_owner(it_settings: Settings) -> None:
    """``memory.search_batch``: the dense and keyword searches of the memory index and the
    conversation log in one round trip, each answered as the index owner's own search answers it."""
    from shared.language.sparse import sparse_document, sparse_query
    from shared.ports import Search

    settings = it_settings.model_copy(update={"embedder": "hash", "embedding_dim": 64})
    broker = settings.broker_url
    assert broker is not None
    vector, seeded = _seed(settings)
    turn_ids = ["00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000a2"]
    texts = ["we saw a red fox by the old mill", "the deploy port is 8443"]
    embedder = build_embedder(settings)
    turns = EdgeVectorIndex(settings.resolved_data_dir / "qdrant-turns")
    try:
        turns.ensure(embedder.dim, embedder.model_name)
        turns.upsert(
            [
                IndexPoint(pid, TENANT, USER, vec, {"status": "active"}, sparse_document(text))
                for pid, vec, text in zip(turn_ids, embedder.embed_passages(texts), texts, strict=True)
            ]
        )
    finally:
        turns.close()
    app = Celery("test-producer", broker=broker, backend=broker, set_as_current=False)
    app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
    remote = RemoteSearchIndex(app, timeout_s=TIMEOUT_S)
    owner = start_index_owner(settings)
    try:
        fox = sparse_query("red fox")
        answers = remote.search_batch(
            TENANT,
            USER,
            [
                Search("memories", vector, None, 2),
                Search("memories", None, sparse_query("green tea"), 2),
                Search("turns", embedder.embed_query("the deploy port is 8443"), None, 1),
                Search("turns", None, fox, 2),
                Search("turns", None, fox, 2, ("active",)),
            ],
        )
        check_alive([owner])
        assert [[h.id for h in a] for a in answers if isinstance(a, list)] == [
            seeded,
            [],  # the seeded memory points carry no keyword terms
            [turn_ids[1]],
            [turn_ids[0]],
            [turn_ids[0]],
        ]
        assert _received(owner) == [TaskName.SEARCH_BATCH.value]  # one message for all five
    finally:
        owner.stop(timeout=20)
        app.close()
