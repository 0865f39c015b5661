"""Queue names, task names and the queue of each task (``ROUTES``), written here only: producers
send tasks by these names, and the workers' routing (``workers/reliability.py``) and beat's
schedule (``beat_schedule.py``) both read ``ROUTES``."""

from __future__ import annotations

from enum import StrEnum


class Queue(StrEnum):
    INGEST = "cuemem.ingest"  # record events: fast, ordered by nothing but must never be lost
    EXTRACT = "cuemem.extract"  # rule-based (or LLM) extraction
    EMBED = "cuemem.embed"  # CPU-heavy model calls: prefetch 1
    PERSIST = "cuemem.persist"  # write memories to Postgres
    INDEX = "cuemem.index"  # the only queue that writes the vector index (one owner when embedded)
    SEARCH = "cuemem.search"  # memory.search RPCs to the index owner, served before its write backlog
    RESOLVE = "cuemem.resolve"  # conflict detection and resolution, off the ingest path
    MAINTENANCE = "cuemem.maintenance"  # beat tasks


class TaskName(StrEnum):
    RECORD = "memory.record"
    RECORD_BATCH = "memory.record_batch"  # many turns in one message (Publisher.publish_batch)
    EXTRACT = "memory.extract"
    EMBED = "memory.embed"
    PERSIST = "memory.persist"
    INDEX = "memory.index"
    SEARCH = "memory.search"
    SEARCH_BATCH = "memory.search_batch"  # every search of one recall in one round trip
    REINDEX = "memory.reindex"
    RESUME_STALLED = "memory.resume_stalled"
    DECAY = "memory.decay"
    RESOLVE = "memory.resolve"
    SYNC_INDEX = "memory.sync_index"
    CONSOLIDATE = "memory.consolidate"
    OPTIMIZE_INDEX = "memory.optimize_index"
    REINFORCE = "memory.reinforce"  # count a recall's memories as used (recall_for with reinforce)
    EXPIRE = "memory.expire"  # task TTL (beat)
    ARCHIVE = "memory.archive"  # long-unused, low-score memories (beat)
    PUSH_SCORES = "memory.push_scores"  # payload scores after a recompute (the index owner)
    RECONCILE = "memory.reconcile"  # Postgres vs index drift repair (beat, the index owner)
    DELETE_POINTS = "memory.delete_points"  # privacy delete: drop named points (the index owner)
    ERASE_POINTS = "memory.erase_points"  # delete a user everywhere: every point, counted (owner)
    PRIVACY_REWRITE = "memory.privacy_rewrite"  # a privacy delete's deferred Redis file rewrite (beat)


class SearchMode(StrEnum):
    """What a ``memory.search`` task searches (its optional sixth argument)."""

    VECTOR = "vector"  # query: the dense vector, list[float] (the default: older clients send no mode)
    KEYWORDS = "keywords"  # query: the sparse terms as [indices, values] (a shared.ports.SparseTerms)


class IndexKind(StrEnum):
    """Which vector index a call means (the ``memory.search`` task's optional seventh argument)."""

    MEMORIES = "memories"  # long-term memories (the default)
    TURNS = "turns"  # the conversation log: one point per recorded turn


ROUTES: dict[TaskName, Queue] = {
    TaskName.RECORD: Queue.INGEST,
    TaskName.RECORD_BATCH: Queue.INGEST,
    TaskName.EXTRACT: Queue.EXTRACT,
    TaskName.EMBED: Queue.EMBED,
    TaskName.PERSIST: Queue.PERSIST,
    TaskName.INDEX: Queue.INDEX,
    TaskName.SEARCH: Queue.SEARCH,
    TaskName.SEARCH_BATCH: Queue.SEARCH,
    TaskName.REINDEX: Queue.INDEX,
    TaskName.RESUME_STALLED: Queue.MAINTENANCE,
    TaskName.DECAY: Queue.MAINTENANCE,
    TaskName.RESOLVE: Queue.RESOLVE,
    TaskName.SYNC_INDEX: Queue.INDEX,
    TaskName.CONSOLIDATE: Queue.MAINTENANCE,
    TaskName.OPTIMIZE_INDEX: Queue.INDEX,
    TaskName.REINFORCE: Queue.MAINTENANCE,
    TaskName.EXPIRE: Queue.MAINTENANCE,
    TaskName.ARCHIVE: Queue.MAINTENANCE,
    TaskName.PUSH_SCORES: Queue.INDEX,
    TaskName.RECONCILE: Queue.INDEX,
    TaskName.DELETE_POINTS: Queue.INDEX,
    TaskName.ERASE_POINTS: Queue.INDEX,
    TaskName.PRIVACY_REWRITE: Queue.MAINTENANCE,
}

# Queues that a general worker consumes; the index owner consumes INDEX_OWNER_QUEUES (see ARCHITECTURE).
PIPELINE_QUEUES: tuple[Queue, ...] = (
    Queue.INGEST,
    Queue.EXTRACT,
    Queue.EMBED,
    Queue.PERSIST,
    Queue.RESOLVE,
    Queue.MAINTENANCE,
)

# The embedded index owner's queues, in the order it checks them: a waiting search always goes
# before the index writes (the owner's worker consumes them with kombu's "priority" queue order,
# see workers/reliability.py), so a recall never waits behind the ingest backlog.
INDEX_OWNER_QUEUES: tuple[Queue, ...] = (Queue.SEARCH, Queue.INDEX)
