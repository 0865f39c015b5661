"""The publish ledger in Redis (shared.ports.PublishLedger); its keys, entries and the claim
script are ``infra/redis_layout.py``'s.

The producer adds each turn before sending it (``producers.publisher``); ``memory.record``
settles it after its unit of work committed; ``memory.resume_stalled`` re-sends turns left
unsettled for too long. Why it exists: kombu's Redis transport pops a message (BRPOP) and only
then writes it to its unacked hash; a worker SIGKILLed between the two loses the message, late
acks or not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import redis

from infra import redis_layout
from shared.queues import PIPELINE_QUEUES, Queue
from workers.broker import queue_depths

# A count of re-drives outlives any sane stall (the sweep runs every minute): a week.
REDRIVES_KEPT_S = 7 * 24 * 3600


class RedisPublishLedger:
    def __init__(self, client: redis.Redis, broker: redis.Redis | None = None) -> None:
        self._client = client
        self._broker = broker  # None: the broker is not Redis; its queue depth is not known
        self._claim = client.register_script(redis_layout.CLAIM_OVERDUE_SCRIPT)

    def settle(self, members: Sequence[str]) -> None:
        redis_layout.drop_from_ledger(self._client, members)

    def overdue(self, published_before_ms: int, limit: int) -> list[dict[str, Any]]:
        raw = self._claim(
            keys=list(redis_layout.CLAIM_OVERDUE_KEYS),
            args=[published_before_ms, limit, int(time.time() * 1000)],
        )
        return [json.loads(m) for m in raw]

    def backlog(self) -> int:
        """Messages waiting in the pipeline's queues and the index queue (searches and unacked
        messages left out): the stalled sweep holds back while the pipeline is busy."""
        if self._broker is None:
            return 0
        depths = queue_depths(self._broker)
        return sum(depths[q.value] for q in (*PIPELINE_QUEUES, Queue.INDEX))

    def count_redrives(self, stalled: Sequence[tuple[str, str]]) -> list[int]:
        if not stalled:
            return []
        pipe = self._client.pipeline(transaction=False)
        for event_id, stage in stalled:
            key = redis_layout.redrives_key(event_id, stage)
            pipe.incr(key)
            pipe.expire(key, REDRIVES_KEPT_S)
        return [int(n) for n in pipe.execute()[::2]]

    def forget_redrives(self, stalled: Sequence[tuple[str, str]]) -> None:
        if stalled:
            self._client.delete(*(redis_layout.redrives_key(e, s) for e, s in stalled))

    def pending(self) -> int:
        """How many turns are published and not yet recorded (for reports and tests)."""
        return int(self._client.zcard(redis_layout.UNRECORDED))
