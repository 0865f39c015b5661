"""A question about one of the user's own slots asks for its current value.

"Where do I work?", "我现在住哪？", "What's my phone number?" name a profile slot of the user's own
(``shared.language.slot_rules.slot_for``: profile:job, profile:home, profile:phone) without sharing
a word with its value ("Loving the new job at the vet clinic!"). Ingest keeps one current memory per
slot (``shared.ingest.conflicts``); that memory is the answer, so it comes first, ahead of whatever
the relevance model makes of a store where every memory is about as close to the query. The training
questions hardly ever ask this (their slot memories are few), so the model has nothing to learn it
from, like the other orders of ``shared.recall.cascade.rank``.

A question about a plan or a change to come ("我们打算什么时候搬家？", "Where am I moving to?",
"When do I start at Google?", "我明年住哪？") asks for the plan's slot
(``plan:profile:home``), not the present value. A question about the past ("What was my
previous job?", "我以前住哪？") asks for history, which is not the current value: no slot then.
So does a question about someone else ("Where does Caroline work?"): only the user's own
statements fill the user's slots.
"""

from __future__ import annotations

import re

from shared.language import cues, timeexpr
from shared.language.plan_words import PLAN_RE, plan_slot
from shared.language.slot_rules import slot_for
from shared.models import MemoryStatus, MemoryType
from shared.recall.request import Candidate

_OWN_RE = re.compile(r"\b(?:I|I'm|I've|my|me|mine|we|our|(?-i:us))\b|我", re.IGNORECASE)
PROFILE_PREFIX = "profile:"
# Words that ask for a value the slot once had, not the one it has now; and words of a topic
# that only looks like a slot ("Where do I work out?").
_HISTORY_RE = re.compile(
    r"\b(?:previous(?:ly)?|former(?:ly)?|old|used to|before|past|first|originally|last|work(?:ing)? out)\b"
    r"|以前|之前|原来|过去|曾经|上一[份个家]|老(?:家|房子|公司|单位)",
    re.IGNORECASE,
)
# Words of pay, a topic beside the job that the job's value does not answer: the job memory is not
# the answer to "我工资多少？" or "What's my salary?", though "工资" and "salary" are words of work.
_PAY_RE = re.compile(
    r"\b(?:salary|salaries|pay|paid|wages?|income|earn\w*|bonus\w*|raise|overtime)\b"
    r"|工资|薪水|薪资|薪酬|收入|奖金|月薪|年薪|加薪|加班|挣多少|赚多少",
    re.IGNORECASE,
)
# Words of a change still to come: the question asks for the plan ("Where am I moving to?",
# "When do I start at Google?", "我什么时候搬家？").
_COMING_RE = re.compile(
    r"\b(?:move|moving|relocat\w*|start|starting|new (?:job|home|place|apartment))\b|搬|入职|新工作|新家",
    re.IGNORECASE,
)


def asked_slot(query: str) -> str | None:
    """The slot of the user's own whose current value ``query`` asks for (or, for a question about
    a change to come, the plan's slot), or None."""
    tense = timeexpr.tense(query)
    if not _OWN_RE.search(query) or _HISTORY_RE.search(query) or tense == "past":
        return None
    tags = cues.lexicon_tags(query)
    entities = cues.entities(query)
    slot = slot_for(query, MemoryType.PROFILE, tags, entities)
    if slot is None and _COMING_RE.search(query):
        slot = _coming_topic(query)
    if slot is None or not slot.startswith(PROFILE_PREFIX):
        return None  # a topic with many values (hobbies, foods) has no one current value
    if slot == "profile:job" and _PAY_RE.search(query):
        return None
    coming = PLAN_RE.search(query) or tense == "future" or _COMING_RE.search(query)
    return plan_slot(slot) if coming else slot


def _coming_topic(query: str) -> str | None:
    """The slot a question about a move or a start asks about ("Where am I moving to?")."""
    lowered = query.lower()
    if re.search(r"\b(?:mov(?:e|ing)|relocat\w*)\b|搬", lowered):
        return "profile:home"
    if re.search(r"\bstart(?:ing)? at\b|入职|新工作", lowered):
        return "profile:job"
    return None


def holding(candidates: list[Candidate], slot: str | None) -> list[Candidate]:
    """The candidates that hold ``slot``'s current value: its active memories (with history
    included, a superseded statement of the slot is not the current value)."""
    if slot is None:
        return []
    return [c for c in candidates if c.item.slot == slot and c.item.status == MemoryStatus.ACTIVE.value]
