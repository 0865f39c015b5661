"""The publish ledger in Redis (shared.ports.PublishLedger).

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

from shared import keys
from shared.queues import PIPELINE_QUEUES, Queue
from workers.broker import queue_depths

# A count of re-drives outlives any sane stall (the sweep runs every minute): a week.
REDRIVES_KEPT_S = 7 * 24 * 3600

# Claim the overdue entries atomically, so two sweeps (or a sweep and a settle) never both
# re-send one turn: read the overdue ids, move their time to now, return their messages.
_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(ids) do
  local msg = redis.call('HGET', KEYS[2], id)
  if msg then
    redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), id)
    table.insert(out, msg)
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
"""


class RedisPublishLedger:
    def __init__(self, client: redis.Redis, broker: redis.Redis | None = None) -> None:
        self._client = client
        self._broker = broker  # None: the broker is not Redis; its queue depth is not known
        self._claim = client.register_script(_CLAIM)

    def settle(self, members: Sequence[str]) -> None:
        if not members:
            return
        pipe = self._client.pipeline(transaction=True)
        pipe.zrem(keys.UNRECORDED, *members)
        pipe.hdel(keys.UNRECORDED_MESSAGES, *members)
        pipe.execute()

    def overdue(self, published_before_ms: int, limit: int) -> list[dict[str, Any]]:
        raw = self._claim(
            keys=[keys.UNRECORDED, keys.UNRECORDED_MESSAGES],
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
            key = keys.redrives_key(event_id, stage)
            pipe.incr(key)
            pipe.expire(key, REDRIVES_KEPT_S)
        return [int(n) for n in pipe.execute()[::2]]

    def forget_redrives(self, stalled: Sequence[tuple[str, str]]) -> None:
        if stalled:
            self._client.delete(*(keys.redrives_key(e, s) for e, s in stalled))

    def pending(self) -> int:
        """How many turns are published and not yet recorded (for reports and tests)."""
        return int(self._client.zcard(keys.UNRECORDED))
