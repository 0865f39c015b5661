"""Per-tenant rate limits on the costly endpoints: publishing turns, recalling, editing a memory
(re-embedded), exporting, importing and deleting a user.

One tenant's flood must not take the workers and the embedder from the others. Each tenant (the
tenant of the request's API key; ``CUEMEM_TENANT_ID`` under ``--no-auth``) has one budget per kind
(turns published, recalls, edits, exports, imports, user deletions), counted by the ``limits``
library's sliding-window counter in Redis, so every process of ``cuemem serve --workers N`` draws on
the same budget. A budget of ``rate`` per second with a ``burst`` allows ``burst`` in any window of
``burst / rate`` seconds. A batch costs one unit per turn in it, not one per request. A route spends
its budget through ``limited(kind)``, a dependency that runs before the route reads its body (``POST
/v1/import`` reads its own) and before it does any work. Over budget, the API answers 429 in its
error shape with ``Retry-After`` (whole seconds), which ``producers.client`` waits out and retries.

Keyed by tenant, not by key: a tenant that made more keys would otherwise get more budget. When
Redis cannot be reached the limits let requests through (logged): they guard against a noisy tenant,
and a publish fails on the broker anyway while a recall should still answer.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import Annotated, Any

import redis
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from limits import RateLimitItem, RateLimitItemPerSecond
from limits.storage import MemoryStorage, RedisStorage, Storage
from limits.strategies import SlidingWindowCounterRateLimiter

from infra.broker import redis_py_url
from service.http.deps import Tenant
from service.http.errors import ApiError, error_response
from shared.events import FieldError
from shared.settings import Settings

log = logging.getLogger("cuemem.api")

PUBLISH = "publish"
RECALL = "recall"
EDIT = "edit"
EXPORT = "export"
IMPORT = "import"
DELETE_USER = "delete_user"


@dataclass(frozen=True)
class Budget:
    name: str  # what is counted, for the message: "turns", "recalls"
    rate: float  # per second
    burst: int

    def item(self, namespace: str) -> RateLimitItem:
        window_s = max(1, math.ceil(self.burst / self.rate))
        return RateLimitItemPerSecond(self.burst, window_s, namespace=namespace)


class RateLimited(Exception):
    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RateLimits:
    """The app's budgets (``settings.rate_limits`` off: every ``take`` passes)."""

    def __init__(self, settings: Settings, storage: Storage | None = None) -> None:
        self.enabled = settings.rate_limits
        s = settings
        self._budgets = {
            PUBLISH: Budget("turns", s.rate_limit_publish_per_s, s.rate_limit_publish_burst),
            RECALL: Budget("recalls", s.rate_limit_recall_per_s, s.rate_limit_recall_burst),
            EDIT: Budget("memory edits", s.rate_limit_edit_per_s, s.rate_limit_edit_burst),
            EXPORT: Budget("exports", s.rate_limit_export_per_s, s.rate_limit_export_burst),
            IMPORT: Budget("imports", s.rate_limit_import_per_s, s.rate_limit_import_burst),
            DELETE_USER: Budget(
                "user deletions", s.rate_limit_delete_user_per_s, s.rate_limit_delete_user_burst
            ),
        }
        self._redis_url = settings.effective_redis_url
        self._storage = storage
        self._limiter: SlidingWindowCounterRateLimiter | None = None
        self._lock = threading.Lock()

    def _get(self) -> SlidingWindowCounterRateLimiter:
        # Built on first use: a server without Redis still starts, and no connection is made before
        # uvicorn forks its workers.
        with self._lock:
            if self._limiter is None:
                storage = self._storage
                if storage is None:
                    storage = (
                        _redis_storage(self._redis_url)
                        if self._redis_url
                        else MemoryStorage()  # no Redis configured: one budget per process
                    )
                self._limiter = SlidingWindowCounterRateLimiter(storage)
            return self._limiter

    def take(self, kind: str, tenant: str, cost: int = 1) -> None:
        """Spend ``cost`` of ``tenant``'s ``kind`` budget, or raise :class:`RateLimited`."""
        if not self.enabled or cost <= 0:
            return
        budget = self._budgets[kind]
        if cost > budget.burst:  # could never pass: waiting would not help
            problem = f"holds {cost} {budget.name}, more than the burst of {budget.burst}: send fewer at once"
            raise ApiError(422, f"events {problem}", fields=[FieldError("events", problem)])
        item = budget.item(kind)
        try:
            if self._get().hit(item, tenant, cost=cost):
                return
        except Exception as exc:  # Redis down or refusing: let the request through, say so
            if type(exc).__module__.split(".")[0] not in ("redis", "limits") and not isinstance(exc, OSError):
                raise
            log.warning("rate limit %s not checked for tenant %s: %s", kind, tenant, exc)
            return
        # The sliding window frees budget at about ``rate`` a second: this request's cost is back
        # after cost / rate seconds (never longer than a whole window).
        wait = max(1, math.ceil(min(cost / budget.rate, item.multiples)))
        raise RateLimited(
            f"too many {budget.name}: the limit is {budget.burst} per {item.multiples} s "
            f"({budget.rate:g}/s); retry after {wait} s",
            retry_after_s=wait,
        )


def _redis_storage(url: str) -> RedisStorage:
    # A pool from the URL as redis-py spells it: the embedded default's Redis is a unix socket
    # (kombu's redis+socket://), a scheme the library's own URL parsing does not take.
    # Short timeouts: a Redis that hangs must not hang every request (the check then lets it pass).
    pool = redis.ConnectionPool.from_url(redis_py_url(url), socket_timeout=2, socket_connect_timeout=2)
    return RedisStorage("redis://", connection_pool=pool, key_prefix="cuemem:ratelimit")


def install(app: FastAPI, settings: Settings, storage: Storage | None = None) -> None:
    """Put the budgets on ``app.state`` and answer :class:`RateLimited` as 429 with Retry-After."""
    app.state.rate_limits = RateLimits(settings, storage)

    @app.exception_handler(RateLimited)
    async def rate_limited(_: Request, exc: RateLimited) -> JSONResponse:
        return error_response(429, "rate_limited", str(exc), headers={"Retry-After": str(exc.retry_after_s)})


def rate_limits_of(request: Request) -> RateLimits:
    limits: RateLimits = request.app.state.rate_limits
    return limits


Limits = Annotated[RateLimits, Depends(rate_limits_of)]


def limited(kind: str) -> Any:
    """A route dependency spending one unit of the request tenant's ``kind`` budget (429 over it).
    FastAPI runs it before the route's own work; the OpenAPI document lists the 429 of every route
    that depends on ``rate_limits_of`` (service/http/openapi.py)."""

    def spend(limits: Limits, tenant: Tenant) -> None:
        limits.take(kind, tenant)

    return Depends(spend)
