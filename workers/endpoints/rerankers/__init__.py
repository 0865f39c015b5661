"""Reranker adapters behind the :class:`shared.ports.Reranker` port (optional, off by default).

``build_reranker`` returns None unless ``CUEMEM_RERANK_URL`` is set; then an
:class:`workers.endpoints.rerankers.http.HttpReranker` for a TEI / Jina / Cohere-style rerank endpoint.
Nothing connects here: the HTTP client is created on first use, in the process that uses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.ports import Reranker
    from shared.settings import Settings

__all__ = ["RerankError", "build_reranker"]


class RerankError(RuntimeError):
    """The rerank endpoint failed or answered something unusable.

    ``transient`` is true when retrying later may help (rate limit, 5xx, timeout, connection
    failure, already retried to the limit); false for a refusal (bad key, bad request) or an
    unusable answer. Recall never fails on it: ``shared.recall.rerank`` keeps the previous order.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def build_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None when ``CUEMEM_RERANK_URL`` is unset (the default)."""
    if not settings.rerank_url:
        return None
    from workers.endpoints.rerankers.http import HttpReranker

    return HttpReranker(
        url=settings.rerank_url,
        api_key=settings.rerank_api_key,
        model=settings.rerank_model,
        timeout_s=settings.rerank_timeout_s,
        max_attempts=settings.rerank_max_attempts,
    )
