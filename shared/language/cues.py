"""Cues: key entities, lexicon hits and the namespaced cue keys that exact-match recall compares.

A memory stores ``cues_for_memory(...)``; a query produces ``query_cues(q).keys()``. Both sides use
the same functions, so a cue matches when the same entity, topic tag or keyword appears in both.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from shared.language.lexicon import LexiconOverlay
from shared.language.lexicon import merge as merge_lexicon
from shared.language.links import Link, find_links
from shared.language.text import CJK_RE, STOPWORDS, STOPWORDS_EN, keywords, word_set
from shared.models import MemoryType

MAX_KEYWORD_CUES = 32
ENTITY_WEIGHT = 3.0
TAG_WEIGHT = 1.5
KEYWORD_WEIGHT = 1.0

# ASCII-only edges: Python's \b treats CJK as word characters, so "端口是8443" has no \b before 8.
_L = r"(?<![A-Za-z0-9])"
_R = r"(?![A-Za-z0-9])"

_URL_RE = re.compile(r"(?:https?://|www\.)[^\s<>\"'，。！？、；：（）「」『』《》“”]+", re.IGNORECASE)
_EMAIL_RE = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_DATE_RE = re.compile(r"(?<!\d)(\d{4})(?:[-/.](\d{1,2})[-/.](\d{1,2})|年(\d{1,2})月(\d{1,2})[日号]?)(?!\d)")
_AMOUNT = r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_MONEY_PREFIX_RE = re.compile(
    rf"(?:([¥￥$€£])|{_L}(RMB|CNY|USD|EUR|GBP)(?![A-Za-z]))\s?{_AMOUNT}", re.IGNORECASE
)
_MONEY_SUFFIX_RE = re.compile(
    rf"(?<![\d.,]){_AMOUNT}\s?(元|块钱|块|人民币|美元|美金|欧元|英镑|(?:dollars?|bucks|usd|rmb|yuan|euros?|cny){_R})",
    re.IGNORECASE,
)
_CURRENCY = {"¥": "¥", "￥": "¥", "rmb": "¥", "cny": "¥", "元": "¥", "块": "¥", "块钱": "¥", "人民币": "¥"}
_CURRENCY |= {"yuan": "¥", "$": "$", "usd": "$", "dollar": "$", "dollars": "$", "bucks": "$", "美元": "$"}
_CURRENCY |= {"美金": "$", "€": "€", "eur": "€", "euro": "€", "euros": "€", "欧元": "€", "£": "£", "gbp": "£"}
_CURRENCY |= {"英镑": "£"}
# Ids: letters, then hyphen/underscore-joined parts with digits (ORD-2023-1105, JIRA-42), digit
# groups (138-1234-5678) and "#12345" ticket references.
_ID_RE = re.compile(rf"{_L}[A-Za-z]{{1,10}}(?:[-_][A-Za-z0-9]+)*[-_]\d[A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*{_R}")
_DIGIT_ID_RE = re.compile(r"(?<![\w-])\d{3,}(?:-\d{2,})+(?![\w-])")
_HASH_ID_RE = re.compile(r"#(\d{3,})(?!\d)")
# Codes mix letters and digits: X200, E42, iPhone15, v2.3.1, RTX4090.
_CODE_RE = re.compile(
    rf"{_L}(?=[A-Za-z0-9._-]*[A-Za-z])(?=[A-Za-z0-9._-]*\d)[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*{_R}"
)
# "3pm", "2nd", "500ms", "16GB" are quantities, not codes; a 3+ digit quantity keeps its number.
_UNIT_RE = re.compile(
    r"^(\d+)(?:\.\d+)?(?:st|nd|rd|th|am|pm|k|m|g|kg|km|cm|mm|ml|l|gb|mb|kb|tb|ms|s|h|hr|hrs|min|mins|x|px"
    r"|fps|hz|ghz|mhz|w|kw|v|mah|p|d|y|yo|yr|yrs)$"
)
_NUMBER_RE = re.compile(r"(?<![A-Za-z0-9.,])(?:\d{1,3}(?:,\d{3})+|\d{3,})(?:\.\d+)?(?![A-Za-z0-9])")
_ACRONYM_RE = re.compile(rf"{_L}[A-Z]{{2,6}}{_R}")
# "Caroline", "McDonald"; never the "Don" of "Don't" (a contraction is not a name).
_CAP = r"[A-Z][a-z]+(?:[A-Z][a-z]+)*(?![A-Za-z])(?!['’](?:t|re|ll|ve|m|d)\b)"
# Names may hold a lower-case particle between capitalised words: "Statue of Liberty".
_NAME_RE = re.compile(
    rf"(?<![A-Za-z0-9'’]){_CAP}(?:[ \t]+(?:(?:of|de|van|von|da|del|la|le|the)[ \t]+)?{_CAP})*"
)
_QUOTED_RE = re.compile(r"「([^」]{1,20})」|『([^』]{1,20})』|“([^”]{1,20})”|《([^》]{1,30})》")
_SENTENCE_OPENERS = frozenset('.!?。！？\n:：;；"“「(（')
_QUOTE_BREAK_RE = re.compile(r"[，,。.!！?？]")

_NOT_ACRONYMS = word_set("OK LOL BTW OMG TODO FYI ASAP AM PM THE AND IDK TBH IMO IMHO THX PLS NO YES HI")
# Capitalised words that start sentences or greet; never names on their own.
_COMMON_WORDS = word_set(
    """
    the a an my our your his her their its this that these those i i'm i've i'd i'll we you he she it
    they there here if then because since after before while when where what why how who which whose
    yesterday today tomorrow tonight please remind thanks thank sorry well so but also maybe actually
    just let let's can could would should will shall may might must do does did don't hey hi hello
    yes no ok okay sure great cool nice good oh um anyway btw lol sounds got last next every and or
    not never always once is are was were be been have has had hope wow yeah yep nope dear kind best
    regards cheers morning evening night afternoon welcome congratulations happy remember note tell
    send call check make take give book find show help go stop keep try use look see add set put ask buy
    pay sorry thx ty wait sure true
    """
)
_DETERMINERS = word_set("the a an my our your his her their this that")
# Day and month names are times (shared.language.timeexpr resolves them), not names; May, June and August
# are also first names and stay.
_CALENDAR_WORDS = word_set(
    """
    monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays
    fridays saturdays sundays january february march april july september october november december
    """
)


@dataclass(frozen=True)
class Entity:
    value: str  # normalised, lower-case
    kind: str  # url | email | date | money | id | code | number | quoted | acronym | name
    start: int


@dataclass(frozen=True)
class LexiconHit:
    word: str
    type_hint: MemoryType | None
    tags: tuple[str, ...]


@dataclass(frozen=True)
class SlotRule:
    """One lexicon rule naming the attribute a memory is about (see "slots_about" in the lexicon)."""

    slot: str  # may hold "{key}"
    types: frozenset[MemoryType]
    tags: frozenset[str] = frozenset()
    words: tuple[str, ...] = ()
    word_pattern: re.Pattern[str] | None = None  # the English words, on word boundaries
    key_tag: str | None = None
    aliases: tuple[tuple[str, str], ...] = ()
    ignore: frozenset[str] = frozenset()
    fallback: str | None = None


@dataclass(frozen=True)
class Lexicon:
    entries: dict[str, tuple[MemoryType | None, tuple[str, ...]]]
    english: re.Pattern[str] | None
    chinese: tuple[str, ...]
    common_words: frozenset[str]  # English sentence starters that are never names on their own
    slots: tuple[SlotRule, ...] = ()
    interest_tags: frozenset[str] = frozenset()  # topics a user follows: questions about them are kept


class _Spans:
    """Character ranges already claimed by a stronger entity pattern (sorted, never overlapping)."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def claim(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self._starts, start)
        if (i > 0 and self._ends[i - 1] > start) or (i < len(self._starts) and self._starts[i] < end):
            return False
        self._starts.insert(i, start)
        self._ends.insert(i, end)
        return True


