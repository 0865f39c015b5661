"""Context windows: each turn of the conversation log is indexed together with the turns right
before it in its session.

A turn often means nothing alone: "对了，那天记得带防晒霜" is about the camping trip two turns earlier,
"yes, the blue one" answers a question. So the turn's point in the conversation-log index holds
the embedding and the keyword terms of its *window*: up to ``Settings.turn_window`` turns of the
session ending with it, oldest first. The unit of recall stays the turn (its id is the evidence):
a hit on a window stands for every turn in it (``shared/recall/search.py``), so a turn is reached
through the window ending at it (its context before) and through the windows of the turns after
it (its context after), and the pipeline needs nothing but the turns already recorded when it
embeds a turn.

Context turns are cut to ``CONTEXT_CHARS`` each: a long earlier turn must not drown the turn the
window is about, and the embedder's cost grows with the text. Measured on LoCoMo's tuning split
(conv-26 and conv-30, docs/BENCHMARKS.md): windows of three turns lift dense turn search from
any@5 0.48 to 0.63.

Pure: the repository reads the context turns; this module only says what the window is.
"""

from __future__ import annotations

from collections.abc import Sequence

CONTEXT_CHARS = 240  # of each context turn, cut at a word boundary where there is one


def clip(text: str, chars: int = CONTEXT_CHARS) -> str:
    """``text`` with collapsed whitespace, cut to ``chars`` characters (at a space when one is
    near the end, so that a word is not split), with "…" when something was cut."""
    flat = " ".join(text.split())
    if len(flat) <= chars:
        return flat
    head = flat[:chars]
    space = head.rfind(" ")
    if space >= chars * 3 // 4:
        head = head[:space]
    return head.rstrip() + " …"


def window_text(own: str, context: Sequence[str]) -> str:
    """What is embedded and keyword-indexed for a turn: its context turns (oldest first, each cut
    to CONTEXT_CHARS, empty ones left out) and then the turn itself, one per line. Without
    context it is the turn's own text, so a window of 1 indexes each turn alone."""
    lines = [clip(c) for c in context if c.strip()]
    return "\n".join([*lines, " ".join(own.split())])


def alone_text(own: str) -> str:
    """What is embedded for a turn by itself (``Settings.turn_alone_vector``): its own line of its
    window. A turn without context turns is its own window, and the two share one vector."""
    return window_text(own, ())
