"""Fair scheduling of ingest between tenants: a tenant's turns past its share go to the back.

The broker's ingest queue is first in, first out: a tenant that published a backlog of thousands
of turns made every other tenant's turns wait behind all of them (four minutes in the probe of
issue 18). kombu's Redis transport keeps each queue as one list per priority step (0, 3, 6, 9;
0 is taken first, for every queue a worker consumes, before any 9) and a worker's one ``BRPOP``
names them in that order. So each tenant may publish ``turns`` turns a ``window_s`` window at the
normal priority; the turns it publishes past that in the same window are sent at
``BACKLOG_PRIORITY`` and wait until no normal message is left. A light tenant's turn is then taken
after at most the messages already in hand and the normal ones ahead of it, not after the
backlog. Counted per tenant in Redis (one fixed window, shared by every publishing process).

A turn at the back is delayed, never dropped; within one tenant, a later turn at normal priority
(a new window) may be recorded before an earlier one still at the back, as with several workers
taking one conversation's messages at once (seq is assigned at publish, not by the order of
recording). Queue depths count every priority list (``workers.broker.queue_lists``).
"""

from __future__ import annotations

import logging
from collections import Counter

import redis

from infra import redis_layout

log = logging.getLogger(__name__)

BACKLOG_PRIORITY = 9  # kombu Redis transport: the last of its priority steps [0, 3, 6, 9]


def share_key(tenant_id: str) -> str:
    return f"{redis_layout.PREFIX}:fair_share:{tenant_id}"


class FairShare:
    """``turns`` a ``window_s`` window per tenant at normal priority (``turns`` 0: off)."""

    def __init__(self, client: redis.Redis, turns: int, window_s: int) -> None:
        self._client = client
        self.turns = turns
        self.window_s = window_s

    def priority(self, tenants: Counter[str]) -> int | None:
        """Count ``tenants``' turns of one message; its priority (None: the normal one)."""
        if self.turns <= 0 or not tenants:
            return None
        try:
            pipe = self._client.pipeline(transaction=False)
            for tenant, n in tenants.items():
                pipe.set(share_key(tenant), 0, ex=self.window_s, nx=True)  # opens the window
                pipe.incrby(share_key(tenant), n)
            counts = pipe.execute()[1::2]
        except redis.RedisError as exc:  # the publish itself decides about Redis; send as normal
            log.warning("fair share not counted: %s", exc)
            return None
        return BACKLOG_PRIORITY if any(int(c) > self.turns for c in counts) else None
