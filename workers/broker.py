"""The Redis broker as the workers, the API and the CLI read it: one shared client per Redis for a
process, and the queue depths.

Clients are opened by ``producers.broker.open_redis`` (the one factory; it lives in ``producers``
because the producer's Publisher needs it too, and producers may import only ``shared``).
"""

from __future__ import annotations

import redis

from producers.broker import open_redis, redis_py_url
from shared.queues import Queue

# kombu's Redis transport keeps delivered, not yet acknowledged messages in this hash.
UNACKED = "unacked"
# ... and each queue as one list per priority step: the queue's own name for 0, the name, this
# separator and the step for the others (a tenant past its fair share is sent at 9).
PRIORITY_SEP = "\x06\x16"
PRIORITY_STEPS = (3, 6, 9)


def queue_lists(name: str) -> list[str]:
    """The Redis lists that hold the messages of queue ``name``, one per priority step."""
    return [name, *(f"{name}{PRIORITY_SEP}{step}" for step in PRIORITY_STEPS)]


def queue_depths(client: redis.Redis) -> dict[str, int]:
    """Messages waiting per cuemem queue (LLEN of each of its priority lists, summed), plus
    ``unacked``: delivered to a worker and not acknowledged yet. One pipelined round trip."""
    names = [q.value for q in Queue]
    pipe = client.pipeline(transaction=False)
    for name in names:
        for key in queue_lists(name):
            pipe.llen(key)
    pipe.hlen(UNACKED)
    values = [int(v) for v in pipe.execute()]
    per_queue = len(PRIORITY_STEPS) + 1
    depths = {name: sum(values[i * per_queue : (i + 1) * per_queue]) for i, name in enumerate(names)}
    return depths | {UNACKED: values[-1]}


class RedisClients:
    """One client, hence one connection pool, per Redis server for a process: the working memory,
    the publish ledger, the seq counters, the delivery counter and the task metrics all share it.
    Keyed by the URL as redis-py spells it, so that the embedded broker's ``redis+socket://`` and
    its ``unix://`` Redis URL (one server) get one pool."""

    def __init__(self) -> None:
        self._clients: dict[str, redis.Redis] = {}

    def get(self, url: str) -> redis.Redis:
        key = redis_py_url(url)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = open_redis(key)
        return client

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
