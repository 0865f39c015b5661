"""The real `cuemem` command honours CUEMEM_LEXICON_PATHS end to end, on the embedded default:
the workers it starts store the user's tags, `recall` reads the query with the user's words, and a
bad file stops the command before anything starts, naming the file, the key and the problem."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import NOW, child_env, cuemem

USER = "lexi"
LEXICON = """
[tags.allergen]
type = "preference"
words = ["过敏原", "allergen", "allergens"]
"""


def test_ingest_and_recall_use_the_user_lexicon(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    lexicon = tmp_path / "lexicon.toml"
    lexicon.write_text(LEXICON, encoding="utf-8")
    turns = tmp_path / "turns.jsonl"
    turn = {
        "user_id": USER,
        "session_id": "s1",
        "role": "user",
        "content": "请记住：我的过敏原是尘螨和花粉",
        "at": "2026-11-01T10:00:00+08:00",
        "event_id": "lexicon-1",
    }
    turns.write_text(json.dumps(turn, ensure_ascii=False) + "\n", encoding="utf-8")
    env = child_env(CUEMEM_LEXICON_PATHS=str(lexicon))

    run = cuemem(data_dir, "ingest", str(turns), env=env)
    assert run.code == 0, run
    memories = cuemem(data_dir, "memories", "--user", USER, "--json", env=env)
    assert memories.code == 0, memories
    (memory,) = memories.json()
    assert "allergen" in memory["tags"]  # the worker processes read the user's file too

    # An English query finds the Chinese memory through the user's tag.
    run = cuemem(
        data_dir, "recall", "--user", USER, "--now", NOW, "--json", "what are my allergens?", env=env
    )
    assert run.code == 0, run
    out = run.json()
    assert "allergen" in out["trace"]["cues"]["tags"]
    assert "preference" in out["trace"]["cues"]["type_hints"]
    (item,) = [i for i in out["items"] if i["id"] == memory["id"]]
    assert "t:allergen" in item["explanation"]["matched_cues"]

    # Without the setting the same query has no such cue.
    plain = cuemem(data_dir, "recall", "--user", USER, "--now", NOW, "--json", "what are my allergens?")
    assert plain.code == 0, plain
    assert "allergen" not in plain.json()["trace"]["cues"]["tags"]


def test_a_bad_lexicon_file_stops_the_command_with_a_clear_error(tmp_path: Path) -> None:
    lexicon = tmp_path / "lexicon.toml"
    lexicon.write_text('[tags.allergen]\ntype = "preferences"\nwords = ["过敏原"]\n', encoding="utf-8")
    data_dir = tmp_path / "data"
    run = cuemem(data_dir, "recall", "--user", USER, "q", env=child_env(CUEMEM_LEXICON_PATHS=str(lexicon)))
    assert run.code == 2, run
    assert f"error: cue lexicon {lexicon}: tags.allergen.type: unknown type 'preferences'" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (data_dir / "pg").exists()  # nothing was started

    lexicon.write_text('[tags.allergen]\nwords = ["过敏原"]\ntype = preference\n', encoding="utf-8")
    run = cuemem(data_dir, "recall", "--user", USER, "q", env=child_env(CUEMEM_LEXICON_PATHS=str(lexicon)))
    assert run.code == 2, run
    assert f"error: cue lexicon {lexicon}: invalid TOML" in run.stderr
    assert "line 3" in run.stderr
