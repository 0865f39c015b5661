"""``/metrics``: the Prometheus text of the app's registry (service/http/metrics.py says what is in it)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.http.deps import Metrics

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
def prometheus(metrics: Metrics) -> Response:
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
