"""Sparse keyword terms: stable indices, BM25 term weights, Chinese and English."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared.language.sparse import AVERAGE_LENGTH, K1, B, sparse_document, sparse_query, term_index
from shared.ports import SparseTerms

REPO_ROOT = Path(__file__).resolve().parents[2]


def weights(terms: SparseTerms) -> dict[int, float]:
    return dict(zip(terms.indices, terms.values, strict=True))


def test_term_index_is_a_pinned_32_bit_blake2b_hash() -> None:
    # Pinned values: changing them silently would orphan every stored sparse vector.
    assert term_index("coffee") == 3077085219
    assert term_index("咖啡") == 26959296
    assert term_index("8443") == 3994019992
    assert all(0 <= term_index(word) < 2**32 for word in ["", "a", "ORD-2023-1105", "香菜" * 50])


def test_indices_are_stable_across_processes() -> None:
    # Python's hash() is salted per process; blake2b is not. PYTHONHASHSEED differs on purpose.
    script = (
        "from shared.language.sparse import sparse_document\n"
        "print(list(sparse_document('我喜欢喝咖啡 coffee').indices))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO_ROOT)},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    assert outputs.pop().strip() == str(list(sparse_document("我喜欢喝咖啡 coffee").indices))


def test_english_terms_are_lower_cased_words_without_stopwords() -> None:
    terms = sparse_query("Where is the Deploy PORT?")

    assert set(terms.indices) == {term_index("deploy"), term_index("port")}
    assert terms.values == (1.0, 1.0)


def test_chinese_terms_are_jieba_words_without_stopwords() -> None:
    doc = weights(sparse_document("我喜欢喝咖啡"))

    assert term_index("咖啡") in doc
    assert term_index("喜欢") in doc
    assert term_index("我") not in doc  # stopword
    # Search-mode segmentation: the short word inside a longer one is a term too, both sides.
    assert term_index("咖啡") in weights(sparse_query("拿铁咖啡"))


def test_codes_and_numbers_are_single_terms() -> None:
    terms = sparse_query("订单 ORD-2023-1105 端口8443")

    assert term_index("ord-2023-1105") in terms.indices
    assert term_index("8443") in terms.indices
    assert term_index("端口") in terms.indices


def test_indices_sorted_and_unique_values_aligned() -> None:
    for terms in (
        sparse_document("coffee tea coffee 咖啡 茶 咖啡 milk"),
        sparse_query("coffee tea coffee 咖啡 茶 咖啡 milk"),
    ):
        assert list(terms.indices) == sorted(set(terms.indices))
        assert len(terms.indices) == len(terms.values)
        assert all(isinstance(i, int) for i in terms.indices)


def test_query_weighs_each_distinct_term_once() -> None:
    assert sparse_query("coffee coffee COFFEE") == SparseTerms((term_index("coffee"),), (1.0,))


# BM25's parameters as documented in docs/ARCHITECTURE.md (recall, "a BM25 keyword search
# inside the index"): k1 = 1.2, b = 0.75, an average document of 12 terms. Literals, not the
# module's constants, so a wrong parameter fails here.
DOCUMENTED_K1, DOCUMENTED_B, DOCUMENTED_AVERAGE_LENGTH = 1.2, 0.75, 12.0


def test_bm25_parameters_are_the_documented_ones() -> None:
    assert (K1, B, AVERAGE_LENGTH) == (DOCUMENTED_K1, DOCUMENTED_B, DOCUMENTED_AVERAGE_LENGTH)


def test_document_weight_is_bm25_term_frequency() -> None:
    def expected(tf: int, length: int) -> float:
        k1, b = DOCUMENTED_K1, DOCUMENTED_B
        return tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / DOCUMENTED_AVERAGE_LENGTH))

    doc = weights(sparse_document("coffee coffee tea"))

    assert doc[term_index("coffee")] == pytest.approx(expected(2, 3))
    assert doc[term_index("tea")] == pytest.approx(expected(1, 3))


def test_term_frequency_saturates() -> None:
    single = [
        weights(sparse_document(" ".join(["coffee"] * n)))[term_index("coffee")] for n in (1, 2, 4, 16, 64)
    ]

    assert single == sorted(single)  # more is never less ...
    assert single[1] - single[0] > single[2] - single[1] > 0  # ... but each repeat adds less
    # The same term repeated in a text of fixed length: bounded by k1 + 1.
    padded = [
        weights(sparse_document(" ".join(["coffee"] * n + [f"w{k}" for k in range(32 - n)])))[
            term_index("coffee")
        ]
        for n in (1, 2, 4, 8, 16)
    ]
    assert padded == sorted(padded)
    assert max(padded) < DOCUMENTED_K1 + 1


def test_longer_documents_weigh_a_term_less() -> None:
    short = weights(sparse_document("coffee"))[term_index("coffee")]
    typical = weights(sparse_document("coffee " + " ".join(f"w{k}" for k in range(11))))[term_index("coffee")]
    long = weights(sparse_document("coffee " + " ".join(f"w{k}" for k in range(40))))[term_index("coffee")]

    assert short > typical > long
    assert typical == pytest.approx(1.0)  # one mention in a text of average length


def test_empty_and_stopword_only_texts_have_no_terms() -> None:
    for text in ("", "   ", "the of and", "的 了 吗", "?!，。"):
        assert sparse_document(text) == SparseTerms((), ())
        assert sparse_query(text) == SparseTerms((), ())


def test_deterministic() -> None:
    text = "用户不喜欢吃香菜，点餐时不要放 and no cilantro please"
    assert sparse_document(text) == sparse_document(text)
    assert sparse_query(text) == sparse_query(text)
