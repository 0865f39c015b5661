"""What a turn's clauses do: state, ask, or only chat.

A turn is cut into clauses (sentences, split again at commas, at Chinese conjunctions and at an
English "…, and I …") so that each is read apart: "我住杭州，你呢？" states "我住杭州，" and asks
"你呢？". Ingest scores and summarises the statement part (``shared.ingest.extraction``) and keeps
the question an assistant put, for the answer that follows (``shared.ingest.answers``); recall
leaves out chit-chat and an assistant's turns that only ask (``shared.recall.filler``,
``shared.recall.roles``). One reading for both, so that what ingest took for a question recall
takes for one too.
"""

from __future__ import annotations

import re

from shared.language.text import word_set

__all__ = [
    "WORD_RE",
    "clause_spans",
    "is_chit_chat",
    "question_text",
    "sentence_spans",
    "statement_text",
]

_I = re.IGNORECASE

_ACK_WORDS = word_set("""
    好的 好吧 好滴 好嘞 好 嗯嗯 嗯 哦哦 哦 噢 啊 呀 啦 吧 呃 额 行 可以 没问题 收到 明白了 明白
    知道了 了解 谢谢你 谢谢 谢了 多谢 感谢 辛苦了 不客气 没事 没关系 对的 对 是的 是啊 你好 您好
    早上好 晚上好 晚安 早 拜拜 再见 嗨 棒 太棒了 厉害 赞 牛 666
    ok okay kk k thanks thank you thx ty lol lmao rofl hi hello hey there bye goodbye good night
    morning cool nice great awesome sure yes yeah yep yup no nope np got it gotcha sounds alright
    all right fine perfect wow oh hmm um uh ah see
""")
_ACK_RE = re.compile(
    r"(?:"
    + "|".join(sorted(map(re.escape, _ACK_WORDS), key=lambda w: (-len(w), w)))
    + r"|[哈呵嘿嘻]+|(?:ha|he)+h?|h+m+)+"
)
_NON_WORD_RE = re.compile(r"[\W_]+")
_CLAUSE_END_RE = re.compile(r"[。！？!?；;\n]+|\.(?=\s|$)|[，,](?!\d)")
_SENTENCE_END_RE = re.compile(r"[。！？!?；;\n]+|\.(?=\s|$)")
_CONJ_ZH_RE = re.compile(r"(?=而且|并且|另外|还有|但是|不过|同时)")
_CONJ_EN_RE = re.compile(r"\s+(?:and|but|while|plus)\s+(?=(?:I|I'm|I've|I'd|my|we|we're|our|he|she|they)\b)")
# A word of a Latin-script text: what "three words" and "twelve words" count.
WORD_RE = re.compile(r"[A-Za-z0-9']+")
_QUESTION_RE = re.compile(
    r"[?？]\s*$|[吗么呢嘛]\s*[。.!！~]*\s*$|^\s*(?:什么|哪|谁|为什么|怎么|是不是|有没有)"
    r"|(?:怎么样|怎样|如何|咋样|好不好|行不行|对不对|多少|几点|什么时候|啥时候)\s*[。.!！~]*\s*$"
    r"|^\s*(?:what|where|when|who|why|how|which)\b", _I)  # fmt: skip
_REQUEST_RE = re.compile(
    r"\b(?:can|could|would|will) you\b|\bplease\b|能不能|能否|可以|可不可以|麻烦|帮我", _I
)


def _spans(text: str, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """Split ``text`` after each delimiter match; spans keep their delimiter, blanks are dropped."""
    out, start = [], 0
    for m in pattern.finditer(text):
        if m.end() > start:
            out.append((start, m.end()))
            start = m.end()
    out.append((start, len(text)))
    return [(s, e) for s, e in out if text[s:e].strip()]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentences: ``text`` cut after each sentence end (。！？!?；; a new line, a full stop)."""
    return _spans(text, _SENTENCE_END_RE)


def clause_spans(text: str) -> list[tuple[int, int]]:
    """Clauses: sentences split at commas, Chinese conjunctions and English "and I ..." joins."""
    cuts = {e for _, e in _spans(text, _CLAUSE_END_RE)}
    cuts |= {m.start() for m in _CONJ_ZH_RE.finditer(text) if m.start() > 0}
    last = 0
    for m in _CONJ_EN_RE.finditer(text):  # split only when the left part is itself a clause
        if len(WORD_RE.findall(text[last : m.start()])) >= 3:
            cuts.add(m.start())
            last = m.start()
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(text)), len(text)]
    return [(s, e) for s, e in zip(bounds, bounds[1:], strict=False) if text[s:e].strip()]


def is_chit_chat(text: str) -> bool:
    """Acknowledgements, greetings, laughter and emoji only ("好的，谢谢", "lol ok", "哈哈哈")."""
    squeezed = _NON_WORD_RE.sub("", text.lower())
    return not squeezed or _ACK_RE.fullmatch(squeezed) is not None


def _is_question(clause: str) -> bool:
    return bool(_QUESTION_RE.search(clause.strip())) and not _REQUEST_RE.search(clause)


def statement_text(text: str) -> str:
    """``text`` without its question clauses: "我住杭州，你呢？" states only "我住杭州，"."""
    return "".join(text[s:e] for s, e in clause_spans(text) if not _is_question(text[s:e]))


def question_text(text: str) -> str:
    """Only the question clauses of ``text``: "好呀，你有什么忌口吗？" asks "你有什么忌口吗？"."""
    return "".join(text[s:e] for s, e in clause_spans(text) if _is_question(text[s:e]))
