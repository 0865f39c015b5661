"""The Redis broker as the workers, the API and the CLI read it: one shared client per Redis for a
process, and the queue depths.

Clients are opened by ``infra.broker.open_redis`` (the one factory, in the I/O commons because the
producer's Publisher needs it too).
"""

from __future__ import annotations

from typing import Any

import redis

from infra.broker import open_redis, redis_py_url
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


def restore_unacked(broker_url: str, transport_options: dict[str, object]) -> int:
    """Hand every delivered, unacknowledged message back to its queue now; returns how many.

    kombu gives a message back only once it has been unacked for the visibility timeout (an hour
    in production, so that a long task is never run twice): after a crash, what a dead worker held
    waits that long. Call this only when no consumer of the broker can be alive (the embedded
    default proves it with the data-dir lock, ``workers/runtime/serving.py``): a live worker's
    message would run twice. kombu's own restore does the work, per delivery tag, so the keys, the
    routing and the priority lists are kombu's (``QoS.restore_by_tag``: the message goes back on
    the list it came from, marked redelivered, and leaves ``unacked`` and ``unacked_index`` in one
    transaction)."""
    from kombu import Connection

    with Connection(broker_url, transport_options=transport_options) as conn:
        channel: Any = conn.default_channel
        with channel.conn_or_acquire() as client:
            tags = client.hkeys(channel.unacked_key)
            for tag in tags:
                channel.qos.restore_by_tag(tag, client=client)
    return len(tags)
