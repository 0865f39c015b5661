"""Searching an embedded index that another process owns.

The embedded Qdrant engine admits one owning process: on a deployment without a Qdrant server
that is the index worker (the one consumer of ``cuemem.search`` and ``cuemem.index``). Any other
process that needs a vector search (the CLI, an app) first tries to open the index itself (it
succeeds when no worker runs) and otherwise sends ``memory.search`` to the owner on
``cuemem.search``, which the owner reads before its index writes, and waits for the answer.

The task's arguments are ``[tenant_id, user_id, query, limit, statuses]`` plus an optional sixth,
the ``SearchMode``: absent or ``"vector"``, ``query`` is the dense vector; ``"keywords"``, it is the
sparse terms as ``[indices, values]`` and the owner runs ``search_keywords``. An optional seventh,
the ``IndexKind``, names the index (absent: the memory index; ``"turns"``: the conversation log).
A vector search of the memory index sends neither, so its arguments suit an owner of any version;
an owner older than the search queue, though, reads only ``cuemem.index`` and never sees it (see
ARCHITECTURE, "Upgrading to the search queue").

``memory.search_batch`` carries all the searches of one recall (``[tenant_id, user_id, searches]``,
each search a ``{"kind", "mode", "query", "limit", "statuses"}`` in the terms above) and answers
each with ``{"hits": [...]}`` or ``{"error": "..."}``: one round trip instead of up to four.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from celery import Celery

from infra.broker import send_task
from shared.ports import (
    IndexHit,
    IndexOwnedElsewhere,
    IndexPoint,
    IndexUnavailable,
    Search,
    SparseTerms,
    VectorIndex,
)
from shared.queues import ROUTES, IndexKind, SearchMode, TaskName
from workers.index import check_sparse, require_scope

log = logging.getLogger(__name__)


class RemoteSearchIndex:
    """Search-only proxy to the index owner. Writes go through the pipeline, never through here."""

    backend = "qdrant-edge (via the index worker)"  # what a recall's trace says it searched

    def __init__(self, app: Celery, timeout_s: float = 10.0, kind: IndexKind = IndexKind.MEMORIES):
        self._app = app
        self._timeout = timeout_s
        self._kind = kind

    def search(
        self,
        tenant_id: str,
        user_id: str,
        vector: Sequence[float],
        limit: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[IndexHit]:
        args: list[Any] = [tenant_id, user_id, list(map(float, vector)), limit, list(statuses)]
        if self._kind is not IndexKind.MEMORIES:  # older owners know only the memory index
            args += [SearchMode.VECTOR.value, self._kind.value]
        return self._call(args)

    def search_keywords(
        self,
        tenant_id: str,
        user_id: str,
        terms: SparseTerms,
        limit: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[IndexHit]:
        require_scope(tenant_id, user_id)
        sparse = check_sparse(terms)
        if sparse is None or limit <= 0:
            return []  # no round trip for a question that finds nothing anywhere
        args: list[Any] = [
            tenant_id,
            user_id,
            [sparse[0], sparse[1]],
            limit,
            list(statuses),
            SearchMode.KEYWORDS.value,
        ]
        if self._kind is not IndexKind.MEMORIES:
            args.append(self._kind.value)
        return self._call(args)

    def search_batch(
        self, tenant_id: str, user_id: str, searches: Sequence[Search]
    ) -> list[list[IndexHit] | IndexUnavailable]:
        """All of them in one ``memory.search_batch`` round trip (see the module doc)."""
        require_scope(tenant_id, user_id)
        wire = [_wire(s) for s in searches]
        answers: list[dict[str, Any]] = self._ask(TaskName.SEARCH_BATCH, [tenant_id, user_id, wire])
        return [
            IndexUnavailable(str(a["error"])) if "error" in a else _hits(a.get("hits") or []) for a in answers
        ]

    def _call(self, args: list[Any]) -> list[IndexHit]:
        return _hits(self._ask(TaskName.SEARCH, args))

    def _ask(self, task: TaskName, args: list[Any]) -> Any:
        return ask_owner(self._app, task, args, self._timeout)

    def _read_only(self, *_: Any) -> Any:
        raise IndexUnavailable(
            "the embedded index is owned by the index worker; this process may only search it"
        )

    ensure = upsert = delete = ids = payloads = set_payload = reset = optimize = _read_only

    def count(self, tenant_id: str | None = None) -> int:
        return self._read_only()

    def close(self) -> None:
        return None


def ask_owner(app: Celery, task: TaskName, args: list[Any], timeout_s: float, expire: bool = True) -> Any:
    """Send ``task`` to the index owner and wait for its answer. Raises IndexUnavailable when the
    owner answered so, or did not answer within ``timeout_s``; the message then expires unrun
    (a search nobody waits for), or, with ``expire=False``, still runs when the owner gets to it
    (a write that must happen)."""
    expires = timeout_s if expire else None
    result = send_task(app, task.value, args=args, queue=ROUTES[task].value, expires=expires)
    try:
        return result.get(timeout=timeout_s, propagate=True)
    except IndexUnavailable:
        raise  # the owner answered: its index cannot serve this now, and its reason says why
    except Exception as exc:
        raise IndexUnavailable(
            f"the index worker did not answer {task.value} in {timeout_s:.0f} s ({exc})"
        ) from exc
    finally:
        result.forget()


class LocalOrRemoteIndex:
    """Use the embedded index in this process when free, else ask the owner (see module doc)."""

    def __init__(self, local: VectorIndex, remote_factory: Any):
        self._local = local
        self._remote_factory = remote_factory
        self._remote: RemoteSearchIndex | None = None
        self.backend = "qdrant-edge (this process)"

    def search(
        self,
        tenant_id: str,
        user_id: str,
        vector: Sequence[float],
        limit: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[IndexHit]:
        return self._searching(lambda index: index.search(tenant_id, user_id, vector, limit, statuses))

    def search_keywords(
        self,
        tenant_id: str,
        user_id: str,
        terms: SparseTerms,
        limit: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[IndexHit]:
        return self._searching(
            lambda index: index.search_keywords(tenant_id, user_id, terms, limit, statuses)
        )

    def search_batch(
        self, tenant_id: str, user_id: str, searches: Sequence[Search]
    ) -> list[list[IndexHit] | IndexUnavailable] | None:
        """Through the owner once a search here was refused; before that None (search here, one
        by one: in this process there is no round trip to save)."""
        if self._remote is None:
            return None
        return self._remote.search_batch(tenant_id, user_id, searches)

    def _searching(self, search: Callable[[Any], list[IndexHit]]) -> list[IndexHit]:
        """Search here while the lock is free; from the first refusal on, through the owner."""
        if self._remote is None:
            try:
                return search(self._local)
            except IndexOwnedElsewhere:
                log.info("embedded index is owned by a worker; searching through it")
                self._remote = self._remote_factory()
                self.backend = RemoteSearchIndex.backend
        return search(self._remote)

    def ensure(self, dim: int, model_name: str) -> None:
        self._local.ensure(dim, model_name)

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        self._local.upsert(points)

    def delete(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> None:
        self._local.delete(tenant_id, user_id, ids)

    def ids(self, tenant_id: str, user_id: str) -> set[str]:
        return self._local.ids(tenant_id, user_id)

    def payloads(self, tenant_id: str, user_id: str) -> dict[str, dict[str, Any]]:
        return self._local.payloads(tenant_id, user_id)

    def set_payload(self, tenant_id: str, user_id: str, payloads: Mapping[str, Mapping[str, Any]]) -> None:
        self._local.set_payload(tenant_id, user_id, payloads)

    def count(self, tenant_id: str | None = None) -> int:
        return self._local.count(tenant_id)

    def reset(self, dim: int, model_name: str) -> None:
        self._local.reset(dim, model_name)

    def optimize(self) -> bool:
        return self._local.optimize()

    def close(self) -> None:
        self._local.close()


def _hits(rows: list[dict[str, Any]]) -> list[IndexHit]:
    return [IndexHit(r["id"], float(r["score"]), r.get("payload") or {}) for r in rows]


def _wire(search: Search) -> dict[str, Any]:
    """A search as ``memory.search_batch`` takes it (JSON: the terms as ``[indices, values]``)."""
    query: list[Any]
    if search.vector is not None:
        mode, query = SearchMode.VECTOR, list(map(float, search.vector))
    else:
        sparse = check_sparse(search.terms) if search.terms is not None else None
        indices, values = sparse if sparse is not None else ([], [])
        mode, query = SearchMode.KEYWORDS, [indices, values]
    return {
        "kind": search.kind,
        "mode": mode.value,
        "query": query,
        "limit": search.limit,
        "statuses": list(search.statuses),
    }
