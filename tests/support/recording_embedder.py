"""An embedder that keeps every text it is handed, for the tests of what wraps an embedder (the
window cut, the query cache): they check what reached the model, not what it answered."""

from __future__ import annotations

from collections.abc import Sequence


class RecordingEmbedder:
    """Records passages and queries in order; a text's vector is its length then 1 for a passage,
    0 for a query, so a test can tell which answer it got back."""

    model_name = "recording-v1"
    dim = 2

    def __init__(self) -> None:
        self.passages: list[str] = []
        self.queries: list[str] = []

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.passages.extend(texts)
        return [[float(len(t)), 1.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return [float(len(text)), 0.0]
