"""The cost of a long text with E5, cut to the model's window and whole (one run each).

    python -m bench.embedding_window [--threads 2]

A 32,000-character turn (the longest accepted) and a 4,000-character query (the longest accepted)
of mixed English and Chinese words: their token counts, the time to embed them through
``build_embedder`` (cut to ``CUEMEM_EMBEDDING_MAX_TOKENS``) and through the bare engine (whole),
and the time the cut's own search takes.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from bench.common import mixed_text
from shared.settings import Settings
from workers.endpoints.embedders import build_embedder
from workers.endpoints.embedders.e5 import E5_MAX_TOKENS, E5Embedder
from workers.endpoints.embedders.window import head_within


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    threads = parser.parse_args().threads
    turn, query = mixed_text(32_000, 7), mixed_text(4_000, 8)
    whole = E5Embedder(threads=threads)
    whole.embed_query("warm up")
    cut = build_embedder(Settings(embedder="e5", embedding_threads=threads, query_embedding_cache=0))
    cut.embed_query("warm up")  # its own engine, loaded on first use: not part of the measure
    print(f"tokens: turn {whole.token_count(turn)}, query {whole.token_count(query, True)}")
    print(f"cut   query  4,000 chars: {timed(lambda: cut.embed_query(query)):.2f} s")
    print(f"cut   turn  32,000 chars: {timed(lambda: cut.embed_passages([turn])):.2f} s")
    print(f"whole query  4,000 chars: {timed(lambda: whole.embed_query(query)):.2f} s")
    print(f"whole turn  32,000 chars: {timed(lambda: whole.embed_passages([turn])):.2f} s")
    head: list[str] = []
    seconds = timed(lambda: head.append(head_within(turn, E5_MAX_TOKENS, whole.token_count)))
    kept = head[0]
    print(f"the cut's search: {seconds:.3f} s, {len(kept)} characters, {whole.token_count(kept)} tokens")


if __name__ == "__main__":
    main()
