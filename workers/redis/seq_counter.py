"""The per-conversation seq counters in Redis (shared.ports.SeqCounter), for the recorder.

The producer draws seqs from these counters (``producers.publisher``: INCR in one script). With
``appendfsync everysec`` a host crash can take Redis's last second of writes with it, counter
increments included, while the turns that were handed those seqs are already in Postgres; the
counter then hands the same seqs out again. ``memory.record`` renumbers such a turn with
``next_after``, which also moves the counter past everything recorded.
"""

from __future__ import annotations

import redis

from infra import redis_layout


class RedisSeqCounter:
    def __init__(self, client: redis.Redis) -> None:
        self._next_after = client.register_script(redis_layout.NEXT_SEQ_AFTER_SCRIPT)

    def next_after(self, tenant_id: str, user_id: str, session_id: str, floor: int) -> int:
        key = redis_layout.seq_key(tenant_id, user_id, session_id)
        return int(self._next_after(keys=[key], args=[int(floor)]))
