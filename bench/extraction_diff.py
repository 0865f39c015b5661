"""What the rules extraction makes of every LoCoMo turn, to compare two checkouts turn by turn.

``python -m bench.extraction_diff drafts LOCOMO_JSON [--meaning] > OUT.jsonl`` prints one JSON
line per turn: the conversation, the turn's id and its drafts (type, slot, the content's first 80
characters), each turn read as the user's own. With ``--meaning`` a profile or fact draft the
words left without a slot gets the slot the embed stage would give it by meaning
(``shared.ingest.embed.meaning_slot``, the bundled E5 model), shown as ``~<slot>``.

``python -m bench.extraction_diff compare OLD.jsonl NEW.jsonl`` prints the turns whose drafts
differ, old and new, and how many. Run ``drafts`` from each checkout (its own ``.venv``), then
``compare``: a change of a rule shows every turn of the benchmark it changes, for judging by hand
(a wrong slot supersedes a true value).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from shared.events import Role, TurnPublished
from shared.ingest.extraction import extract
from shared.models import MemoryDraft, MemoryType
from shared.ports import Embedder

AT = datetime(2023, 5, 1, tzinfo=UTC)
SHOWN = 80


def turns(path: Path) -> Iterator[tuple[str, str, str]]:
    """(conversation, turn id, text) of every turn with text, in the file's order."""
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                for turn in session:
                    if turn.get("text"):
                        yield sample["sample_id"], str(turn.get("dia_id", "")), turn["text"]


def _by_meaning(draft: MemoryDraft) -> bool:
    return (
        draft.slot is None
        and draft.type in (MemoryType.PROFILE, MemoryType.FACT)
        and "question" not in draft.tags
    )


def drafts(path: Path, embedder: Embedder | None = None) -> Iterator[list[object]]:
    """Per turn: [conversation, turn id, [[type, slot, content], ...]]."""
    for sample, turn_id, text in turns(path):
        event = TurnPublished(turn_id or "x", "t", "u", "s", 1, Role.USER, text, AT, {})
        shown = []
        for draft in extract(event).drafts:
            slot = draft.slot
            if embedder is not None and _by_meaning(draft):
                # a checkout without them has no --meaning
                from shared.ingest.embed import meaning_slot, meaning_text

                said = meaning_text(draft.content)
                meant = None
                if said:
                    [vector] = embedder.embed_passages([said])
                    meant = meaning_slot(said, list(vector), embedder, AT)
                slot = f"~{meant}" if meant else None
            shown.append([draft.type.value, slot, draft.content[:SHOWN]])
        yield [sample, turn_id, shown]


def compare(old: list[str], new: list[str]) -> list[tuple[object, object]]:
    """The (old, new) pairs of lines whose drafts differ."""
    if len(old) != len(new):
        raise SystemExit(f"not the same turns: {len(old)} and {len(new)} lines")
    return [(json.loads(a), json.loads(b)) for a, b in zip(old, new, strict=True) if a != b]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("drafts")
    one.add_argument("locomo", type=Path)
    one.add_argument("--meaning", action="store_true")
    two = sub.add_parser("compare")
    two.add_argument("old", type=Path)
    two.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    if args.command == "drafts":
        embedder = None
        if args.meaning:
            from shared.settings import Settings
            from workers.endpoints.embedders import build_embedder

            embedder = build_embedder(Settings(embedder="e5"))
        for line in drafts(args.locomo, embedder):
            print(json.dumps(line, ensure_ascii=False))
        return
    changed = compare(args.old.read_text().splitlines(), args.new.read_text().splitlines())
    for a, b in changed:
        print(json.dumps(a, ensure_ascii=False))
        print(json.dumps(b, ensure_ascii=False))
        print()
    print(f"{len(changed)} turns changed")


if __name__ == "__main__":
    main()
