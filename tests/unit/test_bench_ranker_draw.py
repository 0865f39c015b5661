"""The training subset of `cuemem bench ranker-features --samples N --seed S`."""

from __future__ import annotations

import random

import pytest

from bench.ranker_features import seeded_draw

IDS = [f"s{i:03d}" for i in range(318)]  # as many as LongMemEval-S's training split holds


def test_a_larger_draw_starts_with_the_smaller_one() -> None:
    # 48 and 96 of 318 are on either side of random.sample's switch of algorithm.
    for small, large in ((3, 20), (48, 96), (96, 318)):
        assert seeded_draw(IDS, large, 30)[:small] == seeded_draw(IDS, small, 30)


def test_the_first_48_are_those_random_sample_drew_for_the_shipped_model() -> None:
    assert set(seeded_draw(IDS, 48, 30)) == set(random.Random(30).sample(IDS, 48))


def test_a_draw_is_distinct_ids_and_depends_on_the_seed() -> None:
    drawn = seeded_draw(IDS, 96, 30)
    assert len(set(drawn)) == 96 and set(drawn) <= set(IDS)
    assert seeded_draw(IDS, 96, 31) != drawn


def test_more_than_the_file_holds_is_refused() -> None:
    with pytest.raises(ValueError, match="the file has 318, asked for 319"):
        seeded_draw(IDS, 319, 30)
