"""The in-process embedder lets a waiting query in between two batches of passages (issue 29, one
tenant's cost): an import re-embedding one tenant's memories held the engine for its whole call,
and another tenant's recall waited 117 s to embed its query. With an injected engine whose first
batch of passages blocks until the test lets it go, a query sent meanwhile is answered before the
second batch starts. Waits are on events, with generous hang guards only."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from workers.endpoints.embedders.e5 import E5_DIM, E5Embedder

HANG_GUARD_S = 60.0


class _Rows:
    def __init__(self, rows: list[list[float]]) -> None:
        self.rows = rows

    def tolist(self) -> list[list[float]]:
        return self.rows


class BlockingEngine:
    """Records each call; the first passage batch waits until ``release`` is set."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.first_batch_started = threading.Event()
        self.release = threading.Event()

    def passage(self, texts: Sequence[str]) -> _Rows:
        self.calls.append(f"passages {texts[0]}")
        if len(self.calls) == 1:
            self.first_batch_started.set()
            assert self.release.wait(HANG_GUARD_S)
        return _Rows([[0.1] * E5_DIM for _ in texts])

    def query(self, texts: Sequence[str]) -> _Rows:
        self.calls.append(f"query {texts[0]}")
        return _Rows([[0.2] * E5_DIM for _ in texts])


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    pause = threading.Event()  # never set: a sleep between looks
    for _ in range(int(HANG_GUARD_S * 100)):
        if condition():
            return
        pause.wait(0.01)
    raise AssertionError(f"hang guard: {what}")


def test_a_query_goes_between_two_batches_of_passages() -> None:
    engine = BlockingEngine()
    embedder = E5Embedder(batch_size=2, model=engine)
    passages = threading.Thread(target=embedder.embed_passages, args=(["a", "b", "c", "d", "e", "f"],))
    passages.start()
    assert engine.first_batch_started.wait(HANG_GUARD_S)
    answered: list[list[float]] = []
    query = threading.Thread(target=lambda: answered.append(embedder.embed_query("tea?")))
    query.start()
    _wait_until(lambda: embedder._turns.queries_waiting == 1, "the query waits for its turn")
    engine.release.set()
    query.join(HANG_GUARD_S)
    passages.join(HANG_GUARD_S)
    assert not query.is_alive() and not passages.is_alive()
    assert engine.calls == ["passages a", "query tea?", "passages c", "passages e"], engine.calls
    assert len(answered) == 1 and len(answered[0]) == E5_DIM


def test_passages_alone_are_embedded_in_order_and_whole() -> None:
    engine = BlockingEngine()
    engine.release.set()
    vectors = E5Embedder(batch_size=2, model=engine).embed_passages(["a", "b", "c"])
    assert engine.calls == ["passages a", "passages c"] and len(vectors) == 3
