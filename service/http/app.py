"""The HTTP API: thin handlers over ``service.operations.curation``, ``service.operations.recall`` and the
producer. Every request is scoped to the tenant of its API key; user ids come from the path or
the body, the tenant never does.

    from service.http.app import create_app
    from service.operations.curation import api_container

    app = create_app(api_container(settings))   # uvicorn service.http.app:... or `cuemem serve`
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.datastructures import MutableHeaders
from starlette.routing import Match

from producers.publisher import Publisher
from service.http import inspector, logs
from service.http.errors import ApiError, error_body, install
from service.http.metrics import ApiMetrics
from service.http.schemas import (
    BatchIn,
    BatchOut,
    DeletedOut,
    EditIn,
    EventIn,
    HealthOut,
    InvalidateIn,
    MemoryOut,
    MemoryPage,
    PublishedOut,
    RecallIn,
    UserPage,
)
from service.operations import curation as api
from service.operations.recall import recall_for
from shared.events import SAFE_ID, FieldError, InvalidEvent
from shared.lifecycle import curation
from workers.bootstrap import Container

log = logging.getLogger("cuemem.api")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]

MAX_MEMORY_ID_CHARS = 128
_BEARER = HTTPBearer(auto_error=False, description="an API key from `cuemem keys create`")
_API_KEY = APIKeyHeader(name="X-API-Key", auto_error=False, description="the same key, another header")


def _version() -> str:
    try:
        return version("cuemem")
    except PackageNotFoundError:
        return "0"


def _container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


def _tenant_of(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)] = None,
    x_api_key: Annotated[str | None, Security(_API_KEY)] = None,
) -> str:
    """The tenant of the request's key; without auth (``--no-auth``), ``CUEMEM_TENANT_ID``."""
    container = _container(request)
    if not request.app.state.auth:
        return container.settings.tenant_id
    key = bearer.credentials.strip() if bearer is not None else (x_api_key or "").strip()
    if not key:
        raise ApiError(401, "an API key is required: send `Authorization: Bearer <key>` or `X-API-Key`")
    tenant = api.tenant_of_key(container, key)
    if tenant is None:
        raise ApiError(401, "the API key is invalid or revoked")
    return tenant


def _user(request: Request, user_id: str) -> str:
    curation.check_ids({"user_id": user_id}, _container(request).settings.max_id_chars)
    return user_id


def _memory(memory_id: str) -> str:
    curation.check_ids({"memory_id": memory_id}, MAX_MEMORY_ID_CHARS)
    return memory_id


Tenant = Annotated[str, Depends(_tenant_of)]
User = Annotated[str, Depends(_user)]
MemoryId = Annotated[str, Depends(_memory)]


