"""An embedder whose calls are spans (GenAI semantic conventions: ``embeddings {model}``), used
when tracing is on (``producers/tracing.py``); the texts themselves are never recorded."""

from __future__ import annotations

from collections.abc import Sequence

from producers import tracing
from shared.ports import Embedder


class TracedEmbedder:
    def __init__(self, inner: Embedder, provider: str) -> None:
        self._inner = inner
        self._provider = provider

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    @property
    def dim(self) -> int:
        return self._inner.dim

    def _attributes(self, texts: int, purpose: str) -> dict[str, object]:
        return {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": self._inner.model_name,
            "gen_ai.embeddings.dimension.count": self._inner.dim,
            "cuemem.embedding.texts": texts,
            "cuemem.embedding.purpose": purpose,
        }

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        with tracing.span(
            f"embeddings {self._inner.model_name}", self._attributes(len(texts), "passages"), tracing.CLIENT
        ):
            return self._inner.embed_passages(texts)

    def embed_query(self, text: str) -> list[float]:
        with tracing.span(
            f"embeddings {self._inner.model_name}", self._attributes(1, "query"), tracing.CLIENT
        ):
            return self._inner.embed_query(text)
