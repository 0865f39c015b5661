"""``GET /v1/export`` and ``POST /v1/import``: a tenant's (or one user's) memory as JSON Lines, in the
key's tenant (the format: ``shared/transfer.py``; the work: ``service/operations/transfer.py``)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from service.http.deps import AppContainer, Tenant
from service.http.rate_limits import EXPORT, IMPORT, limited
from service.operations import transfer
from shared.lifecycle import curation

router = APIRouter()

NDJSON = "application/x-ndjson"


@router.get("/v1/export", tags=["transfer"], response_class=StreamingResponse, dependencies=[limited(EXPORT)])
def export(
    tenant: Tenant,
    container: AppContainer,
    user_id: Annotated[str | None, Query(description="one user; without it, the whole tenant")] = None,
) -> StreamingResponse:
    """The key's tenant (or one of its users) as JSON Lines, format cuemem-export version 1."""
    if user_id is not None:
        curation.check_ids({"user_id": user_id}, container.settings.max_id_chars)

    def lines() -> Iterator[str]:
        for line in transfer.export_lines(container, tenant, user_id):
            yield line + "\n"

    name = f"cuemem-{tenant}{'-' + user_id if user_id else ''}.jsonl"
    return StreamingResponse(
        lines(), media_type=NDJSON, headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )


# The route reads its body itself: the document shows it (so that clients and schemathesis send one).
IMPORT_BODY = {
    "requestBody": {
        "required": True,
        "content": {NDJSON: {"schema": {"type": "string", "description": "a cuemem-export file"}}},
    }
}


@router.post("/v1/import", tags=["transfer"], dependencies=[limited(IMPORT)], openapi_extra=IMPORT_BODY)
async def import_(tenant: Tenant, container: AppContainer, request: Request) -> dict[str, Any]:
    """Import an export of the key's tenant (the body: the file's lines). Idempotent; 422 naming
    the line and the field when the file is refused, with nothing imported.

    The body is spooled to a temporary file as it arrives (a chunk in memory at a time), then read
    back, checked and written a batch at a time in a worker thread (``transfer.import_file``): the
    event loop never parses it, and no database connection waits on a slow upload."""
    async with anyio.wrap_file(await run_in_threadpool(tempfile.TemporaryFile)) as spool:
        async for chunk in request.stream():
            await spool.write(chunk)
        await spool.seek(0)
        return await run_in_threadpool(transfer.import_file, container, spool.wrapped, tenant)
