"""Tokens, keywords, token estimates and language detection for Chinese and English text.

Everything here is deterministic and does no I/O beyond jieba loading its bundled dictionary the
first time a Chinese run is segmented (one cached ``jieba.Tokenizer`` per process).
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from functools import lru_cache
from typing import Literal

import jieba

# CJK ideographs (basic, extension A, compatibility, extension B+). Kana and Hangul are not here:
# they are written with spaces or are out of scope, and the generic word pattern handles them.
CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
CJK_RE = re.compile(f"[{CJK_CLASS}]")

# A letter or digit that is not CJK: Python's ``re`` has no class subtraction, hence the lookahead.
_ALNUM = rf"(?:(?![{CJK_CLASS}])[^\W_])"
# One segment of text: a CJK run (segmented by jieba) or a word. Words keep inner apostrophes and
# codes joined by - _ . ("ORD-2023-1105", "v2.3.1", "max_retries") so jieba never sees them and
# nothing cuts an id in half.
_SEGMENT_RE = re.compile(rf"(?P<cjk>[{CJK_CLASS}]+)|(?P<word>{_ALNUM}+(?:['’]{_ALNUM}+)*(?:[-_.]{_ALNUM}+)*)")
# "1,000" is one number; drop the grouping commas before segmenting.
_DIGIT_GROUP_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DIGIT_RE = re.compile(r"\d")
_ASCII_WORD_RE = re.compile(r"[A-Za-z0-9]+")
_SYMBOL_RE = re.compile(rf"[^\w\s{CJK_CLASS}]")


def word_set(text: str) -> frozenset[str]:
    """A word list written as whitespace-separated text (easier to read and extend than a literal)."""
    return frozenset(text.split())


STOPWORDS_EN = word_set(
    """
    a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
    don't down during each few for from further had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into
    is isn't it it's its itself just let's me more most mustn't my myself no nor not now of off on
    once only or other ought our ours ourselves out over own same shan't she she'd she'll she's
    should shouldn't so some such than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those through to too under until up
    very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's
    which while who who's whom why why's will with won't would wouldn't you you'd you'll you're
    you've your yours yourself yourselves also really please ok okay yes yeah hi hello hey thanks
    thank lol oh um uh hmm well get got gonna wanna
    """
)

# Chinese function words, particles, pronouns and question words. Content words such as times
# ("明天") stay: they matter for tasks.
STOPWORDS_ZH = word_set(
    """
    的 了 吗 呢 吧 啊 呀 哦 嗯 啦 嘛 哎 诶 呃 哈 是 我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 这 那
    这个 那个 这些 那些 这里 那里 这样 那样 就 都 也 还 又 很 太 和 与 及 或 在 有 没 没有 不 被 把 给 让 对
    从 到 向 于 个 着 过 么 地 得 之 其 而 但 则 为 以 吗 什么 怎么 怎样 为什么 哪 哪里 哪个 多少 几 谁
    一个 一下 一些 一点 可以 能 会 要 想 就是 然后 但是 因为 所以 如果 虽然 还是 而且 并且 或者 已经
    好的 好 谢谢 哈哈 嗯嗯 我的 你的 他的 她的 自己 一直 真的 其实 比较 非常 特别 可能 应该 需要 现在
    上 下 里 中 去 来 说 做 看 等 才 再 更 最 只 每 各 某 该 此 啥 咋 怎 挺 蛮 超 将 跟 同 比 由 别 请 呗 哇
    """
)
STOPWORDS = STOPWORDS_EN | STOPWORDS_ZH


@lru_cache(maxsize=1)
def _tokenizer() -> jieba.Tokenizer:
    # jieba logs "Building prefix dict..." at DEBUG through its own logger; keep workers quiet.
    jieba.setLogLevel(logging.WARNING)
    return jieba.Tokenizer()


def load_segmenter() -> None:
    """Load jieba's dictionary now instead of on the first Chinese text: about a second of CPU
    alone, several seconds on a busy machine. A worker calls it before its pool forks
    (``workers/celery_app.py``), so that no child pays it inside its first task's time limit."""
    _tokenizer().check_initialized()


