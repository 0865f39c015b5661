"""The composition root: the one place that turns settings into adapters.

Tasks, the CLI and tests all get their ports from :func:`build_container`; tests pass fakes in
through its keyword arguments instead of patching imports. An API server (and ``cuemem mcp``'s
library backend) gets the same container in its API role, :func:`build_api_container`. Engines,
clients, the embedding model and the vector index are created lazily, on first use in the process
that uses them, never at import and never before a fork.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from infra import tracing
from shared.erasure import UserData
from shared.events import EventLimits, TurnPublished, event_ref
from shared.indexing.collections import COLLECTIONS, Collection
from shared.ingest.advance import IngestSteps
from shared.ingest.conflicts import DEFAULT_STRATEGIES, Judge, Strategy
from shared.ingest.extract import Extractor
from shared.ingest.llm_paths import extract_with_llm, llm_judge
from shared.lifecycle.sweeps import LifecyclePolicy, policy_from
from shared.llm import LLM
from shared.models import Extraction, MemoryType
from shared.ports import Embedder, PublishLedger, Reranker, SeqCounter, VectorIndex
from shared.queues import ROUTES, IndexKind, TaskName
from shared.settings import Settings, get_settings
from shared.storage import FollowUp, UnitOfWork
from workers.endpoints.llm_runtime import current_event_id
from workers.lexicon import apply_lexicon

if TYPE_CHECKING:
    import redis
    from celery import Celery

    from workers.broker import RedisClients

log = logging.getLogger(__name__)

T = TypeVar("T")


_UNSET: Any = object()


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Container:
    settings: Settings
    uow: Callable[[], UnitOfWork]
    clock: Callable[[], datetime] = utc_now
    _embedder: Embedder | None = None
    _indexes: dict[IndexKind, VectorIndex] = field(default_factory=dict)
    _ledger: PublishLedger | None = None
    _seq_counter: SeqCounter | None = None
    _working_memory: Any = None
    _dispatch: Callable[[Sequence[FollowUp]], None] | None = None
    _llm: Any = _UNSET
    _reranker: Any = _UNSET
    _closers: list[Callable[[], None]] = field(default_factory=list)
    _redis_clients: RedisClients | None = None
    _owner: Any = None
    # Until when (time.monotonic) this process trusts its last passed embedding-model check.
    model_checked_until: float = 0.0

    @property
    def limits(self) -> EventLimits:
        s = self.settings
        return EventLimits(s.max_content_chars, s.max_id_chars, s.max_metadata_bytes)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from workers.endpoints.embedders import build_embedder

            built = build_embedder(self.settings)
            if tracing.enabled():
                from workers.endpoints.embedders.traced import TracedEmbedder

                built = TracedEmbedder(built, self.settings.embedder)
            self._embedder = built
        return self._embedder

    def _enabled(self, kind: IndexKind) -> bool:
        """The memory index always; the conversation log (every recorded turn) when turns are indexed."""
        return kind is IndexKind.MEMORIES or self.settings.index_turns

    @overload
    def index(self, kind: Literal[IndexKind.MEMORIES] = ...) -> VectorIndex: ...
    @overload
    def index(self, kind: IndexKind) -> VectorIndex | None: ...

    def index(self, kind: IndexKind = IndexKind.MEMORIES) -> VectorIndex | None:
        """The index of that kind, opened for writing (the index owner), or None when disabled."""
        if not self._enabled(kind):
            return None
        if kind not in self._indexes:
            index = build_index(self.settings, kind, on_lost=self._reconcile_soon)
            self._closers.append(index.close)
            self._indexes[kind] = index
        return self._indexes[kind]

    def indexes(self) -> dict[Collection[Any, Any], VectorIndex]:
        """Every enabled collection with its index (memories first): what the index stage, the
        reconciliation and reindex work on."""
        found = {c: self.index(c.kind) for c in COLLECTIONS}
        return {c: index for c, index in found.items() if index is not None}

    def _reconcile_soon(self, lost: str) -> None:
        """The embedded index lost its files under this process (``workers/index/edge.py``): ask
        for a reconciliation now rather than at beat's next one (every 6 h); until it ran, recall
        goes without the vector search and says so. Sent outside any unit of work on purpose: it
        repairs from whatever Postgres holds when it runs, and an extra one finds nothing to do."""
        if not self.settings.broker_url:
            return  # no worker to send it to: `cuemem maintain` or `cuemem reindex` repairs it
        self.dispatch([FollowUp(TaskName.RECONCILE.value, ())])
        log.warning("asked for a reconciliation of the index: %s", lost)

    @property
    def llm(self) -> LLM | None:
        """The configured LLM (with usage logging and a failure cooldown), or None: rules only."""
        if self._llm is _UNSET:
            from workers.endpoints.llm import build_llm
            from workers.endpoints.llm_runtime import CooldownLLM, DbUsageSink

            inner = build_llm(self.settings, usage_sink=DbUsageSink(self.uow))
            self._llm = CooldownLLM(inner, self.settings.llm_cooldown_s) if inner is not None else None
        return self._llm  # type: ignore[return-value]

    def reranker(self) -> Reranker | None:
        """The cross-encoder reranker, or None when ``CUEMEM_RERANK_URL`` is unset (the default).
        Recall hands it to ``shared.recall.rerank.rerank_order``; it is built on first use."""
        if self._reranker is _UNSET:
            from workers.endpoints.rerankers import build_reranker

            self._reranker = build_reranker(self.settings)
            close = getattr(self._reranker, "close", None)
            if close is not None:
                self._closers.append(close)
        reranker: Reranker | None = self._reranker
        return reranker

    @property
    def judge(self) -> Judge:
        """The conflict judge: the LLM when one is configured (falling back to rules), else rules."""
        return llm_judge(self.llm)

    @property
    def strategies(self) -> dict[MemoryType, Strategy]:
        overrides = {MemoryType(k): Strategy(v) for k, v in self.settings.conflict_strategies.items()}
        return {**DEFAULT_STRATEGIES, **overrides}

    @property
    def lifecycle(self) -> LifecyclePolicy:
        """Decay, archive, TTL and score-push settings (``CUEMEM_DECAY_*``, ``CUEMEM_ARCHIVE_*``...)."""
        return policy_from(self.settings)

    def extractor(self) -> Extractor:
        llm = self.llm

        def run(event: TurnPublished, threshold: float, asked: str | None) -> Extraction:
            # LLM usage rows name the event they were spent on, also when a batch is extracted.
            token = current_event_id.set(event_ref(event.tenant_id, event.event_id))
            try:
                return extract_with_llm(event, threshold, llm, asked)
            finally:
                current_event_id.reset(token)

        return run

    def ingest_steps(self) -> IngestSteps:
        """What the fused extract → embed → persist of a batch needs (``shared/ingest/advance.py``)."""
        from workers.redis.task_metrics import MeteredEmbedder

        s = self.settings
        client = self.redis_client()
        embedder = MeteredEmbedder(self.embedder, client) if client is not None else self.embedder
        # With an LLM the judge takes seconds a pair: resolve stays its own stage then.
        judge = self.judge if self.llm is None else None
        return IngestSteps(
            s.importance_threshold,
            self.extractor(),
            embedder,
            s.index_turns,
            s.turn_window,
            alone=s.turn_alone_vector,
            judge=judge,
            strategies=self.strategies,
        )

    def redis_client(self) -> redis.Redis | None:
        """This process's client to the Redis of ``CUEMEM_REDIS_URL`` (or the Redis broker), or None
        when there is none. One pool per Redis: every Redis adapter below shares it."""
        url = self.settings.effective_redis_url
        return self._redis_of(url) if url is not None else None

    def _redis_of(self, url: str) -> redis.Redis:
        if self._redis_clients is None:
            from workers.broker import RedisClients

            self._redis_clients = RedisClients()
        return self._redis_clients.get(url)

    def _on_redis(self, adapter: Callable[[redis.Redis], T]) -> T | None:
        client = self.redis_client()
        return adapter(client) if client is not None else None

    @property
    def working_memory(self) -> Any:
        """Redis working memory, or None when no Redis is configured (recall then reads Postgres)."""
        if self._working_memory is None:
            from workers.redis.working_memory import RedisWorkingMemory

            self._working_memory = self._on_redis(RedisWorkingMemory)
        return self._working_memory

    @property
    def ledger(self) -> PublishLedger | None:
        """The publish ledger in Redis, or None when no Redis is configured."""
        if self._ledger is None:
            from infra.broker import is_redis_url
            from workers.redis.ledger import RedisPublishLedger

            # The broker's queue depth is read when the broker is a Redis we can reach.
            broker_url = self.settings.broker_url
            broker = self._redis_of(broker_url) if broker_url and is_redis_url(broker_url) else None
            self._ledger = self._on_redis(lambda client: RedisPublishLedger(client, broker))
        return self._ledger

    def user_keys(self) -> UserData | None:
        """A user's data in Redis, for a privacy delete (None when no Redis is configured)."""
        from workers.redis.user_keys import RedisUserKeys

        return self._on_redis(RedisUserKeys)

    @property
    def seq_counter(self) -> SeqCounter | None:
        """The producer's per-conversation seq counters in Redis, or None when no Redis is set."""
        if self._seq_counter is None:
            from workers.redis.seq_counter import RedisSeqCounter

            self._seq_counter = self._on_redis(RedisSeqCounter)
        return self._seq_counter

    @overload
    def search_index(self, kind: Literal[IndexKind.MEMORIES] = ...) -> VectorIndex: ...
    @overload
    def search_index(self, kind: IndexKind) -> VectorIndex | None: ...

    def search_index(self, kind: IndexKind = IndexKind.MEMORIES) -> VectorIndex | None:
        """The index of that kind for searching from a process that is not the index worker (CLI,
        apps): opened here while it is free, else searched through the index worker."""
        if not self._enabled(kind):
            return None
        if self.settings.qdrant_url or kind in self._indexes:
            return self.index(kind)
        self._indexes[kind] = self._local_or_remote(kind)
        return self._indexes[kind]

    def _local_or_remote(self, kind: IndexKind) -> VectorIndex:
        from workers.index.edge import EdgeVectorIndex
        from workers.index.remote import LocalOrRemoteIndex, RemoteSearchIndex

        def remote() -> RemoteSearchIndex:
            return RemoteSearchIndex(self._owner_app(), kind=kind)

        local = LocalOrRemoteIndex(
            EdgeVectorIndex(self.settings.resolved_data_dir / _EDGE_DIRS[kind]), remote
        )
        self._closers.append(local.close)
        return local

    def _owner_app(self) -> Any:
        """A send-only Celery app with results, to ask the index owner (one per process)."""
        if self._owner is None:
            from infra.broker import send_only_app

            broker = self.settings.broker_url
            if not broker:
                raise RuntimeError("CUEMEM_BROKER_URL is not set; cannot reach the index worker")
            self._owner = send_only_app(broker, with_results=True)
            self._closers.append(self._owner.close)
        return self._owner

    def ask_owner(self, task: TaskName, args: list[Any], timeout_s: float, expire: bool = True) -> Any:
        """The index owner's answer to ``task`` (``workers.index.remote.ask_owner``)."""
        from workers.index.remote import ask_owner

        return ask_owner(self._owner_app(), task, args, timeout_s, expire)

    def dispatch(self, followups: Sequence[FollowUp]) -> None:
        """Enqueue follow-up tasks. Called only after the unit of work committed."""
        if not followups:
            return
        if self._dispatch is None:
            self._dispatch = _broker_dispatcher(self.settings)
        self._dispatch(followups)

    def close(self) -> None:
        for closer in reversed(self._closers):
            try:
                closer()
            except Exception:  # closing must go on for the others
                log.exception("error while closing a resource")
        self._closers.clear()
        if self._redis_clients is not None:
            self._redis_clients.close()
        self._indexes.clear()
        self._working_memory = None
        self._ledger = None
        self._seq_counter = None


