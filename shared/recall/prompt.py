"""Recall results shaped for an LLM prompt: a token budget and a labelled memory block.

Pure and deterministic: the same items, language and budget always give the same text. Token
counts are :func:`shared.language.text.approx_token_count` estimates (good for budgets, not billing).

The budget rule (both :func:`fit_budget` and :func:`prompt_block`): items are taken in rank order,
best first; an item is kept when its cost still fits in what is left of the budget, otherwise it
is skipped and the next, possibly smaller, item is tried. So a long item never hides shorter,
lower-ranked ones behind it, and a kept item never displaces a better-ranked one.

Items may be :class:`shared.recall.request.RecallItem` objects or their public dicts (``to_public()``
or the JSON of ``cuemem recall --json``): only ``content``, ``type`` and ``created_at`` are read.

An item's date is the day it was told as the user reads it: in the user's zone (``offset_s``, the
UTC offset of their latest turn, ``EventRepository.user_offset``, which the caller reads and
passes in; see ``shared.zones``). A memory told at 01:30 in Beijing is stored at 17:30 UTC the day
before; its line says the Beijing day.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, tzinfo
from typing import Any, Literal, TypeVar

from shared.language.text import approx_token_count, detect_language
from shared.recall.request import RecallItem
from shared.zones import user_zone

Language = Literal["zh", "en"]
PromptItem = RecallItem | Mapping[str, Any]
T = TypeVar("T", bound=PromptItem)

DEFAULT_PROMPT_BUDGET = 1000

# The order of the groups in a block: who the user is and what they like first, the current
# conversation last (closest to the question). Types outside this list follow, sorted by name.
TYPE_ORDER: tuple[str, ...] = (
    "profile", "preference", "fact", "task", "semantic", "episodic", "turn", "working"
)  # fmt: skip

LABELS: dict[Language, dict[str, str]] = {
    "zh": {
        "profile": "[长期记忆 - 个人信息]",
        "preference": "[长期记忆 - 用户偏好]",
        "fact": "[长期记忆 - 事实]",
        "task": "[长期记忆 - 待办]",
        "semantic": "[长期记忆 - 总结]",
        "episodic": "[长期记忆 - 经历]",
        "turn": "[对话记录]",
        "working": "[当前对话]",
    },
    "en": {
        "profile": "[Long-term memory - profile]",
        "preference": "[Long-term memory - preferences]",
        "fact": "[Long-term memory - facts]",
        "task": "[Long-term memory - tasks]",
        "semantic": "[Long-term memory - summaries]",
        "episodic": "[Long-term memory - episodes]",
        "turn": "[Conversation log]",
        "working": "[Current conversation]",
    },
}
# The block of a recall that found nothing relevant (the floor left everything out): the model is
# told so, rather than handed an empty string it cannot tell from a failed recall.
NOTHING_REMEMBERED: dict[Language, str] = {
    "zh": "[长期记忆] 没有与此相关的记忆。",
    "en": "[Long-term memory] Nothing relevant is remembered.",
}
_OTHER_LABEL: dict[Language, str] = {"zh": "[长期记忆 - {type}]", "en": "[Long-term memory - {type}]"}

_WHITESPACE_RE = re.compile(r"\s+")


def _get(item: PromptItem, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def _content(item: PromptItem) -> str:
    return str(_get(item, "content") or "")


def _type(item: PromptItem) -> str:
    return str(_get(item, "type") or "")


def fit_budget(items: Sequence[T], budget_tokens: int) -> list[T]:
    """The items, in rank order, whose contents fit in ``budget_tokens`` together.

    Each item costs ``approx_token_count(content)``. Walking best first, an item is kept when it
    fits in what is left; one that does not fit is skipped and later, smaller items may still be
    kept. A budget of 0 or less keeps nothing.
    """
    if budget_tokens <= 0:
        return []
    kept: list[T] = []
    left = budget_tokens
    for item in items:
        cost = approx_token_count(_content(item))
        if cost <= left:
            kept.append(item)
            left -= cost
    return kept


def choose_language(items: Sequence[PromptItem], query: str | None = None) -> Language:
    """The user's language: the query's when it has letters, else the majority of the items.

    Each item's content votes with :func:`detect_language`; a tie is settled by all contents
    read together. No query and no items: "en".
    """
    if query is not None and any(ch.isalpha() for ch in query):
        return detect_language(query)
    votes = [detect_language(_content(i)) for i in items if _content(i).strip()]
    zh = votes.count("zh")
    en = len(votes) - zh
    if zh != en:
        return "zh" if zh > en else "en"
    if not votes:
        return "en"
    return detect_language("\n".join(_content(i) for i in items))


def label(type_: str, language: Language) -> str:
    """The group header of one memory type, e.g. ``[长期记忆 - 用户偏好]``."""
    return LABELS[language].get(type_) or _OTHER_LABEL[language].format(type=type_ or "other")


def _date(created_at: Any, zone: tzinfo | None) -> str | None:
    """The calendar date of an ISO 8601 time in ``zone`` (None: as written, in its own offset; a
    time without an offset is read as written too); None when unreadable."""
    if isinstance(created_at, datetime):
        when = created_at
    elif isinstance(created_at, str) and created_at:
        try:
            when = datetime.fromisoformat(created_at)
        except ValueError:
            return None
    else:
        return None
    if zone is not None and when.tzinfo is not None:
        when = when.astimezone(zone)
    return when.date().isoformat()


def item_line(item: PromptItem, offset_s: int | None = None) -> str:
    """``- content (YYYY-MM-DD)``, the date in the user's zone (``offset_s``: seconds east of UTC;
    None: as the item's ``created_at`` is written); the content on one line (runs of whitespace,
    newlines included, become one space, so a memory cannot open a header line of its own)."""
    text = _WHITESPACE_RE.sub(" ", _content(item)).strip()
    day = _date(_get(item, "created_at"), None if offset_s is None else user_zone(offset_s))
    return f"- {text} ({day})" if day else f"- {text}"


def _group_key(type_: str) -> tuple[int, str]:
    try:
        return (TYPE_ORDER.index(type_), "")
    except ValueError:
        return (len(TYPE_ORDER), type_)


def prompt_block(
    items: Sequence[PromptItem],
    *,
    language: Language | None = None,
    budget_tokens: int = DEFAULT_PROMPT_BUDGET,
    query: str | None = None,
    offset_s: int | None = None,
) -> str:
    """Memories as a prompt block: grouped by type under labels in the user's language.

    ``language`` None follows :func:`choose_language` (the query when given, else the items).
    Groups come in :data:`TYPE_ORDER`; inside a group items keep their rank order. Each item is
    one line ``- content (YYYY-MM-DD)`` (the date of its ``created_at`` in the user's zone,
    ``offset_s``, see :func:`item_line`); groups are separated by a blank line. The budget
    follows the module's rule, walking items by rank: an item costs the tokens of its line, plus
    its group's header line when it is the group's first kept item.
    ``approx_token_count`` of the whole block therefore never exceeds ``budget_tokens``. No
    items for a ``query`` (a recall that found nothing relevant): :data:`NOTHING_REMEMBERED` in the
    query's language, when it fits; no items otherwise, or none fitting: "".
    """
    if budget_tokens <= 0:
        return ""
    if not items:
        if query is None:
            return ""
        nothing = NOTHING_REMEMBERED[language or choose_language(items, query)]
        return nothing if approx_token_count(nothing) <= budget_tokens else ""
    lang: Language = language or choose_language(items, query)
    left = budget_tokens
    groups: dict[str, list[str]] = {}
    for item in items:
        if not _content(item).strip():
            continue
        type_ = _type(item)
        line = item_line(item, offset_s)
        cost = approx_token_count(line)
        if type_ not in groups:
            cost += approx_token_count(label(type_, lang))
        if cost > left:
            continue
        left -= cost
        groups.setdefault(type_, []).append(line)
    blocks = ["\n".join([label(type_, lang), *groups[type_]]) for type_ in sorted(groups, key=_group_key)]
    return "\n\n".join(blocks)
