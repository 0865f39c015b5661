"""``/v1/users`` and ``/v1/users/{user_id}/memories``: list, read and curate one user's memories
(edit, invalidate, restore, forget or purge, history), and delete a user everywhere, within the
key's tenant."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from service.http.deps import AppContainer, MemoryId, Tenant, User
from service.http.embedding_slots import Slots
from service.http.rate_limits import DELETE_USER, EDIT, limited
from service.http.schemas import DeletedOut, EditIn, InvalidateIn, MemoryOut, MemoryPage, UserPage
from service.operations import curation as api
from service.operations import erasure
from shared.lifecycle import curation

router = APIRouter()

BASE = "/v1/users/{user_id}/memories"

# The answers a route gives beside its 200 that the document cannot infer (service/http/openapi.py
# gives every 4xx the one error shape): a memory whose status does not allow the change, and the
# erasure's not-yet-verified report and Postgres's refusal.
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"description": "the memory's status does not allow the change"}
}
ERASURE: dict[int | str, dict[str, Any]] = {
    202: {"description": "deleted where it could be; `unverified` names the store not checked yet"},
    409: {"description": "Postgres refused the erasure: nothing of it was committed, try again"},
}


@router.get("/v1/users", response_model=UserPage, tags=["memories"])
def list_users(
    tenant: Tenant,
    container: AppContainer,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> dict[str, Any]:
    """The key's tenant's users that have memories, by user id, with their memory counts."""
    return api.list_users(container, tenant, limit, offset)


@router.delete(
    "/v1/users/{user_id}", tags=["memories"], dependencies=[limited(DELETE_USER)], responses=ERASURE
)
def delete_user(tenant: Tenant, user_id: User, container: AppContainer) -> JSONResponse:
    """Delete the user everywhere (a privacy request): events, memories, history, vectors in both
    indexes, working memory, the publish ledger and counters; then each store is counted again.
    200 with the report when every store is empty for the user and unchanged for everyone else;
    202 when not (yet): a store could not be checked (`unverified` says which and why: the index
    owner deletes the points when it gets to them), or still holds some of the user's items (a
    turn published meanwhile: delete again). 409 when Postgres refused, with nothing deleted there."""
    report = erasure.erase_user(container, tenant, user_id)
    return JSONResponse(report.to_public(), status_code=200 if report.verified else 202)


@router.get(BASE, response_model=MemoryPage, tags=["memories"])
def list_memories(
    tenant: Tenant,
    user_id: User,
    container: AppContainer,
    status: Annotated[
        str | None, Query(description="comma-separated statuses, or `all`; default active")
    ] = None,
    memory_type: Annotated[str | None, Query(alias="type")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> dict[str, Any]:
    """A user's memories, newest first. Forgotten ones only when asked for by status. Times are
    UTC instants; `user_offset_s` is the user's zone to show them in."""
    statuses = curation.parse_statuses(status)
    kind = curation.parse_type(memory_type)
    page = api.list_memories(container, tenant, user_id, statuses, kind, limit, offset)
    return {
        "items": [m.to_public() for m in page.items],
        "total": page.total,
        "user_offset_s": page.user_offset_s,
    }


@router.get(BASE + "/{memory_id}", response_model=MemoryOut, tags=["memories"])
def get_memory(tenant: Tenant, user_id: User, memory_id: MemoryId, container: AppContainer) -> dict[str, Any]:
    return api.get_memory(container, tenant, user_id, memory_id).to_public()


@router.patch(
    BASE + "/{memory_id}",
    response_model=MemoryOut,
    tags=["memories"],
    dependencies=[limited(EDIT)],
    responses=CONFLICT,
)
async def edit_memory(
    tenant: Tenant, user_id: User, memory_id: MemoryId, body: EditIn, container: AppContainer, slots: Slots
) -> dict[str, Any]:
    """Edit content, type or tags: re-embedded, version + 1, re-indexed, history `edited`. The
    work runs in one of the tenant's embedding slots, as a recall's does."""
    changes = curation.check_edit(body.content, body.type, body.tags, container.settings.max_content_chars)
    edited = await slots.run(tenant, api.edit, container, tenant, user_id, memory_id, changes)
    return edited.to_public()


@router.post(
    BASE + "/{memory_id}/invalidate",
    response_model=MemoryOut,
    tags=["memories"],
    responses=CONFLICT,
    dependencies=[limited(EDIT)],
)
def invalidate_memory(
    tenant: Tenant, user_id: User, memory_id: MemoryId, body: InvalidateIn, container: AppContainer
) -> dict[str, Any]:
    """No longer true: superseded with the reason, never recalled by default."""
    reason = curation.check_reason(body.reason)
    return api.invalidate(container, tenant, user_id, memory_id, reason).to_public()


@router.post(
    BASE + "/{memory_id}/restore",
    response_model=MemoryOut,
    tags=["memories"],
    responses=CONFLICT,
    dependencies=[limited(EDIT)],  # restore re-indexes, as an edit does
)
def restore_memory(
    tenant: Tenant, user_id: User, memory_id: MemoryId, container: AppContainer
) -> dict[str, Any]:
    """Active again: archived, superseded, expired or forgotten memories."""
    return api.restore(container, tenant, user_id, memory_id)[0].to_public()


@router.delete(
    BASE + "/{memory_id}",
    response_model=DeletedOut,
    tags=["memories"],
    responses=CONFLICT,
    dependencies=[limited(EDIT)],  # a hard delete also rewrites the embedded Redis's files
)
def delete_memory(
    tenant: Tenant,
    user_id: User,
    memory_id: MemoryId,
    container: AppContainer,
    hard: Annotated[
        bool, Query(description="privacy delete: remove rows, vectors, derived memories")
    ] = False,
) -> DeletedOut:
    """Forget (status `forgotten`, kept for the audit) or, with `hard=true`, delete for good."""
    if hard:
        return DeletedOut(deleted=api.purge(container, tenant, user_id, memory_id), hard=True)
    return DeletedOut(deleted=api.forget(container, tenant, user_id, memory_id), hard=False)


@router.get(BASE + "/{memory_id}/history", tags=["memories"])
def memory_history(
    tenant: Tenant, user_id: User, memory_id: MemoryId, container: AppContainer
) -> dict[str, Any]:
    """The memory's chain: what superseded, merged or consolidated it, when and why."""
    return api.history(container, tenant, user_id, memory_id)
