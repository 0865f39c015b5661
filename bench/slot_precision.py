"""Which of LoCoMo's user statements the slot-by-meaning step (``shared.ingest.slot_meaning``)
gives a slot, for reading by hand: its precision on real conversation text.

``python -m bench.slot_precision LOCOMO_JSON [--seed N] [--turns N]`` samples ``--turns`` turns
(shuffled with ``--seed``), extracts their drafts with the rules, keeps the profile and fact
drafts the slot words left without a slot (the step's input, ``shared.ingest.embed``), and
prints how many the gate (:func:`gives_a_value`) lets through, and which slot the meaning gives
each (with the gate and, for comparison, without it). Uses the bundled E5 model.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from shared.events import Role, TurnPublished
from shared.ingest.embed import meaning_slot, meaning_text
from shared.ingest.extraction import extract
from shared.ingest.slot_meaning import gives_a_value, prototypes, slot_by_meaning
from shared.models import MemoryType
from shared.settings import Settings
from workers.endpoints.embedders import build_embedder

AT = datetime(2023, 5, 1, tzinfo=UTC)


def _turns(path: Path) -> list[str]:
    texts: list[str] = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                texts += [t["text"] for t in session if t.get("text")]
    return texts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("locomo", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--turns", type=int, default=1500)
    args = parser.parse_args(argv)
    turns = _turns(args.locomo)
    random.Random(args.seed).shuffle(turns)
    drafts: list[str] = []
    for i, text in enumerate(turns[: args.turns]):
        event = TurnPublished(f"e{i}", "t", "u", "s", 1, Role.USER, text, AT, {})
        drafts += [
            d.content
            for d in extract(event).drafts
            if d.slot is None and d.type in (MemoryType.PROFILE, MemoryType.FACT) and "question" not in d.tags
        ]
    embedder = build_embedder(Settings(embedder="e5"))
    known = prototypes(embedder)
    said = {t: meaning_text(t) for t in drafts}  # what the embed stage reads a slot from
    texts = list(dict.fromkeys([*drafts, *(s for s in said.values() if s)]))  # one model call
    by_text = dict(zip(texts, embedder.embed_passages(texts), strict=True)) if texts else {}
    vectors = [by_text[t] for t in drafts]
    ungated: Counter[str | None] = Counter()
    gated: dict[str | None, list[str]] = {}
    for text, vector in zip(drafts, vectors, strict=True):
        ungated[slot_by_meaning(vector, known)] += 1
        own = said[text]
        meant = meaning_slot(own, by_text[own], embedder, AT) if own else None
        gated.setdefault(meant, []).append(text)
    through = sum(gives_a_value(t) for t in drafts)
    print(f"seed {args.seed}: {len(drafts)} drafts without a word slot of {args.turns} turns")
    print(f"without the gate, slots by meaning: {sum(n for s, n in ungated.items() if s)} {dict(ungated)}")
    print(f"the gate lets {through} through ({len(drafts) - through} gated out)")
    print(f"with the gate, slots by meaning: {sum(len(v) for s, v in gated.items() if s)}")
    for slot, texts in sorted(gated.items(), key=lambda kv: str(kv[0])):
        if slot is not None:
            print(f"== {slot}")
            for text in texts:
                print(f"   {text[:110]}")


if __name__ == "__main__":
    main()
