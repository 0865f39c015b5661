"""A plan in words: the words that make a clause a plan, and the slot a plan is kept under.

Ingest reads a statement's mood with them (``shared.ingest.plans``: "我们计划明年春天搬到苏州" is a
plan for ``profile:home``, kept under ``plan:profile:home``); recall reads a question with them
(``shared.recall.slots``: "when am I going to move?" asks for that plan's slot, not the present
value). One spelling of both, so that a question finds the slot ingest kept the plan under.
"""

from __future__ import annotations

import re

__all__ = ["PLAN_PREFIX", "PLAN_RE", "plan_slot"]

PLAN_PREFIX = "plan:"
# The words of a plan: 要/打算/计划/准备, will/going to/plan to/need to, "I'll".
PLAN_RE = re.compile(
    r"(?<![需重主只想不必])要(?![求是么不紧])|(?<![觉记获取懂显值使晓])得(?=去|交|做|买|写|还|赶)|打算|计划|准备|将要|会去"
    r"|\b(?:will|going to|gonna|plan(?:ning)? to|have to|need to|must)\b|['’]ll\b",
    re.IGNORECASE,
)


def plan_slot(slot: str) -> str:
    """The slot of a plan for ``slot``: "plan:profile:home". Plans of one slot compete with each
    other (the newer plan replaces the older); a plan never competes with the slot's present value,
    which stays current. A later statement of the slot itself ("我们搬到苏州了") says the plan
    happened and supersedes it (``shared.ingest.conflicts``); a plan nobody confirms is a task and
    expires when its time is over (the TTL sweep)."""
    return slot if slot.startswith(PLAN_PREFIX) else PLAN_PREFIX + slot
