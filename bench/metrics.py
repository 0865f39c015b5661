"""Retrieval metrics for the LoCoMo benchmark. Pure: no I/O, no cuemem imports.

A system answers a question with a ranked list of :class:`Item` s. An item covers exactly the
dialogue turns (``dia_id`` s such as ``"D3:12"``) in its recorded sources: no credit is given for
neighbouring turns that no returned item contains. Its size is an estimate of the tokens it adds
to an LLM's context.

Two ways to cut a ranked list:

- **at k**: the first ``k`` items (fewer when the system returned fewer);
- **at a token budget** (see :func:`cut`): items are taken in rank order while the running
  total of their tokens stays within the budget. The first item that does not fit is skipped
  *and the cut stops there*: nothing ranked below it is taken, even a smaller item that would
  still fit. This rewards a system for putting compact, relevant items first and keeps the
  context a prefix of the ranking, as an agent filling its prompt top-down would.

Per question: ``recall_any`` (some evidence turn covered), ``recall_all`` (every evidence turn
covered) and ``fraction`` (share of the evidence turns covered), plus the tokens and the number
of items taken. Questions without (valid) evidence are counted and skipped for recall; their
context size still counts towards the mean tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

KS: tuple[int, ...] = (1, 5, 10, 20)
BUDGETS: tuple[int, ...] = (500, 1000, 2000)
CATEGORIES: tuple[int, ...] = (1, 2, 3, 4, 5)
CATEGORY_NAMES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
# Aggregate groups, as the benchmark README asks: each category, then 1-4 and 1-5 overall.
GROUPS: dict[str, tuple[int, ...]] = {
    **{str(c): (c,) for c in CATEGORIES},
    "1-4": (1, 2, 3, 4),
    "1-5": (1, 2, 3, 4, 5),
}

_SPLIT_RE = re.compile(r"[;,\s]+")
# "D11:26", and the two malformed spellings seen in the data: "D:11:26" and "D30:05".
_DIA_RE = re.compile(r"^D:?(\d+):(\d+)$")


# --- evidence ---------------------------------------------------------------------------------


def normalise_dia_id(raw: str) -> str | None:
    """``"D:11:26"`` -> ``"D11:26"``, ``"D30:05"`` -> ``"D30:5"``; ``None`` when not an id at all."""
    match = _DIA_RE.match(raw.strip())
    if match is None:
        return None
    return f"D{int(match.group(1))}:{int(match.group(2))}"


@dataclass(frozen=True)
class Evidence:
    """A question's evidence after parsing: the turns it names, and the ids that name no turn."""

    ids: tuple[str, ...]
    dropped: tuple[str, ...] = ()
    normalised: tuple[tuple[str, str], ...] = ()  # (as written, as used)


def parse_evidence(raw: Iterable[str], known: Iterable[str] | None = None) -> Evidence:
    """Split each evidence string on ``;``, ``,`` and whitespace, normalise, drop unknown ids.

    ``known`` is the set of the conversation's ``dia_id`` s: an id that parses but names no turn
    (``D10:19`` where session 10 has 18 turns) is dropped too. Duplicates are removed, the first
    occurrence's order is kept.
    """
    known_set = None if known is None else set(known)
    ids: dict[str, None] = {}
    dropped: list[str] = []
    normalised: list[tuple[str, str]] = []
    for entry in raw:
        for part in _SPLIT_RE.split(str(entry)):
            if not part:
                continue
            dia = normalise_dia_id(part)
            if dia is None or (known_set is not None and dia not in known_set):
                dropped.append(part)
                continue
            if dia != part:
                normalised.append((part, dia))
            ids.setdefault(dia, None)
    return Evidence(tuple(ids), tuple(dropped), tuple(normalised))


# --- one question -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One retrieved item: the turns it covers and its size in tokens."""

    dia_ids: frozenset[str]
    tokens: int


def cut(items: Sequence[Item], *, k: int | None = None, budget: int | None = None) -> list[Item]:
    """The items a reader gets: at most ``k``, and (with ``budget``) the longest rank-order prefix
    whose tokens sum to at most ``budget``; the first item that does not fit ends the cut."""
    taken: list[Item] = []
    used = 0
    for item in items if k is None else items[:k]:
        if budget is not None and used + item.tokens > budget:
            break
        taken.append(item)
        used += item.tokens
    return taken


