"""Which memories cite these turns (by_sources / by_source), against a Python oracle.

Recall asks it for every page of conversation-log hits; since migration 0012 it is one GIN overlap
over the cited event ids (``memory_source_event_ids(sources)``), so the answer must stay exactly
"the user's memories in those statuses with any of those event ids among their sources".
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

from shared.models import MemoryStatus
from tests.support.rows import memory_row
from workers.bootstrap import build_container

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)
USERS = [("default", "u1"), ("default", "u2"), ("other", "u1")]


def test_by_sources_finds_exactly_the_memories_citing_any_of_the_turns(clean_db, it_settings):
    c = build_container(it_settings)
    rng = random.Random(12)
    events = [f"e-{n}" for n in range(40)] + ["e-'quote", 'e-"dq', "e-{brace}", "e-,comma"]
    memories = []
    for i in range(150):
        tenant, user = USERS[i % len(USERS)]
        status = rng.choice([MemoryStatus.ACTIVE, MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED])
        memories.append(
            memory_row(i, tenant, user, NOW, cited=rng.sample(events, rng.randint(0, 3)), status=status)
        )
    with c.uow() as uow:
        for m in memories:
            uow.memories.add(m)
        uow.commit()
    checks = 0
    for _ in range(30):
        asked = rng.sample(events, rng.randint(1, 12))
        for tenant, user in USERS:
            for statuses in ([MemoryStatus.ACTIVE], [MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED]):
                expected = {
                    m.id
                    for m in memories
                    if (m.tenant_id, m.user_id) == (tenant, user)
                    and m.status in statuses
                    and {s["event_id"] for s in m.sources} & set(asked)
                }
                with c.uow() as uow:
                    found = uow.memories.by_sources(tenant, user, asked, statuses)
                    one = uow.memories.by_source(tenant, user, asked[0], statuses)
                assert {m.id for m in found} == expected
                assert len(found) == len(expected)  # each memory once, however many of its turns
                assert {m.id for m in one} == {
                    m.id
                    for m in memories
                    if m.id in expected and asked[0] in {s["event_id"] for s in m.sources}
                }
                checks += bool(expected)
    assert checks > 50  # most questions had an answer: the oracle is not comparing empty sets
    with c.uow() as uow:
        assert uow.memories.by_sources("default", "u1", [], [MemoryStatus.ACTIVE]) == []
    c.close()
