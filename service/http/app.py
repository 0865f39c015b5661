"""The HTTP API: ``create_app`` puts the container, the metrics and the publisher on the app's state
and includes one router per resource (``service/http/routes/``), whose thin handlers call
``service.operations`` and the producer and receive what they need through FastAPI dependencies
(``service/http/deps.py``). Every request is scoped to the tenant of its API key; user ids come from
the path or the body, the tenant never does.

    from service.http.app import create_app
    from workers.bootstrap import build_api_container

    app = create_app(build_api_container(settings))   # uvicorn service.http.app:... or `cuemem serve`
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import BaseRoute, Match

from producers.publisher import Publisher
from service.http import logs, openapi, rate_limits
from service.http.deps import TENANT_SCOPE_KEY, LazyPublisher
from service.http.embedding_slots import EmbeddingSlots
from service.http.errors import install, internal_error
from service.http.guard import RequestGuard
from service.http.metrics import ApiMetrics
from service.http.routes import (
    docs,
    events,
    health,
    inspection,
    inspector,
    memories,
    metrics,
    recall,
    transfer,
)
from service.operations import curation as api
from shared.events import is_safe_id
from workers.bootstrap import Container

log = logging.getLogger("cuemem.api")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


# In the order of the OpenAPI document. The inspector's routes are not in it (include_in_schema=False).
ROUTERS = (
    events.router,
    recall.router,
    memories.router,
    inspection.router,
    transfer.router,
    health.router,
    metrics.router,
    inspector.router,
    docs.router,
)


def _version() -> str:
    try:
        return version("cuemem")
    except PackageNotFoundError:
        return "0"


# The Host header values a --no-auth server answers (any port).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def create_app(container: Container, *, auth: bool = True, publisher: Publisher | None = None) -> FastAPI:
    """The API on ``container`` (build it with ``workers.bootstrap.build_api_container`` so that an
    embedded index stays with its worker). ``auth=False`` serves ``CUEMEM_TENANT_ID`` without keys:
    ``cuemem serve --no-auth`` allows it on a loopback address only."""
    settings = container.settings
    app = FastAPI(
        title="cuemem",
        version=_version(),
        description="Long-term memory for LLM agents: publish chat turns, recall, curate memories. "
        "Every request is scoped to the tenant of its API key.",
        docs_url=None,  # FastAPI's /docs and /redoc load scripts from a CDN: routes/docs.py instead
        redoc_url=None,
    )
    install(app)
    rate_limits.install(app, settings)
    api_metrics = ApiMetrics(
        lambda: api.store_counts(container),
        lambda: api.queue_depths(settings),
        lambda: api.task_runs(settings),
        cache_s=settings.metrics_cache_s,
    )
    publishers = LazyPublisher(settings, publisher)
    app.state.container = container
    app.state.metrics = api_metrics
    app.state.auth = auth
    app.state.publisher = publishers
    app.state.embedding_slots = EmbeddingSlots(settings.embeddings_in_flight_per_tenant)
    app.state.close = publishers.close
    routes = list(app.router.routes)  # FastAPI's own (/openapi.json, /docs), matched first
    for router in ROUTERS:
        app.include_router(router)
        routes.extend(router.routes)
    # Inside the request middleware, so that its refusals are logged and counted.
    openapi.install(app, routes, settings)
    app.add_middleware(RequestGuard, routes=routes, container=container, auth=auth)  # type: ignore[arg-type]
    app.add_middleware(RequestMiddleware, routes=routes, metrics=api_metrics)  # type: ignore[arg-type]
    if not auth:
        # Without keys, a web page on a DNS-rebinding domain could reach this local API through
        # the browser: only requests naming this machine in their Host header are served.
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS))
    return app


class RequestMiddleware:
    """Request id (echoed as ``X-Request-ID``, on every log line), the request log line, and the
    HTTP metrics labelled by route template (never the raw path: ids would explode the labels).

    ``routes`` are the app's routes one by one: FastAPI keeps an included router as one entry of
    ``app.router.routes``, which has no template of its own."""

    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute], metrics: ApiMetrics):
        self.app = app
        self.routes = routes
        self.metrics = metrics

    async def __call__(
        self,
        scope: Scope,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        rid = incoming if 0 < len(incoming) <= 64 and is_safe_id(incoming) else uuid.uuid4().hex
        token = logs.request_id.set(rid)
        status = 500
        started = time.perf_counter()

        started_response = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started_response
            if message["type"] == "http.response.start":
                status, started_response = int(message["status"]), True
                MutableHeaders(scope=message).append("X-Request-ID", rid)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # Here, not in an exception handler: Starlette runs those outside every middleware,
            # after this one has reset the request id, and the 500's log line lost it.
            log.exception("unhandled error on %s %s", scope.get("method", ""), scope.get("path", ""))
            if started_response:
                raise
            await internal_error()(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route, method = self._route(scope), str(scope.get("method", ""))
            tenant = scope.get(TENANT_SCOPE_KEY)  # left by the guard once the key was checked
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.request_seconds.labels(method, route).observe(elapsed)
            log.info(
                "%s %s -> %d in %.1f ms",
                method,
                route,
                status,
                elapsed * 1e3,
                extra={
                    "method": method,
                    "route": route,
                    "status": status,
                    "ms": round(elapsed * 1e3, 1),
                    "tenant_id": tenant,
                },
            )
            logs.request_id.reset(token)

    def _route(self, scope: Scope) -> str:
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return str(getattr(route, "path", "?"))
        return "unmatched"
