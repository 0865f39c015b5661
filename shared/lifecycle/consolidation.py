"""Consolidation: recurring episodes of one user become one semantic memory that cites them all.

Five evenings of "收盘了吗" and "我那只基金怎么样" share the topic tag ``finance``; once a topic's
episodes span enough distinct days, they are summarised as one ``semantic`` memory whose sources
are every episode's sources. The semantic memory's id follows from (tenant, user, topic), so a
second run updates the same memory instead of adding another: consolidation is idempotent.
Episodes stay as they are and decay on their own.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.language.text import detect_language
from shared.llm import INSTRUCTIONS, LLM, ConsolidationAnswer, LLMOperation
from shared.models import Memory, MemoryStatus, MemoryType, memory_id

# Tags too generic to define a topic of their own.
GENERIC_TAGS = frozenset({"question", "todo", "schedule", "instruction", "decision", "change", "chat"})
TOPIC_LABELS: dict[str, tuple[str, str]] = {
    "finance": ("基金、股票和每日收盘", "funds, stocks and the daily market close"),
    "coffee": ("咖啡", "coffee"),
    "drink": ("饮品", "drinks"),
    "diet": ("饮食", "diet"),
    "food": ("吃的", "food"),
    "health": ("健康", "health"),
    "device": ("设备", "devices"),
    "order": ("订单", "orders"),
    "deployment": ("部署", "deployments"),
    "work": ("工作", "work"),
    "family": ("家人", "family"),
    "travel": ("出行", "travel"),
}


@dataclass(frozen=True)
class ConsolidationPolicy:
    window_days: int = 30  # episodes older than this are not considered
    min_days: int = 3  # distinct days the topic must come up on
    min_mentions: int = 3  # source turns across the group
    max_topics_per_user: int = 5  # bound per run and per user
    max_members: int = 50


@dataclass(frozen=True)
class Group:
    topic: str
    members: tuple[Memory, ...]
    days: int
    mentions: int


def _source_days(memories: Sequence[Memory]) -> set[str]:
    return {str(s["at"])[:10] for m in memories for s in m.sources}


def plan(episodes: Sequence[Memory], now: datetime, policy: ConsolidationPolicy | None = None) -> list[Group]:
    """Topics whose episodes came up on enough distinct days, most mentioned first."""
    policy = policy or ConsolidationPolicy()
    since = now - timedelta(days=policy.window_days)
    by_topic: dict[str, list[Memory]] = defaultdict(list)
    for m in episodes:
        if m.type is not MemoryType.EPISODIC or m.status is not MemoryStatus.ACTIVE:
            continue
        if (m.valid_from or m.created_at) < since:
            continue
        for tag in m.tags:
            if tag not in GENERIC_TAGS:
                by_topic[tag].append(m)
    groups = []
    for topic, members in by_topic.items():
        members = sorted(members, key=lambda m: (m.created_at, m.id))[-policy.max_members :]
        days = len(_source_days(members))
        mentions = sum(len(m.sources) for m in members)
        if days >= policy.min_days and mentions >= policy.min_mentions:
            groups.append(Group(topic, tuple(members), days, mentions))
    groups.sort(key=lambda g: (-g.mentions, -g.days, g.topic))
    return groups[: policy.max_topics_per_user]


def semantic_id(tenant_id: str, user_id: str, topic: str) -> str:
    return memory_id(tenant_id, user_id, f"consolidation:{topic}", 0)


def summary_text(group: Group) -> str:
    """A rule-based summary; an LLM, when configured, may phrase it better."""
    zh = sum(detect_language(m.content) == "zh" for m in group.members) * 2 >= len(group.members)
    label_zh, label_en = TOPIC_LABELS.get(group.topic, (group.topic, group.topic))
    examples = []
    for m in group.members:
        text = m.content.strip()
        if text not in examples:
            examples.append(text)
    shown = (
        "、".join(f"「{e[:24]}」" for e in examples[:3])
        if zh
        else "; ".join(f'"{e[:40]}"' for e in examples[:3])
    )
    if zh:
        return f"用户持续关注{label_zh}：{group.days}天里提到{group.mentions}次，如{shown}"[:200]
    text = (
        f"The user keeps following {label_en}: {group.mentions} mentions over {group.days} days, e.g. {shown}"
    )
    return text[:200]


def build_semantic(
    group: Group, now: datetime, existing: Memory | None, content: str | None = None
) -> Memory:
    """The semantic memory for a group (new, or the existing one brought up to date)."""
    first = group.members[0]
    sources = sorted(
        {s["event_id"]: s for m in group.members for s in m.sources}.values(),
        key=lambda s: (str(s["at"]), str(s["session_id"]), int(s["seq"])),
    )
    valid_from = min((m.valid_from or m.created_at) for m in group.members)
    base = existing or Memory(
        id=semantic_id(first.tenant_id, first.user_id, group.topic),
        tenant_id=first.tenant_id,
        user_id=first.user_id,
        type=MemoryType.SEMANTIC,
        content="",
        importance=0.0,
        status=MemoryStatus.ACTIVE,
        created_at=now,
        updated_at=now,
        last_accessed_at=now,
        version=0,
    )
    base.content = content or summary_text(group)
    base.importance = round(min(10.0, 5.0 + math.log2(group.mentions)), 3)
    base.score = max(base.score, base.importance)
    base.tags = sorted({group.topic, *(t for m in group.members for t in m.tags)})
    base.entities = sorted({e for m in group.members for e in m.entities})
    base.cues = sorted({f"t:{group.topic}", *(c for m in group.members for c in m.cues)})
    base.sources = sources
    base.slot = f"semantic:{group.topic}"
    base.valid_from = valid_from
    base.updated_at = now
    base.version += 1
    return base


def llm_summarizer(llm: LLM | None) -> Callable[[Group], str | None] | None:
    """With an LLM, a group's summary in the model's words (``build_semantic``'s ``content``);
    None for a group the model did not answer, or without an LLM: :func:`summary_text` then."""
    if llm is None:
        return None

    def summarize(group: Group) -> str | None:
        data = {m.id: m.content for m in group.members}
        answer = llm.ask(
            LLMOperation.CONSOLIDATION, INSTRUCTIONS[LLMOperation.CONSOLIDATION], data, ConsolidationAnswer
        )
        if answer is None or not set(answer.member_ids) <= set(data):
            return None  # the rule-based summary is used; ids the model invented are not trusted
        return answer.content

    return summarize
