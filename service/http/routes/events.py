"""``/v1/events``: publish chat turns, one or a batch, with the tenant of the request's key."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from producers.publisher import BATCH_SIZE, Published
from service.http import batch_body
from service.http.deps import AppContainer, LazyPublisher, Metrics, Publishers, Tenant
from service.http.errors import ApiError, printable
from service.http.metrics import ApiMetrics
from service.http.rate_limits import PUBLISH, Limits, RateLimits
from service.http.schemas import BatchIn, BatchOut, EventIn, PublishedOut
from service.operations import event_ids
from shared.events import FieldError, InvalidEvent
from workers.bootstrap import Container

log = logging.getLogger("cuemem.api")

router = APIRouter()


@contextmanager
def _broker_errors() -> Iterator[None]:
    """An unreachable broker is a 503 the client may retry, whatever library raised it."""
    try:
        yield
    except (ConnectionError, OSError) as exc:
        raise ApiError(503, f"the broker is unreachable: {exc}", code="broker_unavailable") from exc
    except Exception as exc:  # redis/kombu errors that are not OSError subclasses
        if type(exc).__module__.split(".")[0] in ("redis", "kombu", "amqp"):
            raise ApiError(503, f"the broker is unreachable: {exc}", code="broker_unavailable") from exc
        raise


def _logged(metrics: ApiMetrics, tenant: str, published: Published, endpoint: str) -> PublishedOut:
    metrics.published.labels(endpoint).inc()
    log.info(
        "published %s seq %d",
        published.event_id,
        published.seq,
        extra={"tenant_id": tenant, "user_id": published.user_id, "event_id": published.event_id},
    )
    return PublishedOut(**published.__dict__)


@router.post(
    "/v1/events",
    status_code=202,
    response_model=PublishedOut,
    tags=["events"],
    responses={409: {"description": "the event id is already this tenant's, for another turn"}},
)
def publish_event(
    body: EventIn,
    tenant: Tenant,
    publisher: Publishers,
    metrics: Metrics,
    limits: Limits,
    container: AppContainer,
) -> PublishedOut:
    """Publish one chat turn. It is recallable at once as working memory; workers do the rest.
    An ``event_id`` the tenant already recorded for another turn: 409 naming ``event_id``, and
    nothing published (the same turn again is a quiet 202)."""
    limits.take(PUBLISH, tenant)
    raw = {**body.model_dump(exclude_none=True), "tenant_id": tenant}
    refused = event_ids.reused(container, tenant, [(0, raw)])
    if refused:
        metrics.invalid.labels("single").inc()
        problem = refused[0].errors[0]
        raise ApiError(409, f"event_id {problem.problem}", code="conflict", fields=[problem])
    try:
        with _broker_errors():
            published = publisher.get().publish_turn(raw)
    except InvalidEvent:
        metrics.invalid.labels("single").inc()
        raise
    return _logged(metrics, tenant, published, "single")


# The body is read by the route itself (service/http/batch_body.py), one turn at a time in the
# thread pool; the document shows it as FastAPI would have.
BATCH_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": BatchIn.model_json_schema()}},
    }
}


@router.post("/v1/events/batch", response_model=BatchOut, tags=["events"], openapi_extra=BATCH_BODY)
async def publish_events(
    request: Request,
    tenant: Tenant,
    publisher: Publishers,
    metrics: Metrics,
    limits: Limits,
    container: AppContainer,
) -> BatchOut:
    """Publish many turns; an invalid one is reported by its index and the others still land.
    The valid ones are sent as batches (``Publisher.publish_batch``): the workers record, embed
    and index each batch in one go. Each turn counts against the tenant's rate limit. A turn whose
    ``event_id`` the tenant already recorded for another turn is an error naming ``event_id``. The body is
    a JSON object ``{"events": [turn, ...]}`` of at most 1,000 turns, each at most
    ``CUEMEM_MAX_BODY_BYTES`` characters (413 naming ``events[i]``)."""
    body = await request.body()
    return await run_in_threadpool(_publish_batch, body, container, tenant, publisher, metrics, limits)


def _publish_batch(
    body: bytes,
    container: Container,
    tenant: str,
    publisher: LazyPublisher,
    metrics: ApiMetrics,
    limits: RateLimits,
) -> BatchOut:
    text = batch_body.batch_text(body)
    spans = batch_body.event_spans(text, container.settings.max_body_bytes)
    limits.take(PUBLISH, tenant, cost=len(spans))
    errors: dict[int, InvalidEvent] = {}
    positions: list[int] = []  # the request index of each turn handed to the publisher

    def turns() -> Iterator[Any]:
        # Parsed as the publisher takes them, a message's worth at a time: no more held at once,
        # and the event ids of each lot checked for reuse in one read.
        for first in range(0, len(spans), BATCH_SIZE):
            lot: list[tuple[int, Any]] = []
            for i in range(first, min(first + BATCH_SIZE, len(spans))):
                raw = batch_body.event_at(text, spans[i])
                if isinstance(raw, dict) and "tenant_id" in raw:
                    errors[i] = InvalidEvent([FieldError("tenant_id", "is set by the API key's tenant")])
                    continue
                lot.append((i, raw))
            errors.update(event_ids.reused(container, tenant, lot))
            for i, raw in lot:
                if i not in errors:
                    positions.append(i)
                    yield {**raw, "tenant_id": tenant} if isinstance(raw, dict) else raw

    with _broker_errors():
        result = publisher.get().publish_batch(turns())
    errors |= {positions[j]: exc for j, exc in result.errors}
    metrics.invalid.labels("batch").inc(len(errors))
    return BatchOut.model_validate(
        {
            "published": [_logged(metrics, tenant, p, "batch") for p in result.published],
            "errors": [
                {
                    "index": i,
                    # printable: a field named in the body may hold a lone surrogate, and an answer
                    # that cannot be encoded was a 500 after the valid turns had been published.
                    "fields": [
                        {"field": printable(e.field), "problem": printable(e.problem)}
                        for e in errors[i].errors
                    ],
                }
                for i in sorted(errors)
            ],
        }
    )
