"""A question about one of the user's own slots asks for its current value.

"Where do I work?", "我现在住哪？", "What's my phone number?" name a profile slot of the user's
own (``shared.language.cues.slot_for``: profile:job, profile:home, profile:phone) without sharing a word with
its value ("Loving the new job at the vet clinic!"). Ingest keeps one current memory per slot
(``shared.ingest.conflicts``); that memory is the answer, so it comes first, ahead of whatever
the relevance model makes of a store where every memory is about as close to the query. The
training questions hardly ever ask this (their slot memories are few), so the model has nothing
to learn it from, like the other orders of ``shared.recall.cascade.rank``.

A question about a plan ("我们打算什么时候搬家？", "when am I going to move?") asks for the plan's
slot (``plan:profile:home``), not the present value. A question about the past ("What was my
previous job?", "我以前住哪？") asks for history, which is not the current value: no slot then.
So does a question about someone else ("Where does Caroline work?"): only the user's own
statements fill the user's slots.
"""

from __future__ import annotations

import re

from shared.language import cues, timeexpr
from shared.language.plan_words import PLAN_RE, plan_slot
from shared.models import MemoryType

_OWN_RE = re.compile(r"\b(?:I|I'm|I've|my|me|mine|we|our|(?-i:us))\b|我", re.IGNORECASE)
# Words that ask for a value the slot once had, not the one it has now.
PROFILE_PREFIX = "profile:"
_HISTORY_RE = re.compile(
    r"\b(?:previous(?:ly)?|former(?:ly)?|old|used to|before|past|first|originally|last)\b"
    r"|以前|之前|原来|过去|曾经|上一[份个家]|老(?:家|房子|公司|单位)",
    re.IGNORECASE,
)


def asked_slot(query: str) -> str | None:
    """The slot of the user's own whose current value ``query`` asks for, or None."""
    if not _OWN_RE.search(query) or _HISTORY_RE.search(query) or timeexpr.tense(query) == "past":
        return None
    tags = cues.lexicon_tags(query)
    entities = cues.entities(query)
    slot = cues.slot_for(query, MemoryType.PROFILE, tags, entities)
    if slot is None or not slot.startswith(PROFILE_PREFIX):
        return None  # a topic with many values (hobbies, foods) has no one current value
    return plan_slot(slot) if PLAN_RE.search(query) else slot
