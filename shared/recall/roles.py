"""Who said it: the assistant's questions are no facts about the user.

Assistant turns stay searchable ("what did you recommend me?"), but a question the assistant asked
("好呀，你有什么忌口吗？") shares the words of the user's later question ("我有什么忌口？") while
saying nothing about the user: the user's answer must rank above it. Whether a turn is such a
question, and whether the query asks what the assistant said, are features of the relevance
model (``shared.recall.features``), and the floor leaves out a question whose answer is already
in (``shared.recall.floor``). (The answer carries the question's cue keys:
``shared.ingest.answers``.)
"""

from __future__ import annotations

import re

from shared.events import Role
from shared.language.clauses import is_chit_chat, statement_text
from shared.recall.request import Candidate

_ABOUT_ASSISTANT = re.compile(
    r"\b(?:what|which|where|when|how|who|why) (?:did|have|had) you\b"
    r"|\byou (?:said|say|told|tell|recommend(?:ed)?|suggest(?:ed)?|mention(?:ed)?|advised?|proposed?"
    r"|asked|answered|meant|wrote|gave)\b|\byour (?:advice|suggestion|recommendation|answer|reply)\b"
    r"|\bdid you (?:say|tell|recommend|suggest|mention|ask)\b"
    r"|你(?:之前|刚才|刚刚|上次|以前|当时|那天|昨天)?(?:说|讲|推荐|建议|提到|提过|告诉|问|回答|答|让我|叫我)",
    re.IGNORECASE,
)


def asks_assistant(query: str) -> bool:
    """Whether the query asks what the assistant said: "what did you recommend", "你推荐了什么"."""
    return _ABOUT_ASSISTANT.search(query) is not None


def only_asks(role: str, content: str) -> bool:
    """A turn of the assistant that only asks: once its questions are taken out, nothing or
    chit-chat is left ("好呀，你有什么忌口吗？")."""
    if role != Role.ASSISTANT.value:
        return False
    statement = statement_text(content)
    return not statement.strip() or is_chit_chat(statement)


def is_assistant_question(c: Candidate) -> bool:
    """A raw turn of the assistant that only asks (:func:`only_asks`)."""
    return only_asks(c.item.role or "", c.item.content)
