"""User cue lexicons: validating a user's additions and merging them over the shipped lexicon.

The shipped lexicon is package data (``shared/data/cue_lexicon.json``, read by ``shared.language.cues``).
Users extend or override it without code through files named by ``CUEMEM_LEXICON_PATHS``. Reading
those files is I/O and happens in the composition root (``workers/lexicon.py``); this module only
sees the parsed mapping, so it stays pure and is tested without files.

One file's shape (TOML shown; a YAML mapping of the same shape works too)::

    version = 1
    remove = ["口味"]                      # words dropped from the lexicon entirely
    interest_tags = ["pets"]              # topics users follow (questions about them are kept)
    common_words = ["Due"]                # sentence starters that are never names on their own

    [tags.diet]                           # add words to a shipped tag
    words = ["过敏原", "allergen"]          # type left out: the type the tag's words share (preference)
    remove = ["diet"]                     # drop shipped words from this tag only

    [tags.pets]                           # a new tag with its type
    type = "profile"
    words = ["猫粮", "cat food"]

    [[slots]]                             # slot rules, tried before the shipped ones
    slot = "profile:pet"
    types = ["profile"]
    tags = ["pets"]

Merge rules, file by file in the order given: a file's removals apply first (to the shipped words
and earlier files), then its additions. An added word keeps the tags it already had and gains the
new one; a given ``type`` replaces the word's type. A word left with no tag by a per-tag removal
is dropped. Errors name the file, the key and the problem (:class:`LexiconError`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.language.text import CJK_RE
from shared.models import MemoryType

SUPPORTED_VERSION = 1
_TOP_KEYS = ("version", "remove", "interest_tags", "common_words", "tags", "slots")
_TAG_KEYS = ("type", "words", "remove")
_SLOT_KEYS = ("slot", "types", "tags", "words", "key_tag", "aliases", "ignore", "fallback")
# Tags end up in cue keys ("t:diet") and in explanations; keep them one readable token.
_TAG_RE = re.compile(r"^[^\s:]+$")
_TYPES = ", ".join(t.value for t in MemoryType)

WordMap = dict[str, tuple[MemoryType | None, tuple[str, ...]]]


class LexiconError(ValueError):
    """A user lexicon file is unusable: ``source`` (the file), ``key`` (where in it), ``problem``."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        where = f"{source}: {key}" if key else source
        super().__init__(f"cue lexicon {where}: {problem}")


@dataclass(frozen=True)
class TagWords:
    """Words added to (or removed from) one tag. ``type_given`` False: inherit the tag's type."""

    tag: str
    type_hint: MemoryType | None
    type_given: bool
    words: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()


@dataclass(frozen=True)
class LexiconOverlay:
    """One user file, validated. ``slots`` are raw rules of the shipped lexicon's shape."""

    source: str
    tags: tuple[TagWords, ...] = ()
    remove: tuple[str, ...] = ()
    interest_tags: tuple[str, ...] = ()
    common_words: tuple[str, ...] = ()
    slots: tuple[dict[str, Any], ...] = ()


# --- validation -----------------------------------------------------------------------------------


