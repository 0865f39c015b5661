"""A user's data in Redis, counted and deleted (``shared.erasure.UserData``).

Per user (``infra/redis_layout.py``): the seq counter and the working memory of each
conversation, and the list of the user's sessions, all under the user's hash tag; and in the
publish ledger, the user's turns still unrecorded, whose messages carry tenant and user. The user's
keys are found by the exact pattern of its tag (``redis_layout.user_pattern``: the encoded ids hold
no glob character and the tag's ``}`` ends the user id, so user ``u1`` never matches ``u10``), plus
the keys written before that encoding under the user's raw ``{tenant:user}`` tag
(``key_migration.legacy_pattern``): such a key may be shared with another user (the ambiguity the
encoding removed) and goes with either user's delete. Everyone else's is counted within the
caller's tenant only (``redis_layout.tenant_pattern`` and the ledger messages' tenant): a report
never shows another tenant's volume.
"""

from __future__ import annotations

import json

import redis

from infra import redis_layout
from workers.redis.key_migration import legacy_pattern

FAMILIES = {
    "seq_counters": redis_layout.SEQ,
    "working_memory": redis_layout.WORKING_MEMORY,
    "sessions": redis_layout.SESSIONS,
}


class RedisUserKeys:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def _scan(self, pattern: str) -> set[str]:
        found = self._redis.scan_iter(match=pattern, count=1000)
        return {k.decode() if isinstance(k, bytes) else str(k) for k in found}

    def _mine(self, family: str, tenant_id: str, user_id: str) -> set[str]:
        current = redis_layout.user_pattern(family, tenant_id, user_id)
        legacy = legacy_pattern(family, tenant_id, user_id)  # the same for most ids: scanned once
        return self._scan(current) | (self._scan(legacy) if legacy != current else set())

    def _ledger(self, tenant_id: str, user_id: str) -> tuple[list[str], int]:
        """The ledger members of the user's unrecorded turns, and how many are the tenant's other
        users'."""
        mine: list[str] = []
        others = 0
        for member, raw in self._redis.hscan_iter(redis_layout.UNRECORDED_MESSAGES, count=1000):
            try:
                message = json.loads(raw)
                owner = (message.get("tenant_id"), message.get("user_id"))
            except (ValueError, AttributeError):
                owner = (None, None)  # unreadable: not provably the user's, so left alone
            if owner == (tenant_id, user_id):
                mine.append(member.decode() if isinstance(member, bytes) else str(member))
            elif owner[0] == tenant_id:
                others += 1
        return mine, others

    def count(self, tenant_id: str, user_id: str) -> dict[str, tuple[int, int]]:
        counts: dict[str, tuple[int, int]] = {}
        for part, family in FAMILIES.items():
            mine = self._mine(family, tenant_id, user_id)
            # An old-form key whose raw tag holds two or more `:` (`{a:b:c}`) matches tenant `a`'s
            # pattern but may be tenant `a:b`'s: not provably this tenant's, so not counted.
            tenants = {
                k for k in self._scan(redis_layout.tenant_pattern(family, tenant_id)) if _one_colon_tag(k)
            }
            counts[part] = (len(mine), len(tenants - mine))
        ledger, others = self._ledger(tenant_id, user_id)
        counts["ledger"] = (len(ledger), others)
        return counts

    def erase(self, tenant_id: str, user_id: str) -> dict[str, int]:
        deleted: dict[str, int] = {}
        # The ledger first: the stalled sweep re-sends what it holds, which would record the
        # user's turns again.
        ledger, _ = self._ledger(tenant_id, user_id)
        redis_layout.drop_from_ledger(self._redis, ledger)
        deleted["ledger"] = len(ledger)
        for part, family in FAMILIES.items():
            mine = sorted(self._mine(family, tenant_id, user_id))
            # One key per DEL: a legacy key may sit in another cluster slot than the user's tag.
            deleted[part] = sum(int(self._redis.delete(k)) for k in mine)
        return deleted


def _one_colon_tag(key: str) -> bool:
    """Whether the key's hash tag is ``{tenant:user}`` with encoded ids (one ``:``)."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return start >= 0 and end > start and key[start + 1 : end].count(":") == 1
