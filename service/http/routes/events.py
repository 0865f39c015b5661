"""``/v1/events``: publish chat turns, one or a batch, with the tenant of the request's key."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter

from service.http.deps import Metrics, Publishers, Tenant
from service.http.errors import ApiError
from service.http.metrics import ApiMetrics
from service.http.schemas import BatchIn, BatchOut, EventIn, PublishedOut
from shared.events import FieldError, InvalidEvent

log = logging.getLogger("cuemem.api")

router = APIRouter()


def _publish(publisher: Publishers, metrics: ApiMetrics, raw: dict[str, Any], endpoint: str) -> PublishedOut:
    try:
        published = publisher.get().publish_turn(raw)
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


@router.post("/v1/events", status_code=202, response_model=PublishedOut, tags=["events"])
def publish_event(body: EventIn, tenant: Tenant, publisher: Publishers, metrics: Metrics) -> PublishedOut:
    """Publish one chat turn. It is recallable at once as working memory; workers do the rest."""
    return _publish(publisher, metrics, {**body.model_dump(exclude_none=True), "tenant_id": tenant}, "single")


@router.post("/v1/events/batch", response_model=BatchOut, tags=["events"])
def publish_events(body: BatchIn, tenant: Tenant, publisher: Publishers, metrics: Metrics) -> BatchOut:
    """Publish many turns; an invalid one is reported by its index and the others still land."""
    published: list[PublishedOut] = []
    errors: list[dict[str, Any]] = []
    for i, raw in enumerate(body.events):
        try:
            if isinstance(raw, dict) and "tenant_id" in raw:
                raise InvalidEvent([FieldError("tenant_id", "is set by the API key's tenant")])
            published.append(
                _publish(
                    publisher,
                    metrics,
                    {**raw, "tenant_id": tenant} if isinstance(raw, dict) else raw,
                    "batch",
                )
            )
        except InvalidEvent as exc:
            errors.append(
                {"index": i, "fields": [{"field": e.field, "problem": e.problem} for e in exc.errors]}
            )
    return BatchOut.model_validate({"published": published, "errors": errors})
