"""Sparse vectors for BM25-style keyword search inside the vector index.

The index (Qdrant's sparse vector ``bm25`` with the IDF modifier) scores a point by
``sum(query value x IDF x document value)`` over the terms the two share. This module supplies the
other two factors, so that the IDF can be computed by the index over the right corpus:

- a document's value for a term is BM25's term-frequency part,
  ``tf x (k1 + 1) / (tf + k1 x (1 - b + b x length / AVERAGE_LENGTH))``: repeats saturate, and long
  texts weigh each term less. The average length is fixed rather than measured, so a document's
  vector never changes when others are added (a memory of AVERAGE_LENGTH terms mentioning a term once
  gets exactly 1.0);
- a query's value is 1.0 per distinct term.

Terms are ``shared.language.text.tokens`` (jieba search-mode words for Chinese, lower-cased words and codes
otherwise) without stopwords, each mapped to a sparse index by a stable 32-bit hash (blake2b), so
the same word gets the same index in every process, version and run. Two words that collide share
an index and count as one term; with 2^32 slots and a user's vocabulary in the thousands, this is
rare and only ever adds a spurious match.

Pure and deterministic: no I/O beyond jieba loading its dictionary once per process.
"""

from __future__ import annotations

import hashlib
from collections import Counter

from shared.language.text import STOPWORDS, tokens
from shared.ports import SparseTerms

__all__ = ["AVERAGE_LENGTH", "B", "K1", "SparseTerms", "sparse_document", "sparse_query", "term_index"]

K1 = 1.2
B = 0.75
AVERAGE_LENGTH = 12.0  # terms in a typical memory (stopwords excluded)

EMPTY = SparseTerms((), ())


def term_index(term: str) -> int:
    """The sparse index of a term: the first 4 bytes of its blake2b digest, big-endian (0 .. 2^32-1)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "big")


def _term_counts(text: str) -> Counter[int]:
    # Stopwords ("的", "我", "the") would match nearly every memory: even with a low IDF they would
    # put unrelated memories into the result list, which rank fusion then counts as evidence.
    return Counter(term_index(tok) for tok in tokens(text) if tok not in STOPWORDS)


def sparse_document(text: str) -> SparseTerms:
    """BM25 term weights of a stored text (the IDF is left to the index)."""
    counts = _term_counts(text)
    if not counts:
        return EMPTY
    length = sum(counts.values())
    norm = K1 * (1.0 - B + B * length / AVERAGE_LENGTH)
    indices = tuple(sorted(counts))
    return SparseTerms(indices, tuple(counts[i] * (K1 + 1.0) / (counts[i] + norm) for i in indices))


def sparse_query(text: str) -> SparseTerms:
    """1.0 per distinct term of a query: a term repeated in the question counts once."""
    indices = tuple(sorted(_term_counts(text)))
    return SparseTerms(indices, (1.0,) * len(indices))
