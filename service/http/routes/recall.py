"""``/v1/recall``: recall for one user of the key's tenant, as items or as the prompt block.

The work (embedding the query, the searches) runs in the thread pool, in one of the tenant's
embedding slots (``service/http/embedding_slots.py``): a tenant's many long queries wait for each
other, not in front of another tenant's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from service.http.deps import AppContainer, Metrics, Tenant
from service.http.embedding_slots import Slots
from service.http.metrics import ApiMetrics
from service.http.rate_limits import RECALL, limited
from service.http.schemas import RecallIn, RecallOut
from service.operations.recall import answer_recall
from shared.recall.request import parse_recall
from workers.bootstrap import Container

router = APIRouter()


def _recall(container: Container, metrics: ApiMetrics, body: RecallIn, tenant: str) -> dict[str, Any]:
    # RecallIn declares the body's shape (types, unknown fields: 422 before this); every rule on
    # the values is parse_recall's, as for MCP, the CLI and the library.
    asked = parse_recall(
        user_id=body.user_id,
        query=body.query,
        k=body.k,
        now=body.now,
        session_id=body.session_id,
        budget_tokens=body.budget_tokens,
        include_archived=body.include_archived,
        include_history=body.include_history,
        reinforce=body.reinforce,
        tenant_id=tenant,
        max_id_chars=container.settings.max_id_chars,
    )
    out = answer_recall(container, asked)
    metrics.observe_recall(out)
    return out


@router.post("/v1/recall", response_model=RecallOut, tags=["recall"], dependencies=[limited(RECALL)])
async def recall(
    body: RecallIn, tenant: Tenant, container: AppContainer, metrics: Metrics, slots: Slots
) -> dict[str, Any]:
    """Recall for one user: ``{stage, items, trace, prompt, user_offset_s}``, as `cuemem recall
    --json`; the prompt block's dates are in the user's zone, ``user_offset_s``. Read-only: with
    ``reinforce: true`` the memories returned count as used (``trace.recall_id``)."""
    return await slots.run(tenant, _recall, container, metrics, body, tenant)


@router.post(
    "/v1/recall/prompt", response_class=PlainTextResponse, tags=["recall"], dependencies=[limited(RECALL)]
)
async def recall_prompt(
    body: RecallIn, tenant: Tenant, container: AppContainer, metrics: Metrics, slots: Slots
) -> PlainTextResponse:
    """Only the prompt block, as text, ready to put in front of the model. Read-only unless
    ``reinforce: true``, as ``/v1/recall``."""
    out = await slots.run(tenant, _recall, container, metrics, body, tenant)
    return PlainTextResponse(out["prompt"])
