"""Slots: the attribute a memory is about ("profile:home", "skill:language:java"), from the
lexicon's slot rules (``shared.language.cues.load_lexicon``). Two memories with the same slot can be
compared, and the newer may replace the older (``shared.ingest.conflicts``); a query that names a
slot puts its current memory first (``shared.recall.slots``)."""

from __future__ import annotations

from collections.abc import Iterable

from shared.language.cues import LexiconHit, SlotRule, lexicon_hits, lexicon_tags, load_lexicon, normalise
from shared.language.links import own_text
from shared.models import MemoryType


def _slot_applies(rule: SlotRule, lowered: str, type_: MemoryType, tags: Iterable[str]) -> bool:
    if type_ not in rule.types:
        return False
    if rule.tags & set(tags) or any(w in lowered for w in rule.words):
        return True
    return rule.word_pattern is not None and rule.word_pattern.search(lowered) is not None


def _slot_key(rule: SlotRule, hits: list[LexiconHit], entities: Iterable[str]) -> str | None:
    """The first lexicon word tagged ``rule.key_tag`` (hits in text order, then entities), renamed."""
    lexicon = load_lexicon()
    words = [h.word for h in hits] + [e for e in entities if e in lexicon.entries]
    for word in words:
        if word not in rule.ignore and rule.key_tag in lexicon.entries[word][1]:
            return dict(rule.aliases).get(word, word)
    return None


def slot_for(
    text: str, type_: MemoryType, tags: Iterable[str] = (), entities: Iterable[str] = ()
) -> str | None:
    """The attribute a memory is about ("profile:home", "skill:language:java"), from the lexicon's
    slot rules, or None. Two memories with the same slot can be compared (one may replace the other).
    """
    whole = _SlotText(text, tuple(tags), tuple(entities))
    own: dict[bool, _SlotText | None] = {}
    for rule in load_lexicon().slots:
        read = whole
        if rule.slot.startswith("profile:"):
            # A profile slot is the user's own: a statement about their sister's wedding or a
            # colleague's new job must not replace what the user said of themselves, nor the
            # wife's job in "我老婆是老师，我们有一个女儿" stand for the user's.
            partner = rule.slot == "profile:relationship"
            if partner not in own:
                own[partner] = whole.own(partner)
            if (mine := own[partner]) is None:
                continue
            read = mine
        applies = _slot_applies(rule, read.lowered, type_, read.tags)
        if "{key}" not in rule.slot:
            if applies:
                return rule.slot
            continue
        if type_ not in rule.types:
            continue
        # A keyed rule also applies when only its key is there.
        key = _slot_key(rule, read.hits(), read.entities)
        if key is not None:
            return rule.slot.replace("{key}", key)
        if applies and rule.fallback:
            return rule.fallback
    return None


class _SlotText:
    """What the slot rules read of a text: its normalised words, tags, entities and lexicon hits."""

    def __init__(self, text: str, tags: tuple[str, ...], entities: tuple[str, ...]) -> None:
        self.text, self.tags, self.entities = text, tags, entities
        self.lowered = normalise(text)
        self._hits: list[LexiconHit] | None = None

    def hits(self) -> list[LexiconHit]:
        if self._hits is None:
            self._hits = lexicon_hits(self.text)
        return self._hits

    def own(self, partner_is_self: bool) -> _SlotText | None:
        """The clauses about the user (``links.own_text``), with the caller's tags and entities kept
        only where those clauses hold them; None when the text is all about someone else."""
        mine = own_text(self.text, partner_is_self)
        if not mine.strip():
            return None
        if mine == self.text:
            return self
        dropped = set(lexicon_tags(self.text)) - set(lexicon_tags(mine))
        tags = tuple(t for t in self.tags if t not in dropped)
        return _SlotText(mine, tags, tuple(e for e in self.entities if e.lower() in mine.lower()))
