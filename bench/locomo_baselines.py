"""The LoCoMo baselines over one conversation's raw turns: BM25, dense and their RRF hybrid."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

RRF_K = 60


def _top(scores: Sequence[float], k: int, *, positive_only: bool = False) -> list[int]:
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if positive_only:
        order = [i for i in order if scores[i] > 0]
    return order[:k]


def rrf(rankings: Iterable[Sequence[int]], k: int, rrf_k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion of full rankings; ties broken by turn order."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (rrf_k + rank + 1)
    return sorted(fused, key=lambda d: (-fused[d], d))[:k]


class Baselines:
    """BM25, dense and hybrid over one conversation's turns (one item = one turn)."""

    def __init__(self, texts: Sequence[str], embed_passages: Callable[[Sequence[str]], list[list[float]]]):
        import bm25s
        import numpy as np

        from shared.language.text import tokens

        self._tokens = tokens
        self.size = len(texts)
        self._bm25 = bm25s.BM25()
        self._bm25.index([tokens(t) for t in texts], show_progress=False)
        matrix = np.asarray(embed_passages(list(texts)), dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self._vectors = matrix / np.where(norms == 0, 1.0, norms)

    def bm25_scores(self, query: str) -> list[float]:
        query_tokens = self._tokens(query)
        if not query_tokens:
            return [0.0] * self.size
        return [float(s) for s in self._bm25.get_scores(query_tokens)]

    def dense_scores(self, query_vector: Sequence[float]) -> list[float]:
        import numpy as np

        q = np.asarray(query_vector, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        return [float(s) for s in self._vectors @ (q / (norm or 1.0))]

    def rank(self, query: str, query_vector: Sequence[float], k: int) -> dict[str, list[int]]:
        """Each baseline's top ``k`` turn indices. BM25 returns only turns sharing a token."""
        bm25_full = _top(self.bm25_scores(query), self.size, positive_only=True)
        dense_full = _top(self.dense_scores(query_vector), self.size)
        return {
            "bm25": bm25_full[:k],
            "dense": dense_full[:k],
            "hybrid": rrf([bm25_full, dense_full], k),
        }


def cached_passages(
    embed_passages: Callable[[Sequence[str]], list[list[float]]], directory: Path, model: str
) -> Callable[[Sequence[str]], list[list[float]]]:
    """``embed_passages`` whose answers are kept in ``directory`` (one file per list of texts and
    model, named by their hash): a re-run over stored data embeds the baselines' turns once."""
    import numpy as np

    def embed(texts: Sequence[str]) -> list[list[float]]:
        digest = hashlib.sha256("\x1f".join([model, *texts]).encode()).hexdigest()[:32]
        path = directory / f"{digest}.npy"
        if path.exists():
            return [list(map(float, row)) for row in np.load(path)]
        vectors = embed_passages(texts)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, np.asarray(vectors, dtype=np.float32))
        tmp.replace(path)
        return vectors

    return embed
