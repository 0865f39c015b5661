"""Generated conversations for the service tiers: many users, a mix of memorable turns and chit-chat."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from producers.publisher import Publisher

BASE = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
TOPICS = [
    "我不吃香菜，点餐时记得提醒",
    "生产环境部署端口是{n}",
    "My order ORD-{n} hasn't arrived yet",
    "好的，谢谢",
    "I prefer green tea over coffee",
    "型号 X{n}，故障码 E{n}",
    "lol ok",
    "提醒我明天下午三点开会，会议号 {n}",
    "I live in Berlin and work as a nurse",
    "哈哈哈",
]


def make_turns(users: int, per_user: int) -> dict[str, list[dict]]:
    turns: dict[str, list[dict]] = {}
    for u in range(users):
        user = f"user-{u:02d}"
        turns[user] = [
            {
                "event_id": f"ev-{user}-{i:03d}",
                "user_id": user,
                "session_id": f"sess-{i // 10}",
                "role": "user" if i % 3 else "assistant",
                "content": TOPICS[(i + u) % len(TOPICS)].format(n=1000 + u * 100 + i),
                "at": (BASE + timedelta(minutes=i)).isoformat(),
            }
            for i in range(per_user)
        ]
    return turns


def publish_conversation(
    pub: Publisher, user_id: str, session_id: str, turns: Iterable[tuple[int, str]], *, numbered: bool = False
) -> list[str]:
    """Publish ``(n, content)`` user turns in the order given, turn n at ``BASE`` + n minutes and,
    when ``numbered``, with seq n (else the producer numbers them): their event ids."""
    return [
        pub.publish(
            user_id=user_id,
            session_id=session_id,
            role="user",
            content=content,
            seq=n if numbered else None,
            at=(BASE + timedelta(minutes=n)).isoformat(),
        ).event_id
        for n, content in turns
    ]
