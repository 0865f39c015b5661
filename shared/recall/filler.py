"""Filler: a text that can answer nothing ("lol ok", "哈哈", "好的，谢谢！")."""

from __future__ import annotations

from shared.language.clauses import is_chit_chat
from shared.language.cues import text_cues

# Only a text this short can hold no cue key at all; a longer one is not read for cues (reading
# them costs a quarter of a millisecond, and recall checks every candidate).
SHORT_TEXT = 16


def is_filler_text(text: str) -> bool:
    """Chit-chat, or a short text without a single cue key: "lol ok", "哈哈", "好的，谢谢！"."""
    if is_chit_chat(text):
        return True
    return len(text) <= SHORT_TEXT and not text_cues(text)
