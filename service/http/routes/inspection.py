"""What the inspector's pictures read, within the key's tenant: a user's timeline, a memory's page,
the overview's counts and the pipeline's health, and replaying one of the tenant's dead letters
(``service/operations/inspection.py``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query

from service.http.deps import AppContainer, MemoryId, Tenant, User, checked_user_id
from service.http.errors import ApiError
from service.operations import inspection
from service.operations.dead_letters import NotReplayable, UnknownDeadLetter
from shared.events import FieldError, InvalidInput

router = APIRouter()


def _aware(name: str, value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise InvalidInput(
            [FieldError(name, "must carry a timezone offset (e.g. 2026-08-10T00:00:00+00:00)")]
        )
    return value


@router.get("/v1/users/{user_id}/timeline", tags=["inspector"])
def timeline(
    tenant: Tenant,
    user_id: User,
    container: AppContainer,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=inspection.TIMELINE_MAX)] = 500,
) -> dict[str, Any]:
    """The user's turns in [since, until) (or the latest `limit`), oldest first, each with the
    memories made from it, and those memories with their status."""
    start, end = _aware("since", since), _aware("until", until)
    return inspection.timeline(container, tenant, user_id, start, end, limit)


@router.get("/v1/users/{user_id}/memories/{memory_id}/page", tags=["inspector"])
def memory_page(
    tenant: Tenant,
    user_id: User,
    memory_id: MemoryId,
    container: AppContainer,
    points: Annotated[int, Query(ge=2, le=400)] = 120,
) -> dict[str, Any]:
    """A memory with its history chain, its half-life score over time with its reinforcements,
    and its source turns."""
    return inspection.memory_page(container, tenant, user_id, memory_id, points)


@router.get("/v1/overview", tags=["inspector"])
def overview(
    tenant: Tenant,
    container: AppContainer,
    user_id: str | None = None,
    days: Annotated[int, Query(ge=1, le=3660)] = 90,
) -> dict[str, Any]:
    """The tenant's (or one user's) memories by type and status, per day and by importance; its
    events by stage and how many are stalled."""
    user = checked_user_id(container, user_id) if user_id is not None else None
    return inspection.overview(container, tenant, user, days)


@router.get("/v1/pipeline", tags=["inspector"])
def pipeline(tenant: Tenant, container: AppContainer) -> dict[str, Any]:
    """Queue depths (deployment-wide), the tenant's events by stage and stalled, its dead letters
    and Flower's address (`CUEMEM_FLOWER_URL`)."""
    return inspection.pipeline(container, tenant)


@router.post("/v1/dead-letters/{letter_id}/replay", tags=["inspector"])
def replay_dead_letter(letter_id: int, tenant: Tenant, container: AppContainer) -> dict[str, Any]:
    """Send one of the tenant's dead letters again (a new task id; handlers are idempotent)."""
    try:
        return inspection.replay_letter(container, tenant, letter_id)
    except UnknownDeadLetter:
        raise ApiError(404, f"no dead letter {letter_id}") from None
    except NotReplayable as exc:
        raise ApiError(409, str(exc)) from None