def _amount(raw: str) -> str:
    return raw.replace(",", "")


def _date(m: re.Match[str]) -> str | None:
    month, day = (m.group(2), m.group(3)) if m.group(2) else (m.group(4), m.group(5))
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
        return None
    return f"{m.group(1)}-{int(month):02d}-{int(day):02d}"


def _money(m: re.Match[str], prefix: bool) -> str:
    unit = (m.group(1) or m.group(2)) if prefix else m.group(2)
    amount = m.group(3) if prefix else m.group(1)
    return f"{_CURRENCY.get(unit.lower(), unit.lower())}{_amount(amount)}"


def _at_sentence_start(text: str, index: int) -> bool:
    """Whether only spaces stand between ``index`` and the text start or a sentence opener."""
    i = index - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_OPENERS


@lru_cache(maxsize=1)
def _sentence_start_words() -> frozenset[str]:
    lexicon = load_lexicon()
    return _COMMON_WORDS | STOPWORDS_EN | lexicon.common_words | frozenset(lexicon.entries)


def _name(text: str, m: re.Match[str]) -> str | None:
    """The name in a run of capitalised words, or None when it is only grammar capitalisation."""
    words = m.group(0).split()
    sentence_start = _at_sentence_start(text, m.start())
    # Greetings, pronouns and determiners are never part of a name ("Thanks John", "The Louvre").
    drop = _COMMON_WORDS | STOPWORDS_EN if sentence_start else _DETERMINERS
    stripped = 0
    while stripped < len(words) and words[stripped].lower() in drop:
        stripped += 1
    words = words[stripped:]
    if not words or (len(words) == 1 and words[0].lower() in _CALENDAR_WORDS):
        return None
    if len(words) == 1:
        # A lone word that opens a sentence is capitalised by grammar when it is a common word
        # ("Due", "Meeting"); mid-sentence, "Starbucks" or "English" is a proper noun.
        common = _sentence_start_words() if sentence_start and not stripped else _COMMON_WORDS | STOPWORDS_EN
        if words[0].lower() in common:
            return None
    return " ".join(words)