def _describe(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def _string(value: object, source: str, key: str) -> str:
    if not isinstance(value, str):
        raise LexiconError(source, key, f"not a string (got {_describe(value)})")
    if not value.strip():
        raise LexiconError(source, key, "empty string")
    return value.strip()


def _strings(value: object, source: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise LexiconError(source, key, f"must be a list of strings (got {_describe(value)})")
    return tuple(_string(item, source, f"{key}[{i}]") for i, item in enumerate(value))


def _words(value: object, source: str, key: str) -> tuple[str, ...]:
    words = _strings(value, source, key)
    for i, word in enumerate(words):
        # Chinese words match as substrings: a single character would match nearly everything.
        if CJK_RE.search(word) and len(word) < 2:
            raise LexiconError(source, f"{key}[{i}]", f"Chinese word {word!r} must have 2+ characters")
    return tuple(w.lower() for w in words)


def _memory_type(value: object, source: str, key: str) -> MemoryType:
    text = _string(value, source, key)
    try:
        return MemoryType(text)
    except ValueError:
        raise LexiconError(source, key, f"unknown type {text!r} (one of {_TYPES})") from None


def _table(value: object, source: str, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise LexiconError(source, key, f"must be a table (got {_describe(value)})")
    return value


def _check_keys(table: Mapping[str, Any], allowed: Sequence[str], source: str, prefix: str) -> None:
    for name in table:
        if name not in allowed and not str(name).endswith("about"):  # "*_about" keys are comments
            where = f"{prefix}.{name}" if prefix else str(name)
            raise LexiconError(source, where, f"unknown key (expected one of {', '.join(allowed)})")


def _tag_name(name: object, source: str, key: str) -> str:
    tag = _string(name, source, key).lower()
    if not _TAG_RE.match(tag):
        raise LexiconError(source, key, f"tag {tag!r} must be one word without spaces or ':'")
    return tag


def _tag_words(name: str, raw: object, source: str) -> TagWords:
    key = f"tags.{name}"
    tag = _tag_name(name, source, key)
    table = _table(raw, source, key)
    _check_keys(table, _TAG_KEYS, source, key)
    given = "type" in table
    type_hint = _memory_type(table["type"], source, f"{key}.type") if given else None
    words = _words(table.get("words", []), source, f"{key}.words")
    remove = _words(table.get("remove", []), source, f"{key}.remove")
    if not words and not remove:
        raise LexiconError(source, key, "has neither words nor remove")
    return TagWords(tag, type_hint, given, words, remove)


def _slot(raw: object, source: str, key: str) -> dict[str, Any]:
    table = _table(raw, source, key)
    _check_keys(table, _SLOT_KEYS, source, key)
    if "slot" not in table:
        raise LexiconError(source, f"{key}.slot", "missing (every slot rule needs its slot key)")
    rule: dict[str, Any] = {"slot": _string(table["slot"], source, f"{key}.slot")}
    if "types" in table:
        types = table["types"]
        if not isinstance(types, list) or not types:
            raise LexiconError(source, f"{key}.types", "must be a non-empty list of memory types")
        rule["types"] = [_memory_type(t, source, f"{key}.types[{i}]").value for i, t in enumerate(types)]
    if "tags" in table:
        tags = _strings(table["tags"], source, f"{key}.tags")
        rule["tags"] = [_tag_name(t, source, f"{key}.tags[{i}]") for i, t in enumerate(tags)]
    for name in ("words", "ignore"):
        if name in table:
            rule[name] = list(_words(table[name], source, f"{key}.{name}"))
    for name in ("key_tag", "fallback"):
        if name in table:
            rule[name] = _string(table[name], source, f"{key}.{name}")
    if "aliases" in table:
        aliases = _table(table["aliases"], source, f"{key}.aliases")
        rule["aliases"] = {
            _string(k, source, f"{key}.aliases"): _string(v, source, f"{key}.aliases.{k}")
            for k, v in aliases.items()
        }
    if "{key}" in rule["slot"] and "key_tag" not in rule:
        raise LexiconError(source, f"{key}.key_tag", "missing: a slot with {key} needs a key_tag")
    if "{key}" not in rule["slot"] and not (rule.get("tags") or rule.get("words")):
        raise LexiconError(source, key, "needs tags or words saying when the rule applies")
    return rule


def parse_overlay(data: object, source: str) -> LexiconOverlay:
    """Validate one user file's parsed content; raises :class:`LexiconError` naming ``source``."""
    table = _table(data, source, "")
    _check_keys(table, _TOP_KEYS, source, "")
    version = table.get("version", SUPPORTED_VERSION)
    if version != SUPPORTED_VERSION or isinstance(version, bool):
        raise LexiconError(source, "version", f"unsupported version {version!r} (this cuemem reads 1)")
    tags = _table(table.get("tags", {}), source, "tags")
    slots = table.get("slots", [])
    if not isinstance(slots, list):
        raise LexiconError(source, "slots", f"must be a list of tables (got {_describe(slots)})")
    interest = _strings(table.get("interest_tags", []), source, "interest_tags")
    return LexiconOverlay(
        source=source,
        tags=tuple(_tag_words(str(name), raw, source) for name, raw in tags.items()),
        remove=_words(table.get("remove", []), source, "remove"),
        interest_tags=tuple(_tag_name(t, source, f"interest_tags[{i}]") for i, t in enumerate(interest)),
        common_words=_words(table.get("common_words", []), source, "common_words"),
        slots=tuple(_slot(raw, source, f"slots[{i}]") for i, raw in enumerate(slots)),
    )


# --- merging --------------------------------------------------------------------------------------


def word_map(entries: Iterable[Mapping[str, Any]]) -> WordMap:
    """word -> (type, tags) from lexicon entries; a word in several entries keeps its first type
    and the union of its tags (the shipped lexicon's own rule)."""
    merged: WordMap = {}
    for entry in entries:
        type_hint = MemoryType(entry["type"]) if entry.get("type") else None
        tags = tuple(str(t) for t in entry.get("tags", ()))
        for raw in entry["words"]:
            word = str(raw).strip().lower()
            old_type, old_tags = merged.get(word, (None, ()))
            merged[word] = (old_type or type_hint, tuple(dict.fromkeys(old_tags + tags)))
    return merged


def _tag_type(words: WordMap, tag: str) -> MemoryType | None:
    """The type every word of ``tag`` shares, or None (no word, or words of different types)."""
    types = {type_hint for type_hint, tags in words.values() if tag in tags}
    return types.pop() if len(types) == 1 else None


def _apply(words: WordMap, overlay: LexiconOverlay) -> None:
    for word in overlay.remove:
        words.pop(word, None)
    for change in overlay.tags:
        for word in change.remove:
            if word in words and change.tag in words[word][1]:
                type_hint, tags = words[word]
                kept = tuple(t for t in tags if t != change.tag)
                if kept:
                    words[word] = (type_hint, kept)
                else:  # a word with no tag left no longer stands for anything the user kept
                    del words[word]
    for change in overlay.tags:
        type_hint = change.type_hint if change.type_given else _tag_type(words, change.tag)
        for word in change.words:
            old_type, old_tags = words.get(word, (None, ()))
            words[word] = (type_hint or old_type, tuple(dict.fromkeys((*old_tags, change.tag))))


def merge(shipped: Mapping[str, Any], overlays: Sequence[LexiconOverlay]) -> dict[str, Any]:
    """The shipped lexicon's data with ``overlays`` applied in order, in the shipped shape
    (``entries``, ``common_words``, ``interest_tags``, ``slots``), ready for ``shared.language.cues``."""
    words = word_map(shipped["entries"])
    common = list(shipped.get("common_words", ()))
    interest = list(shipped.get("interest_tags", ()))
    slots = list(shipped.get("slots", ()))
    for overlay in overlays:
        _apply(words, overlay)
        common += overlay.common_words
        interest += overlay.interest_tags
        # Slot rules are tried in order and the first that applies wins: a user's rule (and a
        # later file's) must come first to be able to override a shipped one.
        slots = [*overlay.slots, *slots]
    entries = [
        {"type": type_hint.value if type_hint else None, "tags": list(tags), "words": [word]}
        for word, (type_hint, tags) in words.items()
    ]
    return {
        **shipped,
        "entries": entries,
        "common_words": list(dict.fromkeys(common)),
        "interest_tags": list(dict.fromkeys(interest)),
        "slots": slots,
    }