def create_app(container: Container, *, auth: bool = True, publisher: Publisher | None = None) -> FastAPI:
    """The API on ``container`` (build it with ``service.operations.curation.api_container`` so that an
    embedded index stays with its worker). ``auth=False`` serves ``CUEMEM_TENANT_ID`` without keys:
    ``cuemem serve --no-auth`` allows it on a loopback address only."""
    settings = container.settings
    app = FastAPI(
        title="cuemem",
        version=_version(),
        description="Long-term memory for LLM agents: publish chat turns, recall, curate memories. "
        "Every request is scoped to the tenant of its API key.",
    )
    install(app)
    metrics = ApiMetrics(
        lambda: api.store_counts(container),
        lambda: api.queue_depths(settings),
        lambda: api.task_runs(settings),
    )
    app.state.container = container
    app.state.metrics = metrics
    app.state.auth = auth
    _publisher: list[Publisher] = [publisher] if publisher is not None else []
    lock = threading.Lock()

    def get_publisher() -> Publisher:
        with lock:  # built once, on first use (a server without Redis still answers reads)
            if not _publisher:
                _publisher.append(Publisher.from_settings(settings))
            return _publisher[0]

    def close() -> None:
        for p in _publisher:
            p.close()

    app.state.close = close

    # --- events -------------------------------------------------------------------------------

    def publish(raw: dict[str, Any], endpoint: str) -> PublishedOut:
        try:
            published = get_publisher().publish_turn(raw)
        except InvalidEvent:
            metrics.invalid.labels(endpoint).inc()
            raise
        except (ConnectionError, OSError) as exc:
            raise ApiError(503, f"the broker is unreachable: {exc}", code="broker_unavailable") from exc
        except Exception as exc:  # redis/kombu errors that are not OSError subclasses
            if type(exc).__module__.split(".")[0] in ("redis", "kombu", "amqp"):
                raise ApiError(503, f"the broker is unreachable: {exc}", code="broker_unavailable") from exc
            raise
        metrics.published.labels(endpoint).inc()
        log.info(
            "published %s seq %d",
            published.event_id,
            published.seq,
            extra={
                "tenant_id": raw["tenant_id"],
                "user_id": published.user_id,
                "event_id": published.event_id,
            },
        )
        return PublishedOut(**published.__dict__)

    @app.post("/v1/events", status_code=202, response_model=PublishedOut, tags=["events"])
    def publish_event(body: EventIn, tenant: Tenant) -> PublishedOut:
        """Publish one chat turn. It is recallable at once as working memory; workers do the rest."""
        return publish({**body.model_dump(exclude_none=True), "tenant_id": tenant}, "single")

    @app.post("/v1/events/batch", response_model=BatchOut, tags=["events"])
    def publish_events(body: BatchIn, tenant: Tenant) -> BatchOut:
        """Publish many turns; an invalid one is reported by its index and the others still land."""
        published: list[PublishedOut] = []
        errors: list[dict[str, Any]] = []
        for i, raw in enumerate(body.events):
            try:
                if isinstance(raw, dict) and "tenant_id" in raw:
                    raise InvalidEvent([FieldError("tenant_id", "is set by the API key's tenant")])
                published.append(
                    publish({**raw, "tenant_id": tenant} if isinstance(raw, dict) else raw, "batch")
                )
            except InvalidEvent as exc:
                errors.append(
                    {"index": i, "fields": [{"field": e.field, "problem": e.problem} for e in exc.errors]}
                )
        return BatchOut.model_validate({"published": published, "errors": errors})

    # --- recall -------------------------------------------------------------------------------

    def run_recall(body: RecallIn, tenant: str) -> dict[str, Any]:
        curation.check_ids({"user_id": body.user_id, "session_id": body.session_id}, settings.max_id_chars)
        checked = curation.check_recall(body.query, body.k, body.now, body.budget_tokens)
        out = recall_for(
            container,
            body.user_id,
            checked.query,
            k=checked.k,
            now=checked.now,
            session_id=body.session_id,
            budget_tokens=checked.budget_tokens,
            include_archived=body.include_archived,
            include_history=body.include_history,
            reinforce=body.reinforce,
            tenant_id=tenant,
        )
        metrics.observe_recall(out)
        return out

    @app.post("/v1/recall", tags=["recall"])
    def recall(body: RecallIn, tenant: Tenant) -> dict[str, Any]:
        """Recall for one user: ``{stage, items, trace, prompt}``, as `cuemem recall --json`."""
        return run_recall(body, tenant)

    @app.post("/v1/recall/prompt", response_class=PlainTextResponse, tags=["recall"])
    def recall_prompt(body: RecallIn, tenant: Tenant) -> PlainTextResponse:
        """Only the prompt block, as text, ready to put in front of the model."""
        return PlainTextResponse(run_recall(body, tenant)["prompt"])

    # --- memories -----------------------------------------------------------------------------

    @app.get("/v1/users", response_model=UserPage, tags=["memories"])
    def list_users(
        tenant: Tenant,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    ) -> dict[str, Any]:
        """The key's tenant's users that have memories, by user id, with their memory counts."""
        return api.list_users(container, tenant, limit, offset)

    base = "/v1/users/{user_id}/memories"

    @app.get(base, response_model=MemoryPage, tags=["memories"])
    def list_memories(
        tenant: Tenant,
        user_id: User,
        status: Annotated[
            str | None, Query(description="comma-separated statuses, or `all`; default active")
        ] = None,
        memory_type: Annotated[str | None, Query(alias="type")] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    ) -> dict[str, Any]:
        """A user's memories, newest first. Forgotten ones only when asked for by status."""
        statuses = curation.parse_statuses(status)
        kind = curation.parse_type(memory_type)
        items, total = api.list_memories(container, tenant, user_id, statuses, kind, limit, offset)
        return {"items": [m.to_public() for m in items], "total": total}

    @app.get(base + "/{memory_id}", response_model=MemoryOut, tags=["memories"])
    def get_memory(tenant: Tenant, user_id: User, memory_id: MemoryId) -> dict[str, Any]:
        return api.get_memory(container, tenant, user_id, memory_id).to_public()

    @app.patch(base + "/{memory_id}", response_model=MemoryOut, tags=["memories"])
    def edit_memory(tenant: Tenant, user_id: User, memory_id: MemoryId, body: EditIn) -> dict[str, Any]:
        """Edit content, type or tags: re-embedded, version + 1, re-indexed, history `edited`."""
        changes = curation.check_edit(body.content, body.type, body.tags, settings.max_content_chars)
        return api.edit(container, tenant, user_id, memory_id, changes).to_public()

    @app.post(base + "/{memory_id}/invalidate", response_model=MemoryOut, tags=["memories"])
    def invalidate_memory(
        tenant: Tenant, user_id: User, memory_id: MemoryId, body: InvalidateIn
    ) -> dict[str, Any]:
        """No longer true: superseded with the reason, never recalled by default."""
        reason = curation.check_reason(body.reason)
        return api.invalidate(container, tenant, user_id, memory_id, reason).to_public()

    @app.post(base + "/{memory_id}/restore", response_model=MemoryOut, tags=["memories"])
    def restore_memory(tenant: Tenant, user_id: User, memory_id: MemoryId) -> dict[str, Any]:
        """Active again: archived, superseded, expired or forgotten memories."""
        return api.restore(container, tenant, user_id, memory_id)[0].to_public()

    @app.delete(base + "/{memory_id}", response_model=DeletedOut, tags=["memories"])
    def delete_memory(
        tenant: Tenant,
        user_id: User,
        memory_id: MemoryId,
        hard: Annotated[
            bool, Query(description="privacy delete: remove rows, vectors, derived memories")
        ] = False,
    ) -> DeletedOut:
        """Forget (status `forgotten`, kept for the audit) or, with `hard=true`, delete for good."""
        if hard:
            return DeletedOut(deleted=api.purge(container, tenant, user_id, memory_id), hard=True)
        return DeletedOut(deleted=api.forget(container, tenant, user_id, memory_id), hard=False)

    @app.get(base + "/{memory_id}/history", tags=["memories"])
    def memory_history(tenant: Tenant, user_id: User, memory_id: MemoryId) -> dict[str, Any]:
        """The memory's chain: what superseded, merged or consolidated it, when and why."""
        return api.history(container, tenant, user_id, memory_id)

    # --- operations ---------------------------------------------------------------------------

    @app.get("/v1/health", response_model=HealthOut, tags=["operations"])
    def health() -> HealthOut:
        return HealthOut(status="ok")

    @app.get("/v1/ready", tags=["operations"], responses={503: {"description": "a backing service is down"}})
    def ready() -> JSONResponse:
        state = api.readiness(container)
        down = sorted(name for name, value in state.items() if value != "ok")
        if not down:
            return JSONResponse(state)
        body = {**state, **error_body("not_ready", f"down: {', '.join(down)}")}
        return JSONResponse(body, status_code=503)

    @app.get("/metrics", include_in_schema=False)
    def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    inspector.install(app)

    app.add_middleware(RequestMiddleware, api=app, metrics=metrics)  # type: ignore[arg-type]
    return app


class RequestMiddleware:
    """Request id (echoed as ``X-Request-ID``, on every log line), the request log line, and the
    HTTP metrics labelled by route template (never the raw path: ids would explode the labels)."""

    def __init__(self, app: ASGIApp, *, api: FastAPI, metrics: ApiMetrics):
        self.app = app
        self.api = api
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
        rid = incoming if 0 < len(incoming) <= 64 and SAFE_ID.match(incoming) else uuid.uuid4().hex
        token = logs.request_id.set(rid)
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message).append("X-Request-ID", rid)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route, method = self._route(scope), str(scope.get("method", ""))
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.request_seconds.labels(method, route).observe(elapsed)
            log.info(
                "%s %s -> %d in %.1f ms",
                method,
                route,
                status,
                elapsed * 1e3,
                extra={"method": method, "route": route, "status": status, "ms": round(elapsed * 1e3, 1)},
            )
            logs.request_id.reset(token)

    def _route(self, scope: Scope) -> str:
        for route in self.api.router.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return str(getattr(route, "path", "?"))
        return "unmatched"
