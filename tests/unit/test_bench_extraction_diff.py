"""bench.extraction_diff on a tiny LoCoMo-shaped file: each turn's drafts; the turns two runs differ on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import extraction_diff
from tests.unit.test_facts_over_time import _WordEmbedder  # its meaning: job or home words

LOCOMO = [
    {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "A",
            "session_1": [
                {
                    "dia_id": "D1:1",
                    "text": "Sure! I'm lactose intolerant, so I'll just need the dairy-free recipe!",
                },
                {"dia_id": "D1:2", "text": "lol ok"},
                {"dia_id": "D1:3", "text": "我们计划明年春天搬到苏州"},
                {"dia_id": "D1:4"},
            ],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        },
    }
]


def test_drafts_gives_every_turn_its_drafts_and_compare_the_turns_that_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO), encoding="utf-8")
    extraction_diff.main(["drafts", str(path)])
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r[1] for r in rows] == ["D1:1", "D1:2", "D1:3"]  # a turn without text is none
    assert rows[0][2] == [["preference", "preference:diet", rows[0][2][0][2]]]
    assert rows[1][2] == []
    assert [d[:2] for d in rows[2][2]] == [["task", "plan:profile:home"]]
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text("\n".join(lines), encoding="utf-8")
    new.write_text("\n".join([lines[0], lines[1], json.dumps(["conv-1", "D1:3", []])]), encoding="utf-8")
    extraction_diff.main(["compare", str(old), str(new)])
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "1 turns changed" and "D1:3" in out and "D1:1" not in out


def test_drafts_with_meaning_read_the_slot_from_the_users_own_clauses(tmp_path: Path) -> None:
    turns = [
        {"dia_id": "D1:1", "text": "我在深圳安家了，我们过年回老家"},
        {"dia_id": "D1:2", "text": "我姐姐在深圳安家了，我们过年去看她"},  # the home is the sister's
    ]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([{"sample_id": "c", "conversation": {"session_1": turns}}]), encoding="utf-8")
    rows = list(extraction_diff.drafts(path, _WordEmbedder()))  # type: ignore[arg-type]
    [[mine], [theirs]] = [[d[1] for d in drafts] for _, _, drafts in rows]
    assert mine in ("profile:home", "~profile:home") and theirs is None
