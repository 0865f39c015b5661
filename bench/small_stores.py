"""`cuemem bench small-stores`: a LoCoMo-shaped file of small stores, one per question, made from
any LoCoMo-shaped file: what the relevance floor is measured on for a user who has said little.

Each question of the source becomes a sample of its own: the sessions that hold its evidence,
plus ``extra`` other sessions of the same sample drawn with ``random.Random(seed)``, and that one
question. A store is a few sessions (a MADial record is a session: a few statements; a LongMemEval
session: about ten long user turns), where the full file gives every question the whole history.

The no-answer protocol (``bench.no_answer``) asks each sample's questions of the next sample's
user. Two stores cut from one source sample are the same person, so the order is chosen for it:
consecutive questions of one source have disjoint evidence sessions (a question that cannot be
placed so is left out, and counted), and a store's extra sessions never include the previous
question's evidence. So nothing labelled as an answer is in the store a question is asked of as
a foreign question; a session that answers it without being labelled can be (MADial's records
are one user's life), which makes these foreign questions harder than another user's.

The output quotes the source's text: write it outside the repository (LoCoMo is CC BY-NC). The
order holds for the file as a whole: take a subset at the source (``--questions``), or, of the
stores, only where each source sample has one question (LongMemEval); a subset of a LoCoMo file's
stores (``ranker-features --sample-ids``) can make neighbours of two stores of one conversation.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.locomo_data import SESSION_KEY, LocomoDataError, parse_conversation

SUFFIX = "-q"  # sample id of a store: "<source sample id>-q<question number>"


@dataclass(frozen=True)
class _Asked:
    source: int  # index of the source sample
    number: int  # the question's position in the source's qa list
    sessions: frozenset[int]  # the sessions holding its evidence


def _questions(index: int, sample: dict[str, Any]) -> list[_Asked]:
    conv = parse_conversation(sample)
    session_of = {t.dia_id: t.session for t in conv.turns}
    return [
        _Asked(index, q.number, frozenset(session_of[d] for d in q.evidence.ids))
        for q in conv.questions
        if q.evidence.ids
    ]


def _chain(asked: Sequence[_Asked]) -> tuple[list[_Asked], int]:
    """``asked`` reordered so that no two neighbours (the last and the first included) are of one
    source with shared evidence sessions; greedy, in file order. Returns the order and how many
    were left out."""

    def clash(a: _Asked, b: _Asked) -> bool:
        return a.source == b.source and bool(a.sessions & b.sessions)

    pending = list(asked)
    order: list[_Asked] = []
    while pending:
        j = next((i for i, a in enumerate(pending) if not order or not clash(order[-1], a)), None)
        if j is None:
            break
        order.append(pending.pop(j))
    while len(order) > 1 and clash(order[-1], order[0]):
        order.pop()
    return order, len(asked) - len(order)


def _sessions(conv: dict[str, Any]) -> list[int]:
    return sorted(
        int(m.group(1))
        for key, value in conv.items()
        if (m := SESSION_KEY.match(key)) and isinstance(value, list)
    )


def small_stores(
    samples: Sequence[dict[str, Any]], extra: int, seed: int, questions: int | None = None
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The stores (LoCoMo-shaped samples) cut from ``samples``, and counts: ``questions`` kept,
    ``left_out`` (no place in the order), ``sessions`` in all."""
    if extra < 0:
        raise ValueError("extra: must be 0 or more")
    asked: list[_Asked] = []
    for index, source_sample in enumerate(samples):
        asked += _questions(index, source_sample)[:questions]
    order, left_out = _chain(asked)
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for position, q in enumerate(order):
        source = samples[q.source]
        conv = source["conversation"]
        before = order[position - 1]
        barred = q.sessions | (before.sessions if before.source == q.source else frozenset())
        others = [n for n in _sessions(conv) if n not in barred]
        kept = sorted(q.sessions | set(rng.sample(others, min(extra, len(others)))))
        store: dict[str, Any] = {k: conv[k] for k in ("speaker_a", "speaker_b") if k in conv}
        for n in kept:
            store[f"session_{n}"] = conv[f"session_{n}"]
            store[f"session_{n}_date_time"] = conv[f"session_{n}_date_time"]
        sample: dict[str, Any] = {
            "sample_id": f"{source['sample_id']}{SUFFIX}{q.number}",
            "conversation": store,
            "qa": [source["qa"][q.number]],
        }
        if "question_date" in source:
            sample["question_date"] = source["question_date"]
        out.append(sample)
    counts = {
        "questions": len(out),
        "left_out": left_out,
        "sessions": sum(len(_sessions(s["conversation"])) for s in out),
    }
    return out, counts


def write_small_stores(
    data: Path, out: Path, extra: int, seed: int, questions: int | None = None
) -> dict[str, int]:
    """Read ``data``, write the stores to ``out`` (JSON, atomically), return the counts."""
    try:
        raw = json.loads(data.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LocomoDataError(f"cannot read {data} as JSON: {exc}") from None
    if not isinstance(raw, list) or not raw:
        raise LocomoDataError(f"{data} must hold a non-empty JSON list of LoCoMo samples")
    stores, counts = small_stores(raw, extra, seed, questions)
    if not stores:
        raise LocomoDataError(f"{data}: no question with evidence to make a store of")
    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(stores, ensure_ascii=False), encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OSError(f"cannot write {out}: {exc.strerror or exc}") from None
    return counts
