"""Reads the working memory the producer writes to Redis (the last turns of each conversation)."""

from __future__ import annotations

import json
import logging
from datetime import datetime

import redis

from shared import keys
from shared.events import Role, TurnPublished

log = logging.getLogger(__name__)


class RedisWorkingMemory:
    def __init__(self, client: redis.Redis):
        self._redis = client

    def recent(self, tenant_id: str, user_id: str, session_id: str | None, limit: int) -> list[TurnPublished]:
        """The user's latest turns, newest first: from one session, or from the latest sessions."""
        if session_id is not None:
            sessions = [session_id]
        else:
            raw_sessions = self._redis.zrevrange(keys.user_sessions_key(tenant_id, user_id), 0, 4)
            sessions = [s.decode() if isinstance(s, bytes) else str(s) for s in raw_sessions]
        turns: list[TurnPublished] = []
        for session in sessions:
            rows: list[tuple[bytes, float]] = self._redis.zrevrange(  # type: ignore[assignment]
                keys.working_memory_key(tenant_id, user_id, session), 0, limit - 1, withscores=True
            )
            for member, score in rows:
                try:
                    data = json.loads(member)
                    turns.append(
                        TurnPublished(
                            event_id=data["event_id"],
                            tenant_id=tenant_id,
                            user_id=user_id,
                            session_id=session,
                            seq=int(score),
                            role=Role(data["role"]),
                            content=data["content"],
                            at=datetime.fromisoformat(data["at"]),
                            metadata={},
                        )
                    )
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
            key = keys.working_memory_key(tenant_id, user_id, session)
            members: list[bytes] = self._redis.zrange(key, 0, -1)  # type: ignore[assignment]
            for member in members:
                try:
                    event_id = json.loads(member)["event_id"]
                except (ValueError, KeyError, TypeError):
                    continue
                if event_id in wanted:
                    removed += int(self._redis.zrem(key, member))  # type: ignore[arg-type]
        return removed