def _candidates(text: str) -> Iterable[tuple[int, int, str, str | None]]:
    """(start, end, kind, value) in priority order; value None means "skip, but claim the span"."""
    for m in _URL_RE.finditer(text):
        url = m.group(0).rstrip(".,;:!?)]}'\"")
        yield m.start(), m.start() + len(url), "url", url
    for m in _EMAIL_RE.finditer(text):
        yield m.start(), m.end(), "email", m.group(0)
    for m in _DATE_RE.finditer(text):
        yield m.start(), m.end(), "date", _date(m)
    for m in _MONEY_PREFIX_RE.finditer(text):
        yield m.start(), m.end(), "money", _money(m, prefix=True)
    for m in _MONEY_SUFFIX_RE.finditer(text):
        yield m.start(), m.end(), "money", _money(m, prefix=False)
    for pattern in (_ID_RE, _DIGIT_ID_RE):
        for m in pattern.finditer(text):
            yield m.start(), m.end(), "id", m.group(0)
    for m in _HASH_ID_RE.finditer(text):
        yield m.start(), m.end(), "id", m.group(1)
    for m in _CODE_RE.finditer(text):
        unit = _UNIT_RE.match(m.group(0).lower())
        if unit is None:
            yield m.start(), m.end(), "code", m.group(0)
        else:
            yield m.start(), m.end(), "number", unit.group(1) if len(unit.group(1)) >= 3 else None
    for m in _NUMBER_RE.finditer(text):
        yield m.start(), m.end(), "number", _amount(m.group(0))
    letters = [c for c in text if c.isascii() and c.isalpha()]
    if sum(c.isupper() for c in letters) * 2 <= len(letters):  # not shouting in capitals
        for m in _ACRONYM_RE.finditer(text):
            if m.group(0) not in _NOT_ACRONYMS:
                yield m.start(), m.end(), "acronym", m.group(0)
    for m in _NAME_RE.finditer(text):
        yield m.start(), m.end(), "name", _name(text, m)


def find_entities(text: str) -> list[Entity]:
    """Key entities with their kind, in order of appearance (first occurrence of each value)."""
    spans = _Spans()
    found: list[tuple[int, int, Entity]] = []
    rank = 0
    for start, end, kind, value in _candidates(text):
        if not spans.claim(start, end) or value is None:
            continue
        rank += 1
        found.append((start, rank, Entity(value.lower(), kind, start)))
        if kind == "money":  # "300元" should also match a later bare "300"
            number = re.sub(r"^\D+", "", value).split(".")[0]
            if len(number) >= 3:
                found.append((start, rank, Entity(number, "number", start)))
    # Quoted titles never claim a span: 《X200 手册》 yields both "x200" and the title.
    for m in _QUOTED_RE.finditer(text):
        inner = next(g for g in m.groups() if g is not None).strip()
        if inner and inner not in STOPWORDS and not _QUOTE_BREAK_RE.search(inner):
            found.append((m.start(), 0, Entity(inner.lower(), "quoted", m.start())))
    found.sort(key=lambda item: (item[0], item[1]))
    seen: dict[str, Entity] = {}
    for _, _, entity in found:
        seen.setdefault(entity.value, entity)
    return list(seen.values())