@dataclass(frozen=True)
class Coverage:
    recall_any: float
    recall_all: float
    fraction: float


def coverage(evidence: Iterable[str], items: Iterable[Item]) -> Coverage | None:
    """How much of the evidence the items cover; ``None`` when there is no evidence."""
    wanted = set(evidence)
    if not wanted:
        return None
    covered = set().union(*(i.dia_ids for i in items)) & wanted
    return Coverage(
        recall_any=1.0 if covered else 0.0,
        recall_all=1.0 if covered == wanted else 0.0,
        fraction=len(covered) / len(wanted),
    )


@dataclass(frozen=True)
class Cut:
    """One cut of one question's ranking: its coverage (``None`` without evidence) and its size."""

    coverage: Coverage | None
    tokens: int
    items: int


def _cut(evidence: Sequence[str], items: Sequence[Item], k: int | None, budget: int | None) -> Cut:
    taken = cut(items, k=k, budget=budget)
    return Cut(coverage(evidence, taken), sum(i.tokens for i in taken), len(taken))


@dataclass(frozen=True)
class QuestionScore:
    category: int
    has_evidence: bool
    at_k: dict[int, Cut]
    at_budget: dict[int, Cut]
    # Extra cuts of (k, budget), e.g. the target "recall_all@10 within 1,000 tokens".
    at_k_budget: dict[tuple[int, int], Cut] = field(default_factory=dict)


def score_question(
    category: int,
    evidence: Sequence[str],
    items: Sequence[Item],
    *,
    ks: Sequence[int] = KS,
    budgets: Sequence[int] = BUDGETS,
    k_budgets: Sequence[tuple[int, int]] = ((10, 1000), (5, 1000)),
) -> QuestionScore:
    return QuestionScore(
        category=category,
        has_evidence=bool(evidence),
        at_k={k: _cut(evidence, items, k, None) for k in ks},
        at_budget={b: _cut(evidence, items, None, b) for b in budgets},
        at_k_budget={(k, b): _cut(evidence, items, k, b) for k, b in k_budgets},
    )


# --- aggregation ------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def _summarise(cuts: Sequence[Cut]) -> dict[str, Any]:
    scored = [c.coverage for c in cuts if c.coverage is not None]
    return {
        "recall_any": _mean([c.recall_any for c in scored]),
        "recall_all": _mean([c.recall_all for c in scored]),
        "fraction": _mean([c.fraction for c in scored]),
        "tokens": _mean([float(c.tokens) for c in cuts]),
        "items": _mean([float(c.items) for c in cuts]),
    }


def aggregate(
    scores: Sequence[QuestionScore], groups: Mapping[str, Sequence[int]] = GROUPS
) -> dict[str, dict[str, Any]]:
    """Per group of categories: counts, then the means of every cut.

    Recall means are over the questions with evidence (``scored``); token and item means are over
    every question asked (``questions``), since a question without evidence still fills a context.
    A group with no scored question has ``None`` recalls.
    """
    out: dict[str, dict[str, Any]] = {}
    # Every group gets the same cuts, an empty one too (with None means): its cuts are those of
    # any question scored (the benchmark scores every question with the same ones).
    first = scores[0] if scores else None
    for name, cats in groups.items():
        chosen = [s for s in scores if s.category in cats]
        out[name] = {
            "questions": len(chosen),
            "scored": sum(1 for s in chosen if s.has_evidence),
            "skipped_no_evidence": sum(1 for s in chosen if not s.has_evidence),
            "at_k": {str(k): _summarise([s.at_k[k] for s in chosen]) for k in (first.at_k if first else KS)},
            "at_budget": {
                str(b): _summarise([s.at_budget[b] for s in chosen])
                for b in (first.at_budget if first else BUDGETS)
            },
            "at_k_budget": {
                f"{k}@{b}": _summarise([s.at_k_budget[(k, b)] for s in chosen])
                for (k, b) in (first.at_k_budget if first else ())
            },
        }
    return out
