"""The fault tier's status oracle rests on one premise: a user's turns, taken in any order between
two curation steps, end in the same statuses (``tests/support/fault_workload.py``). Checked here
on the reference itself, with shuffled orders, and that the workload is not vacuous.
"""

from __future__ import annotations

import random
from collections import Counter

from tests.support.fault_workload import fault_turns, reference_statuses

TENANT = "default"
DIM = 384  # Settings.embedding_dim: the hashing embedder the fault tier runs


def test_the_reference_ends_in_the_same_statuses_whatever_order_the_turns_took():
    turns, forget = fault_turns(users=3, per_user=50)
    seqs = {t["event_id"]: i + 1 for ts in turns.values() for i, t in enumerate(ts)}
    cut = {user: 20 for user in turns}  # the archive after each user's 20th turn
    expected = reference_statuses(TENANT, turns, seqs, forget, cut, DIM)
    statuses = Counter([status for (_, _, _, status), n in expected.items() for _ in range(n)])
    assert {"active", "superseded", "archived", "forgotten"} <= set(statuses), statuses

    for seed in range(3):
        rng = random.Random(seed)
        shuffled = {}
        for user, ts in turns.items():
            before, after = ts[:20], ts[20:]
            rng.shuffle(before)
            rng.shuffle(after)
            shuffled[user] = before + after
        got = reference_statuses(TENANT, shuffled, seqs, forget, cut, DIM)
        assert got == expected, (seed, (expected - got), (got - expected))
