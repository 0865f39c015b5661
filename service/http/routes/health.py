"""``/v1/health`` (the process answers) and ``/v1/ready`` (Postgres, Redis and the index answer)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from service.http.deps import AppContainer
from service.http.errors import error_body
from service.http.schemas import HealthOut
from service.operations import curation as api

router = APIRouter()
DOWN: dict[int | str, dict[str, object]] = {503: {"description": "a backing service is down"}}


# HEAD as well as GET: load balancers and uptime checks probe with either (one operation id each).
@router.head("/v1/health", tags=["operations"], operation_id="health_head")
@router.get("/v1/health", response_model=HealthOut, tags=["operations"])
def health() -> HealthOut:
    return HealthOut(status="ok")


@router.head("/v1/ready", tags=["operations"], operation_id="ready_head", responses=DOWN)
@router.get("/v1/ready", tags=["operations"], responses=DOWN)
def ready(container: AppContainer) -> JSONResponse:
    state = api.readiness(container)
    down = sorted(name for name, value in state.items() if value != "ok")
    if not down:
        return JSONResponse(state)
    body = {**state, **error_body("not_ready", f"down: {', '.join(down)}")}
    return JSONResponse(body, status_code=503)
