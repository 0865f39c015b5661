"""A user's data in Redis, counted and deleted (``shared.lifecycle.erasure.UserData``).

Per user (``shared/keys.py``): the seq counter and the working memory of each conversation, and
the list of the user's sessions, all under the user's ``{tenant:user}`` hash tag; and in the
publish ledger, the user's turns still unrecorded, whose messages carry tenant and user. Counting
everyone else's walks every key of those families (SCAN) and the whole ledger: a privacy request
is rare, and its report must be exact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import redis

from shared import keys

FAMILIES = {"seq_counters": "seq", "working_memory": "wm", "sessions": "sessions"}


class RedisUserKeys:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def _keys(self, family: str) -> Iterator[str]:
        for key in self._redis.scan_iter(match=f"{keys.PREFIX}:{family}:*", count=1000):
            yield key.decode() if isinstance(key, bytes) else str(key)

    @staticmethod
    def _mine(family: str, key: str, tenant_id: str, user_id: str) -> bool:
        if family == "sessions":
            return key == keys.user_sessions_key(tenant_id, user_id)
        # Every key of the family for this user begins so (the session id follows): compare the
        # whole prefix, never a pattern, so no other user's key can match.
        builder = keys.seq_key if family == "seq" else keys.working_memory_key
        return key.startswith(builder(tenant_id, user_id, ""))

    def _ledger(self, tenant_id: str, user_id: str) -> tuple[list[str], int]:
        """The ledger members of the user's unrecorded turns, and how many are anyone else's."""
        mine: list[str] = []
        others = 0
        for member, raw in self._redis.hscan_iter(keys.UNRECORDED_MESSAGES, count=1000):
            try:
                message = json.loads(raw)
                owner = (message.get("tenant_id"), message.get("user_id"))
            except (ValueError, AttributeError):
                owner = (None, None)  # unreadable: not provably the user's, so left alone
            if owner == (tenant_id, user_id):
                mine.append(member.decode() if isinstance(member, bytes) else str(member))
            else:
                others += 1
        return mine, others

    def count(self, tenant_id: str, user_id: str) -> dict[str, tuple[int, int]]:
        counts: dict[str, tuple[int, int]] = {}
        ambiguous = keys.tag_is_ambiguous(tenant_id, user_id)
        for part, family in FAMILIES.items():
            found = list(self._keys(family))
            mine = 0 if ambiguous else sum(self._mine(family, k, tenant_id, user_id) for k in found)
            counts[part] = (mine, len(found) - mine)
        ledger, others = self._ledger(tenant_id, user_id)
        counts["ledger"] = (len(ledger), others)
        return counts

    def erase(self, tenant_id: str, user_id: str) -> dict[str, int]:
        deleted: dict[str, int] = {}
        # The ledger first: the stalled sweep re-sends what it holds, which would record the
        # user's turns again.
        ledger, _ = self._ledger(tenant_id, user_id)
        if ledger:
            pipe = self._redis.pipeline(transaction=True)
            pipe.zrem(keys.UNRECORDED, *ledger)
            pipe.hdel(keys.UNRECORDED_MESSAGES, *ledger)
            pipe.execute()
        deleted["ledger"] = len(ledger)
        if keys.tag_is_ambiguous(tenant_id, user_id):  # another user's keys would go too
            return {**deleted, **dict.fromkeys(FAMILIES, 0)}
        for part, family in FAMILIES.items():
            mine = [k for k in self._keys(family) if self._mine(family, k, tenant_id, user_id)]
            deleted[part] = int(self._redis.delete(*mine)) if mine else 0
        return deleted