def entities(text: str) -> tuple[str, ...]:
    """Normalised (lower-case) key entities of ``text``, deduplicated, in order of appearance."""
    return tuple(e.value for e in find_entities(text))


def _english_pattern(words: Iterable[str]) -> re.Pattern[str] | None:
    english = sorted((w for w in words if not CJK_RE.search(w)), key=lambda w: (-len(w), w))
    alternation = "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in english)
    return re.compile(rf"(?<![a-z0-9'’])(?:{alternation})(?![a-z0-9])") if english else None


_DEFAULT_SLOT_TYPES = frozenset({MemoryType.PREFERENCE, MemoryType.PROFILE, MemoryType.FACT})


def _parse_slot(raw: dict[str, Any]) -> SlotRule:
    words = tuple(str(w).strip().lower() for w in raw.get("words", ()))
    types = raw.get("types")
    return SlotRule(
        slot=str(raw["slot"]),
        types=frozenset(MemoryType(t) for t in types) if types else _DEFAULT_SLOT_TYPES,
        tags=frozenset(str(t) for t in raw.get("tags", ())),
        words=tuple(w for w in words if CJK_RE.search(w)),
        word_pattern=_english_pattern(words),
        key_tag=raw.get("key_tag"),
        aliases=tuple((str(k).lower(), str(v)) for k, v in raw.get("aliases", {}).items()),
        ignore=frozenset(str(w).lower() for w in raw.get("ignore", ())),
        fallback=raw.get("fallback"),
    )


def _parse_lexicon(data: dict[str, Any]) -> Lexicon:
    merged: dict[str, tuple[MemoryType | None, tuple[str, ...]]] = {}
    for entry in data["entries"]:
        type_hint = MemoryType(entry["type"]) if entry.get("type") else None
        tags = tuple(str(t) for t in entry.get("tags", ()))
        for raw in entry["words"]:
            word = str(raw).strip().lower()
            if CJK_RE.search(word) and len(word) < 2:
                raise ValueError(f"cue lexicon: Chinese word {word!r} must have 2+ characters")
            old_type, old_tags = merged.get(word, (None, ()))
            merged[word] = (old_type or type_hint, tuple(dict.fromkeys(old_tags + tags)))
    chinese = tuple(sorted((w for w in merged if CJK_RE.search(w)), key=lambda w: (-len(w), w)))
    common = frozenset(str(w).lower() for w in data.get("common_words", ()))
    slots = tuple(_parse_slot(raw) for raw in data.get("slots", ()))
    interest = frozenset(str(t) for t in data.get("interest_tags", ()))
    return Lexicon(merged, _english_pattern(merged), chinese, common, slots, interest)


