"""An embedder whose calls are spans (GenAI semantic conventions: ``embeddings {model}``), used
when tracing is on (``infra/tracing.py``); the texts themselves are never recorded."""

from __future__ import annotations

from collections.abc import Sequence

from infra import tracing
from shared.ports import Embedder
from workers.endpoints.embedders.wrapping import Wrapping


class TracedEmbedder(Wrapping):
    def __init__(self, inner: Embedder, provider: str) -> None:
        super().__init__(inner)
        self._provider = provider

    def _attributes(self, texts: int, purpose: str) -> dict[str, object]:
        return {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": self.inner.model_name,
            "gen_ai.embeddings.dimension.count": self.inner.dim,
            "cuemem.embedding.texts": texts,
            "cuemem.embedding.purpose": purpose,
        }

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        with tracing.span(
            f"embeddings {self.inner.model_name}", self._attributes(len(texts), "passages"), tracing.CLIENT
        ):
            return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> list[float]:
        with tracing.span(
            f"embeddings {self.inner.model_name}", self._attributes(1, "query"), tracing.CLIENT
        ):
            return self.inner.embed_query(text)
