"""``/v1/health`` (the process answers) and ``/v1/ready`` (Postgres, Redis and the index answer)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from service.http.deps import AppContainer
from service.http.errors import error_body
from service.http.schemas import HealthOut
from service.operations import curation as api

router = APIRouter()


@router.get("/v1/health", response_model=HealthOut, tags=["operations"])
def health() -> HealthOut:
    return HealthOut(status="ok")


@router.get("/v1/ready", tags=["operations"], responses={503: {"description": "a backing service is down"}})
def ready(container: AppContainer) -> JSONResponse:
    state = api.readiness(container)
    down = sorted(name for name, value in state.items() if value != "ok")
    if not down:
        return JSONResponse(state)
    body = {**state, **error_body("not_ready", f"down: {', '.join(down)}")}
    return JSONResponse(body, status_code=503)