def build_index(
    settings: Settings,
    kind: IndexKind = IndexKind.MEMORIES,
    on_lost: Callable[[str], None] | None = None,
) -> VectorIndex:
    """The memory index, or the conversation-log (turn) index: same engine, its own collection.
    ``on_lost``: called when the embedded index notices its files vanished under it."""
    if settings.qdrant_url:
        from workers.index.server import QdrantServerIndex

        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        collection = settings.qdrant_collection
        if kind is IndexKind.TURNS:
            collection += "_turns"
        return QdrantServerIndex.from_url(settings.qdrant_url, api_key, collection)
    from workers.index.edge import EdgeVectorIndex

    return EdgeVectorIndex(settings.resolved_data_dir / _EDGE_DIRS[kind], on_lost=on_lost)


_EDGE_DIRS = {IndexKind.MEMORIES: "qdrant", IndexKind.TURNS: "qdrant-turns"}


def _broker_dispatcher(settings: Settings, app: Celery | None = None) -> Callable[[Sequence[FollowUp]], None]:
    """How a task's follow-ups are sent once its unit of work has committed; ``app``: the
    send-only app to use (one for the broker URL when not given)."""
    from infra.broker import send_only_app, send_task

    if app is None:
        if not settings.broker_url:
            raise RuntimeError("CUEMEM_BROKER_URL is not set; follow-up tasks cannot be enqueued")
        app = send_only_app(settings.broker_url)

    def send(followups: Sequence[FollowUp]) -> None:
        for f in followups:
            send_task(app, f.task, args=list(f.args), queue=ROUTES[TaskName(f.task)].value)

    return send


