"""How close two embeddings are: ingest judges near-duplicates and conflicts by it
(``shared.ingest.conflicts``, ``persist``, ``resolve``), recall drops near-duplicate answers and
scores context windows by it (``shared.recall.fusion``, ``windows``). Here, below both, so that
neither imports the other for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def cosine(a: Sequence[float] | None, b: Sequence[float] | None) -> float:
    """The cosine of two vectors of one model; 0.0 when one is missing, empty, of another length
    or all zeros."""
    if not a or not b or len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
