"""A deterministic feature-hashing embedder."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

# ASCII words and digits; everything else that is not CJK is ignored.
_WORD = re.compile(r"[a-z0-9]+")
# Han ideographs (incl. extension A and compatibility forms), kana and Hangul syllables: scripts
# written without spaces, so character bigrams stand in for words.
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def tokens(text: str) -> list[str]:
    """The hashed features of ``text``: lower-cased ASCII words plus CJK character bigrams.

    A CJK run of one character yields that character, so a lone ideograph still counts.
    Prefixes keep the two kinds of feature apart.
    """
    lowered = text.lower()
    feats = [f"w:{w}" for w in _WORD.findall(lowered)]
    for run in _CJK_RUN.findall(lowered):
        if len(run) == 1:
            feats.append(f"c:{run}")
        else:
            feats.extend(f"c:{run[i : i + 2]}" for i in range(len(run) - 1))
    return feats


class HashingEmbedder:
    """Feature hashing into ``dim`` signed buckets, L2-normalised.

    For tests and smoke runs only, not for quality: it knows nothing of meaning, only of shared
    words (and shared CJK character pairs), so paraphrases with different words look unrelated.
    It is deterministic across processes and machines (blake2b, not Python's salted ``hash``),
    needs no model and is fast. Queries and passages are embedded the same way. Text with no
    features maps to a fixed unit vector (the first axis).
    """

    def __init__(self, dim: int = 384) -> None:
        if dim < 2:
            raise ValueError(f"HashingEmbedder needs dim >= 2, got {dim}")
        self._dim = dim

    @property
    def model_name(self) -> str:
        return f"hash-v1-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)

    def _embed(self, text: str) -> list[float]:
        vec = [0.0] * self._dim
        for feat in tokens(text):
            digest = int.from_bytes(hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest(), "big")
            # Low bits pick the bucket, the top bit the sign, so collisions cancel on average
            # instead of only ever adding up.
            sign = -1.0 if digest >> 63 else 1.0
            vec[digest % self._dim] += sign
        norm = math.sqrt(sum(v * v for v in vec))
        if norm == 0.0:
            unit = [0.0] * self._dim
            unit[0] = 1.0
            return unit
        return [v / norm for v in vec]
