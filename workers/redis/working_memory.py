"""Reads the working memory the producer writes to Redis (the last turns of each conversation), in
the layout ``infra/redis_layout.py`` owns."""

from __future__ import annotations

import logging

import redis

from infra import redis_layout
from shared.events import TurnPublished

log = logging.getLogger(__name__)


class RedisWorkingMemory:
    def __init__(self, client: redis.Redis):
        self._redis = client

    def recent(self, tenant_id: str, user_id: str, session_id: str | None, limit: int) -> list[TurnPublished]:
        """The user's latest turns, newest first: from one session, or from the latest sessions."""
        if session_id is not None:
            sessions = [session_id]
        else:
            raw_sessions = self._redis.zrevrange(redis_layout.user_sessions_key(tenant_id, user_id), 0, 4)
            sessions = [s.decode() if isinstance(s, bytes) else str(s) for s in raw_sessions]
        turns: list[TurnPublished] = []
        for session in sessions:
            rows: list[tuple[bytes, float]] = self._redis.zrevrange(  # type: ignore[assignment]
                redis_layout.working_memory_key(tenant_id, user_id, session), 0, limit - 1, withscores=True
            )
            for member, score in rows:
                try:
                    turns.append(redis_layout.working_memory_turn(member, score, tenant_id, user_id, session))
                except (ValueError, KeyError, TypeError):
                    log.warning("skipping a malformed working-memory entry for %s/%s", user_id, session)
        turns.sort(key=lambda t: (t.at, t.session_id, t.seq), reverse=True)
        return turns[:limit]

    def forget(self, tenant_id: str, user_id: str, turns: list[tuple[str, str]]) -> int:
        """Drop these turns ((event id, session id)) from the working memory (a privacy delete);
        returns how many entries went."""
        removed = 0
        for session in sorted({session for _, session in turns}):
            wanted = {event_id for event_id, s in turns if s == session}
            key = redis_layout.working_memory_key(tenant_id, user_id, session)
            members: list[bytes] = self._redis.zrange(key, 0, -1)  # type: ignore[assignment]
            for member in members:
                try:
                    event_id = redis_layout.working_memory_event_id(member)
                except (ValueError, KeyError, TypeError):
                    continue
                if event_id in wanted:
                    removed += int(self._redis.zrem(key, member))  # type: ignore[arg-type]
        return removed
