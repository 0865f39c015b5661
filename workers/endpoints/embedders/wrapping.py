"""The base of the embedders that stand in front of another (the query cache, the window cut, the
traced and the metered embedder): the model and its dimension are the inner embedder's, so an
index checks the one model whatever stands in front of it."""

from __future__ import annotations

from shared.ports import Embedder


class Wrapping:
    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dim(self) -> int:
        return self.inner.dim
