"""The per-conversation seq counters in Redis (shared.ports.SeqCounter), for the recorder.

The producer draws seqs from these counters (``producers.publisher``: INCR in one script). With
``appendfsync everysec`` a host crash can take Redis's last second of writes with it, counter
increments included, while the turns that were handed those seqs are already in Postgres; the
counter then hands the same seqs out again. ``memory.record`` renumbers such a turn with
``next_after``, which also moves the counter past everything recorded.
"""

from __future__ import annotations

import redis

from shared import keys

# KEYS: the seq key. ARGV: the floor (the conversation's highest recorded seq).
_NEXT_AFTER = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if floor > cur then cur = floor end
local seq = cur + 1
redis.call('SET', KEYS[1], seq)
return seq
"""


class RedisSeqCounter:
    def __init__(self, client: redis.Redis) -> None:
        self._next_after = client.register_script(_NEXT_AFTER)

    def next_after(self, tenant_id: str, user_id: str, session_id: str, floor: int) -> int:
        key = keys.seq_key(tenant_id, user_id, session_id)
        return int(self._next_after(keys=[key], args=[int(floor)]))
