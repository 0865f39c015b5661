"""Point ids are stored for ever: a memory's point id is its memory id, derived by uuid5 from
(tenant, user, event id, position) under ``shared.models.MEMORY_NAMESPACE``, and a turn's from
(tenant, user, event id) under the same namespace. Changing the namespace
or the derivation would orphan every stored point (and make every redelivered event a new memory)
with no other test failing, so the expected ids here are literals, not recomputed. So is a
memory's content hash: an exact repeat is found by it among the stored memories."""

from __future__ import annotations

import uuid

from shared.events import content_hash
from shared.indexing.points import memory_point
from shared.models import MEMORY_NAMESPACE, memory_hash, memory_id, turn_point_id
from tests.support.pipeline import Harness, active, turn


def test_memory_ids_are_pinned_literals() -> None:
    assert memory_id("default", "u1", "e-u1-s1-1", 0) == "977f1bbe-0342-5df4-afa3-f795034acf56"
    assert memory_id("acme", "alice", "ev-42", 3) == "f405f16e-cdb4-5c45-b803-488501200f14"


def test_a_stored_memory_and_its_index_point_carry_the_pinned_id() -> None:
    h = Harness()
    h.drain(turn(1, "我不吃香菜"))
    (memory,) = active(h)
    assert memory.id == "977f1bbe-0342-5df4-afa3-f795034acf56"  # event e-u1-s1-1, its first draft
    assert memory_point(memory).id == memory.id
    assert h.index.ids("default", "u1") == {"977f1bbe-0342-5df4-afa3-f795034acf56"}


def test_the_point_id_namespace_is_pinned() -> None:
    assert uuid.UUID("6f1c1c0e-5d0f-4a8e-9a4e-2b7c2f9d1c01") == MEMORY_NAMESPACE


def test_turn_point_ids_are_pinned_literals_and_name_the_tenant() -> None:
    # (tenant, user, event id): event ids are unique per tenant only (migration 0017), so two
    # tenants' turns with one event id are two points.
    assert turn_point_id("default", "u1", "e-u1-s1-1") == "660b1675-8538-5f16-a30c-4360e2b86bd2"
    assert turn_point_id("acme", "alice", "order-1001") == "d37e9b03-5655-5d1c-bd44-4c67814d0cfb"
    assert turn_point_id("beta", "alice", "order-1001") == "c2079738-8d71-5681-b9d1-e1a90f3a9304"


def test_memory_hashes_are_pinned_literals_with_space_and_case_folded() -> None:
    pinned = "ae4043e97aefdbdd45ff122509845933431a2c93b2074d711d4324bcd5e727b6"
    assert memory_hash("fact", "I  keep\nBees ") == pinned
    assert memory_hash("fact", "i keep bees") == pinned
    assert memory_hash("preference", "i keep bees") != pinned  # the type is part of the key
    assert memory_hash("fact", "i keep bees") == content_hash("fact", "i keep bees")  # a turn's form
    assert memory_hash("preference", "我不吃香菜") == (
        "6aad20f8e3ea0675ca5674680c0ff49f6142e22eea23943272546ecd40cbd442"
    )