def _split_word(word: str) -> list[str]:
    """Normalise one non-CJK word; split plain hyphenated words but never codes or numbers."""
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):  # possessive: "caroline's" finds "caroline"
        word = word[:-2]
    if "-" in word and not _DIGIT_RE.search(word) and "_" not in word and "." not in word:
        return [part for part in word.split("-") if part]
    return [word] if word else []


def tokens(text: str) -> list[str]:
    """BM25 tokens: jieba search-mode words for Chinese runs, lower-cased words and codes otherwise.

    Search mode also yields the shorter dictionary words inside a long one ("喝咖啡" gives "咖啡"),
    so a query for the short word finds text with the long one; both sides use this function.
    """
    text = _DIGIT_GROUP_RE.sub("", unicodedata.normalize("NFKC", text))
    out: list[str] = []
    for match in _SEGMENT_RE.finditer(text):
        cjk = match.group("cjk")
        if cjk:
            out.extend(w for w in _tokenizer().cut_for_search(cjk) if w.strip())
        else:
            out.extend(_split_word(match.group("word")))
    return out


def keywords(text: str) -> list[str]:
    """Content tokens: no stopwords, no single letters, no duplicates; first occurrence order."""
    seen: dict[str, None] = {}
    for tok in tokens(text):
        if tok in STOPWORDS or tok in seen:
            continue
        if len(tok) == 1 and tok.isascii() and not tok.isdigit():
            continue  # a lone Latin letter is noise; lone CJK content words ("辣", "猫") stay

        seen[tok] = None
    return list(seen)


def cjk_count(text: str) -> int:
    return len(CJK_RE.findall(text))


def approx_token_count(text: str) -> int:
    """A cheap estimate of LLM tokens: ~1 per CJK character, ~1.3 per English word.

    Long ASCII runs (hashes, ids, long numbers) split into several tokens, about one per 4
    characters; punctuation counts half. Good enough for budgets, not for billing.
    """
    if not text or text.isspace():
        return 0
    estimate = float(cjk_count(text))
    non_cjk = CJK_RE.sub(" ", text)
    for word in _ASCII_WORD_RE.findall(non_cjk):
        estimate += 1.3 if len(word) <= 8 else len(word) / 4
    estimate += 0.5 * len(_SYMBOL_RE.findall(non_cjk))
    return max(1, math.ceil(estimate))


def detect_language(text: str) -> Literal["zh", "en"]:
    """ "zh" when CJK characters make up at least 30% of the text's word units.

    An English word counts as 1.5 units against one per CJK character, so Chinese sentences with
    English product names stay "zh" and English sentences quoting a Chinese name stay "en".
    """
    cjk = cjk_count(text)
    if cjk == 0:
        return "en"
    words = len(_ASCII_WORD_RE.findall(CJK_RE.sub(" ", text)))
    return "zh" if cjk / (cjk + 1.5 * words) >= 0.3 else "en"


_CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_ARABIC_RE = re.compile(r"[0-9]+")


def cn_number(text: str) -> int | None:
    """An integer written in ASCII digits or Chinese numerals below 10000, else None.

    "15" → 15, "十五" → 15, "二十三" → 23, "两" → 2, "一百零五" → 105, "二〇二六" → 2026.
    """
    text = text.strip()
    if _ARABIC_RE.fullmatch(text):
        return int(text)
    if not text or any(c not in _CN_DIGITS and c not in _CN_UNITS for c in text):
        return None
    if not any(c in _CN_UNITS for c in text):  # digit by digit: "二〇二六"
        return int("".join(str(_CN_DIGITS[c]) for c in text))
    total, current = 0, 0
    for c in text:
        if c in _CN_DIGITS:
            current = _CN_DIGITS[c]
        else:
            total += (current or 1) * _CN_UNITS[c]
            current = 0
    return total + current