def sql_uow_factory(database_url: str) -> tuple[Callable[[], UnitOfWork], Callable[[], None]]:
    from sqlalchemy import create_engine, event
    from sqlalchemy.orm import sessionmaker

    from workers.db.out_of_range import clamp_out_of_range_times
    from workers.db.uow import SqlUnitOfWork

    # JIT off: every statement here is small, but Postgres's cost estimates for a GIN overlap or a
    # page of ids can pass jit_above_cost, and compiling took 20 ms of a 1 ms query
    # (`cuemem bench latency`: the tail of recall's re-reads).
    engine = create_engine(
        database_url,
        pool_pre_ping=True,
        pool_size=5,
        max_overflow=5,
        connect_args={"options": "-c jit=off"},
    )
    # A stored time past Python's year 9999 is read as its last instant instead of failing the read.
    event.listen(engine, "connect", lambda connection, _record: clamp_out_of_range_times(connection))
    sessions = sessionmaker(engine, expire_on_commit=False)

    def new_uow() -> UnitOfWork:
        return SqlUnitOfWork(sessions)

    return new_uow, engine.dispose


def build_container(
    settings: Settings | None = None,
    *,
    uow: Callable[[], UnitOfWork] | None = None,
    embedder: Embedder | None = None,
    index: VectorIndex | None = None,
    working_memory: Any = None,
    dispatch: Callable[[Sequence[FollowUp]], None] | None = None,
    clock: Callable[[], datetime] = utc_now,
    llm: Any = _UNSET,
    reranker: Any = _UNSET,
    turn_index: VectorIndex | None = None,
) -> Container:
    settings = settings or get_settings()
    tracing.configure(settings, tracing.SERVICE)  # CUEMEM_TRACING (a worker or a publisher may have already)
    # The user cue lexicon first: extraction and recall read it, and a bad file must fail here,
    # naming itself, rather than halfway through a task.
    apply_lexicon(settings)
    closers: list[Callable[[], None]] = []
    if uow is None:
        if not settings.database_url:
            raise RuntimeError("CUEMEM_DATABASE_URL is not set (the CLI sets it on the embedded default)")
        uow, dispose = sql_uow_factory(settings.database_url)
        closers.append(dispose)
    return Container(
        settings=settings,
        uow=uow,
        clock=clock,
        _embedder=embedder,
        _indexes={
            k: i for k, i in ((IndexKind.MEMORIES, index), (IndexKind.TURNS, turn_index)) if i is not None
        },
        _working_memory=working_memory,
        _dispatch=dispatch,
        _closers=closers,
        _llm=llm,
        _reranker=reranker,
    )


