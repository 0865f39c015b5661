"""Vectors kept as float32 bytes (``events.alone_vector``, migration 0020): packed, unpacked, and
scored against a query in one numpy product.

Recall reads one per candidate turn; a ``REAL[]`` of 384 numbers costs about 0.2 ms per row to
parse, the bytes 0.015 ms (see the migration). Little-endian, whatever the machine's order, so
that a database moved between machines reads the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

_DTYPE = np.dtype("<f4")


def pack_vector(vector: Sequence[float]) -> bytes:
    return np.asarray(vector, dtype=_DTYPE).tobytes()


def unpack_vector(data: bytes) -> list[float]:
    return [float(x) for x in np.frombuffer(data, dtype=_DTYPE)]


def cosines(query: Sequence[float], packed: Mapping[str, bytes]) -> dict[str, float]:
    """The cosine of ``query`` to each packed vector, by key; a vector of another length than the
    query's, or all zeros, scores 0.0 (as ``shared.vectors.cosine``)."""
    q = np.asarray(query, dtype=np.float64)
    q_norm = float(np.linalg.norm(q))
    out: dict[str, float] = {}
    for key, data in packed.items():
        v = np.frombuffer(data, dtype=_DTYPE).astype(np.float64)
        norm = float(np.linalg.norm(v)) * q_norm
        out[key] = float(v @ q) / norm if v.shape == q.shape and norm else 0.0
    return out
