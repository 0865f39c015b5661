"""`cuemem bench ranker-features`: the candidates every path proposes, with their features and
labels, for each question of a LoCoMo-shaped file: what the relevance model is fitted and chosen on.

Each conversation is ingested through the real pipeline into ``--data-dir`` (a data dir that holds
it already is reused: nothing new is stored), then each question is asked as recall asks it
(``service.operations.recall.recall_candidates``: every path, no model, no floor) and written as one
JSON line::

    {"set": "...", "sample": "...", "question": 0, "category": 1, "evidence": ["D1:3"],
     "foreign": false, "candidates": [{"dias": ["D1:3"], "tokens": 12, "type": "turn",
     "row": [...]}, ...]}

``row`` holds ``shared.recall.features.FEATURES`` in order; a candidate is relevant when it covers
an evidence turn. With ``foreign``, each conversation's questions are also asked of the next
conversation's user (the no-answer protocol, ``bench.no_answer``): nothing there is relevant, so
those lines teach and test the floor. The file's first line records the feature list, the data
file's hash and the command, so a model is never fitted on rows of another layout.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.common import machine_info
from bench.locomo_data import Conversation, fit_turns, load_locomo
from bench.no_answer import choose

FORMAT = "cuemem-ranker-features/1"


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def seeded_samples(path: Path, n: int, seed: int) -> list[str]:
    """``n`` sample ids of the file drawn with ``random.Random(seed)`` (see :func:`seeded_draw`),
    in file order."""
    in_file = [c.sample_id for c in load_locomo(path)]
    chosen = set(seeded_draw(sorted(in_file), n, seed))
    return [s for s in in_file if s in chosen]


def seeded_draw(ids: Sequence[str], n: int, seed: int) -> list[str]:
    """``n`` of ``ids`` drawn with ``random.Random(seed)``, in the order drawn: the first n of a
    larger draw with the same seed, so a training subset grows without changing its start.

    Why not ``random.sample``: it switches algorithm with ``n`` (a set of picks for a small share,
    a shrinking pool for a large one), so 48 and 96 of the same 318 ids with one seed shared only
    44. This is its set method for every ``n``: the 48 it drew for the shipped model stay the
    first 48."""
    if n > len(ids):
        raise ValueError(f"samples: the file has {len(ids)}, asked for {n}")
    rng = random.Random(seed)
    picked: list[str] = []
    seen: set[int] = set()
    while len(picked) < n:
        j = rng.randrange(len(ids))
        if j not in seen:
            seen.add(j)
            picked.append(ids[j])
    return picked


def _lines(
    container: Any, name: str, convs: Sequence[Conversation], foreign: bool, progress: bool
) -> Iterator[dict[str, Any]]:
    from tqdm import tqdm

    from service.operations.recall import recall_candidates
    from shared.language.text import approx_token_count

    def candidates(conv: Conversation, asked_of: Conversation, text: str) -> list[dict[str, Any]]:
        out = []
        for item, row in recall_candidates(container, asked_of.sample_id, text, now=asked_of.now):
            dias = sorted(
                {
                    d
                    for s in item.sources
                    if (d := asked_of.dia_of_event(str(s.get("event_id", "")))) is not None
                }
            )
            out.append(
                {"dias": dias, "tokens": approx_token_count(item.content), "type": item.type, "row": row}
            )
        return out

    pairs = [(conv, conv) for conv in convs]
    if foreign and len(convs) > 1:
        pairs += [(conv, convs[(i + 1) % len(convs)]) for i, conv in enumerate(convs)]
    for conv, asked_of in pairs:
        is_foreign = asked_of is not conv
        label = f"{'no-answer ' if is_foreign else ''}{conv.sample_id}"
        for number, q in enumerate(
            tqdm(conv.questions, desc=label, unit="q", disable=not progress, file=sys.stderr)
        ):
            yield {
                "set": name,
                "sample": conv.sample_id,
                "asked_of": asked_of.sample_id,
                "question": number,
                "category": q.category,
                "evidence": [] if is_foreign else list(q.evidence.ids),
                "foreign": is_foreign,
                "candidates": candidates(conv, asked_of, q.text),
            }


def dump_features(
    data_path: Path,
    out_path: Path,
    data_dir: Path,
    *,
    name: str,
    samples: Sequence[str] | None = None,
    questions: int | None = None,
    foreign: bool = True,
    progress: bool = True,
) -> dict[str, int]:
    """Ingest the chosen conversations into ``data_dir`` and write ``out_path``; the counts."""
    from bench.locomo import ingest_conversations
    from shared.recall.features import FEATURES
    from shared.settings import Settings
    from workers.runtime.local import open_runtime

    convs = choose(load_locomo(data_path), samples, None, questions)
    settings = Settings().model_copy(update={"data_dir": data_dir})
    fit_turns(convs, settings.max_content_chars)  # as `bench locomo` does: a turn over the limit is cut to it
    counts = {"questions": 0, "candidates": 0, "relevant": 0}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    with open_runtime(
        settings, start_workers=not settings.broker_url, command="cuemem bench ranker-features"
    ) as rt:
        ingest_conversations(rt, convs, progress)
        rt.stop_workers()  # frees the embedded index for this process's searches
        with tmp.open("w", encoding="utf-8") as fh:
            header = {
                "format": FORMAT,
                "features": list(FEATURES),
                "data": data_path.name,
                "data_sha256": file_hash(data_path),
                "samples": [c.sample_id for c in convs],
                "embedding_model": rt.container.embedder.model_name,
                "command": machine_info()["command"],
            }
            fh.write(json.dumps(header, ensure_ascii=False) + "\n")
            for line in _lines(rt.container, name, convs, foreign, progress):
                counts["questions"] += 1
                counts["candidates"] += len(line["candidates"])
                evidence = set(line["evidence"])
                counts["relevant"] += sum(1 for c in line["candidates"] if evidence & set(c["dias"]))
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    tmp.replace(out_path)
    return counts


def read_features(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A features file's header and its question lines; ValueError when it is of another layout
    than this code's ``FEATURES``."""
    from shared.recall.features import FEATURES

    with path.open(encoding="utf-8") as fh:
        header = json.loads(fh.readline())
        if header.get("format") != FORMAT:
            raise ValueError(f"{path}: not a ranker features file ({FORMAT})")
        if tuple(header.get("features", ())) != FEATURES:
            raise ValueError(
                f"{path}: written with another feature list; run `cuemem bench ranker-features` again"
            )
        return header, [json.loads(line) for line in fh if line.strip()]


def read_sets(paths: Sequence[Path]) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The features files' headers, and their question lines by set name (files of one set join)."""
    headers: list[dict[str, Any]] = []
    sets: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        header, lines = read_features(path)
        headers.append(header)
        for line in lines:
            sets.setdefault(str(line["set"]), []).append(line)
    return headers, sets