@lru_cache(maxsize=1)
def shipped_lexicon_data() -> dict[str, Any]:
    """The bundled cue lexicon's data (shared/data/cue_lexicon.json), read once per process."""
    raw = resources.files("shared").joinpath("data/cue_lexicon.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(raw)
    return data


@lru_cache(maxsize=1)
def _shipped_lexicon() -> Lexicon:
    return _parse_lexicon(shipped_lexicon_data())


# The lexicon installed by configure(); None means the shipped one. Process-wide on purpose: the
# composition root installs it once per process, before any text is analysed, and every caller of
# this module (extraction, recall, benchmarks) must then see the same words.
_configured: Lexicon | None = None


def load_lexicon() -> Lexicon:
    """The cue lexicon in force: the shipped one, or the one :func:`configure` installed."""
    return _configured if _configured is not None else _shipped_lexicon()


def configure(overlays: Sequence[LexiconOverlay] = ()) -> Lexicon:
    """Install the shipped lexicon merged with user ``overlays`` (``shared.language.lexicon.parse_overlay``
    results, in file order) for this process, and return it. No overlays: back to the shipped one.

    The composition root (``workers.bootstrap``) calls this with the files of
    ``CUEMEM_LEXICON_PATHS``; this module never reads user files itself.
    """
    global _configured
    lexicon = _parse_lexicon(merge_lexicon(shipped_lexicon_data(), overlays)) if overlays else None
    _configured = lexicon
    _sentence_start_words.cache_clear()  # derived from the lexicon's words
    text_cues.cache_clear()  # so are the tags of a text
    return load_lexicon()


def lexicon_hits(text: str) -> list[LexiconHit]:
    """Lexicon words found in ``text``, in order of first appearance, each word once."""
    lexicon = load_lexicon()
    lowered = normalise(text)
    positions: list[tuple[int, str]] = []
    if lexicon.english is not None:
        positions += [(m.start(), re.sub(r"\s+", " ", m.group(0))) for m in lexicon.english.finditer(lowered)]
    positions += [(lowered.find(w), w) for w in lexicon.chinese if w in lowered]
    hits: dict[str, LexiconHit] = {}
    for _, word in sorted(positions):
        type_hint, tags = lexicon.entries[word]
        hits.setdefault(word, LexiconHit(word, type_hint, tags))
    return list(hits.values())


def lexicon_tags(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(tag for hit in lexicon_hits(text) for tag in hit.tags))


# Cached by text: recall reads the cue keys of the working memory's turns on every query of a
# conversation (they change by a turn or two between queries) and of every short candidate text
# (the filler check). Cleared by ``configure``, since the tags come from the lexicon.
@lru_cache(maxsize=4096)
def text_cues(text: str) -> tuple[str, ...]:
    """A text's cue keys as extraction stores them with the memory made of it."""
    return cues_for_memory(text, lexicon_tags(text), entities(text))


def normalise(text: str) -> str:
    """Lower case, with a typographic apostrophe read as "'" (what lexicon words are matched on)."""
    return text.lower().replace("’", "'")


def interest_tag(tags: Iterable[str]) -> str | None:
    """The first of ``tags`` that the lexicon lists as a topic users follow ("finance"), or None."""
    interest = load_lexicon().interest_tags
    return next((t for t in tags if t in interest), None)


def links(text: str) -> tuple[Link, ...]:
    """The naming links of ``text`` (``shared.language.links``) whose name is a name, not a lexicon or
    common word ("我儿子是程序员", "Thanks, my friend")."""
    lexicon = load_lexicon()
    common = _COMMON_WORDS | STOPWORDS_EN | lexicon.common_words
    return tuple(
        link for link in find_links(text) if link.name not in lexicon.entries and link.name not in common
    )


def cues_for_memory(content: str, tags: Iterable[str], entities: Iterable[str]) -> tuple[str, ...]:
    """The cue keys stored with a memory: ``e:<entity>``, ``t:<tag>``, ``k:<keyword>``, and
    ``l:<side>`` for both sides of each naming link it states (recall's second cue hop)."""
    keys = [f"e:{e.strip().lower()}" for e in entities if e.strip()]
    keys += [f"t:{t.strip().lower()}" for t in tags if t.strip()]
    keys += [f"k:{k}" for k in keywords(content)[:MAX_KEYWORD_CUES]]
    keys += [key for link in links(content) for key in link.cue_keys()]
    return tuple(dict.fromkeys(keys))


@dataclass(frozen=True)
class QueryCues:
    entities: tuple[str, ...]
    tags: tuple[str, ...]
    type_hints: tuple[MemoryType, ...]
    keywords: tuple[str, ...]

    def keys(self) -> dict[str, float]:
        """Namespaced cue keys with their weight, to compare against stored memory cues."""
        weighted = [(f"e:{e}", ENTITY_WEIGHT) for e in self.entities]
        weighted += [(f"t:{t}", TAG_WEIGHT) for t in self.tags]
        weighted += [(f"k:{k}", KEYWORD_WEIGHT) for k in self.keywords]
        out: dict[str, float] = {}
        for key, weight in weighted:
            out.setdefault(key, weight)
        return out


def query_cues(query: str) -> QueryCues:
    hits = lexicon_hits(query)
    return QueryCues(
        entities=entities(query),
        tags=tuple(dict.fromkeys(tag for hit in hits for tag in hit.tags)),
        type_hints=tuple(dict.fromkeys(hit.type_hint for hit in hits if hit.type_hint is not None)),
        keywords=tuple(keywords(query)[:MAX_KEYWORD_CUES]),
    )
