"""``/metrics``: the Prometheus text of the app's registry (service/http/metrics.py says what is in it:
aggregates over all tenants, none naming a tenant or a user, the store's counts cached).

Served without a key, as Prometheus scrapers have none; with ``CUEMEM_METRICS_TOKEN`` set, a scrape
must send ``Authorization: Bearer <token>`` (Prometheus' ``authorization`` scrape setting)."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import Response
from fastapi.security.utils import get_authorization_scheme_param
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.http.deps import AppContainer, Metrics
from service.http.errors import ApiError
from shared.events import FieldError

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
def prometheus(
    metrics: Metrics, container: AppContainer, authorization: Annotated[str | None, Header()] = None
) -> Response:
    token = container.settings.metrics_token
    if token is not None:
        scheme, sent = get_authorization_scheme_param(authorization)
        if scheme.lower() != "bearer" or not secrets.compare_digest(
            sent.encode(), token.get_secret_value().encode()
        ):
            raise ApiError(
                401,
                "/metrics needs the metrics token: send `Authorization: Bearer <token>`",
                fields=[FieldError("Authorization", "is not the metrics token")],
            )
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
