"""What the use cases in ``service/operations/`` need of the composition root, said as small protocols.

``workers.bootstrap.Container`` offers every port a process may need; a use case names only the
ones it touches, so a test can hand it a small fake instead of a container (and a reader sees what
an operation can reach). Each protocol here is a subset of what ``Container`` already offers, so the
container satisfies them structurally (mypy checks it at every call site); nothing here imports
``workers``.

From the least to the most:

- :class:`Stores`: the settings and what derives from them (event limits, the lifecycle policy),
  the unit of work and the clock. Reads, and writes that are one transaction with no follow-up.
- :class:`Dispatching`: ``Stores`` that also enqueue follow-up tasks after a commit.
- :class:`Indexing`: ``Dispatching`` with the embedder and the writable indexes, for a change
  brought into the index here or, when this process may not write it, at the index owner.
- :class:`RecallPorts`: ``Dispatching`` with what a recall searches: the embedder, the search
  indexes, the working memory and the reranker, and the time of the last passed model check.

Operations that reach most of the container anyway (a privacy delete's every store, a purge's
Redis rewrite, readiness probing every service) keep ``Container``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol, overload

from shared.events import EventLimits
from shared.indexing.collections import Collection
from shared.lifecycle.sweeps import LifecyclePolicy
from shared.ports import Embedder, Reranker, VectorIndex
from shared.queues import IndexKind
from shared.settings import Settings
from shared.storage import FollowUp, UnitOfWork

__all__ = ["Dispatching", "Indexing", "RecallPorts", "Stores"]


class Stores(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def uow(self) -> Callable[[], UnitOfWork]: ...
    @property
    def clock(self) -> Callable[[], datetime]: ...
    @property
    def limits(self) -> EventLimits: ...
    @property
    def lifecycle(self) -> LifecyclePolicy: ...


class Dispatching(Stores, Protocol):
    def dispatch(self, followups: Sequence[FollowUp]) -> None:
        """Enqueue follow-up tasks; called only after the unit of work committed."""
        ...


class Indexing(Dispatching, Protocol):
    @property
    def embedder(self) -> Embedder: ...

    @overload
    def index(self, kind: Literal[IndexKind.MEMORIES] = ...) -> VectorIndex: ...
    @overload
    def index(self, kind: IndexKind) -> VectorIndex | None: ...

    def indexes(self) -> dict[Collection[Any, Any], VectorIndex]: ...


class RecallPorts(Dispatching, Protocol):
    # Written after a passed embedding-model check (``service.operations.recall.check_model_cached``).
    model_checked_until: float

    @property
    def embedder(self) -> Embedder: ...
    @property
    def working_memory(self) -> Any: ...

    @overload
    def search_index(self, kind: Literal[IndexKind.MEMORIES] = ...) -> VectorIndex: ...
    @overload
    def search_index(self, kind: IndexKind) -> VectorIndex | None: ...

    def reranker(self) -> Reranker | None: ...