def build_api_container(settings: Settings, *, search_timeout_s: float = 10.0) -> Container:
    """The container of an API server (and of ``cuemem mcp``'s library backend): the one
    :func:`build_container`, in its API role.

    An API server is a long-running process beside the workers. On the embedded default it must
    never own the embedded vector index (the engine admits one process, and the index worker is it):
    its indexes only search, through the index worker, and refuse writes, so every write falls back
    to sending the index worker a task (``service/operations/index_followups.py``). With a Qdrant
    server it is the usual container."""
    if settings.qdrant_url:
        return build_container(settings)
    from infra.broker import send_only_app
    from workers.index.remote import RemoteSearchIndex

    if not settings.broker_url:
        raise RuntimeError("CUEMEM_BROKER_URL is not set; the API cannot reach the index worker")
    app = send_only_app(settings.broker_url, with_results=True)
    container = build_container(
        settings,
        index=RemoteSearchIndex(app, search_timeout_s, IndexKind.MEMORIES),
        turn_index=RemoteSearchIndex(app, search_timeout_s, IndexKind.TURNS)
        if settings.index_turns
        else None,
    )
    container._closers.append(app.close)  # the search app lives and closes with the container
    return container


_current: Container | None = None


def container() -> Container:
    """This process's container (built on first use, after any fork)."""
    global _current
    if _current is None:
        _current = build_container()
    return _current


def install_container(built: Container) -> None:
    """Make ``built`` this process's container, the one the task bodies use: how a test hands
    them a container of fakes (``build_container(settings, uow=..., index=...)``)."""
    global _current
    reset_container()
    _current = built


def reset_container() -> None:
    global _current
    if _current is not None:
        _current.close()
    _current = None
