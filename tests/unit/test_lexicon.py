"""User cue lexicons: validation and merging (shared.language.lexicon), installing them
(shared.language.cues.configure) and reading the files of CUEMEM_LEXICON_PATHS (workers.lexicon)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.language import cues
from shared.language.cues import LexiconHit, lexicon_hits, query_cues
from shared.language.lexicon import LexiconError, parse_overlay
from shared.language.slot_rules import slot_for
from shared.models import MemoryType
from shared.settings import Settings
from workers.lexicon import apply_lexicon, read_lexicon_file

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def shipped_lexicon_after() -> Iterator[None]:
    yield
    cues.configure()  # never leak a user lexicon into other tests


def install(*files: dict[str, Any]) -> cues.Lexicon:
    return cues.configure([parse_overlay(data, f"user{i}.toml") for i, data in enumerate(files)])


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- adding, overriding, removing -----------------------------------------------------------------


def test_added_word_gives_recall_its_type_hint_and_tag() -> None:
    assert query_cues("我不能碰哪些发物").type_hints == ()
    assert query_cues("my allergen list").type_hints == ()
    install({"tags": {"diet": {"type": "preference", "words": ["过敏原", "发物", "allergen"]}}})

    assert query_cues("我不能碰哪些发物").type_hints == (MemoryType.PREFERENCE,)
    assert query_cues("我不能碰哪些发物").tags == ("diet",)
    assert query_cues("my allergen list").type_hints == (MemoryType.PREFERENCE,)
    assert query_cues("my allergen list").keys()["t:diet"] == cues.TAG_WEIGHT
    # The longer user word is a hit of its own, next to the shipped "过敏" inside it.
    assert LexiconHit("过敏原", MemoryType.PREFERENCE, ("diet",)) in lexicon_hits("我的过敏原有哪些")


def test_a_texts_cached_cue_keys_follow_a_newly_installed_lexicon() -> None:
    # Recall caches a text's cue keys (the working memory's turns recur on every query): a
    # lexicon installed after the first read must still tag the text, and removing it untag it.
    text = "我不能碰发物"
    assert "t:diet" not in cues.text_cues(text)
    install({"tags": {"diet": {"type": "preference", "words": ["发物"]}}})
    assert "t:diet" in cues.text_cues(text)
    cues.configure()
    assert "t:diet" not in cues.text_cues(text)


def test_words_added_to_a_shipped_tag_take_its_type_when_none_is_given() -> None:
    install({"tags": {"diet": {"words": ["发物"]}, "health": {"words": ["化验单"]}}})
    assert lexicon_hits("发物") == [LexiconHit("发物", MemoryType.PREFERENCE, ("diet",))]
    # "health" words are typed preference and untyped in the shipped lexicon: no shared type.
    assert lexicon_hits("化验单") == [LexiconHit("化验单", None, ("health",))]


def test_a_new_tag_with_its_type_and_a_topic_only_tag() -> None:
    install(
        {"tags": {"pets": {"type": "profile", "words": ["猫粮", "cat food"]}, "garden": {"words": ["多肉"]}}}
    )
    assert query_cues("I bought Cat Food").tags == ("pets",)
    assert query_cues("I bought cat food").type_hints == (MemoryType.PROFILE,)
    assert query_cues("多肉怎么浇水").tags == ("garden",)
    assert query_cues("多肉怎么浇水").type_hints == ()


def test_a_given_type_overrides_a_shipped_word_and_its_tags_are_kept() -> None:
    assert lexicon_hits("口味") == [LexiconHit("口味", MemoryType.PREFERENCE, ("diet",))]
    install({"tags": {"taste": {"type": "fact", "words": ["口味"]}}})
    assert lexicon_hits("口味") == [LexiconHit("口味", MemoryType.FACT, ("diet", "taste"))]


def test_removing_a_shipped_word_everywhere() -> None:
    assert query_cues("口味").type_hints == (MemoryType.PREFERENCE,)
    install({"remove": ["口味", "Diet"]})
    assert lexicon_hits("口味偏淡") == []
    assert lexicon_hits("my diet") == []
    assert "diet" not in cues.load_lexicon().entries
    assert "忌口" in cues.load_lexicon().entries  # the rest of the tag stays


def test_removing_a_word_from_one_tag_keeps_its_other_tags() -> None:
    install({"tags": {"health": {"remove": ["过敏"]}, "diet": {"remove": ["忌口"]}}})
    assert lexicon_hits("过敏") == [LexiconHit("过敏", MemoryType.PREFERENCE, ("diet",))]
    assert lexicon_hits("忌口") == []  # its only tag is gone, so is the word


def test_later_files_win_and_removal_comes_before_addition_in_a_file() -> None:
    install(
        {"tags": {"pets": {"type": "profile", "words": ["猫粮"]}}},
        {"remove": ["猫粮"], "tags": {"shopping": {"type": "task", "words": ["猫粮"]}}},
    )
    assert lexicon_hits("买猫粮") == [LexiconHit("猫粮", MemoryType.TASK, ("shopping",))]


def test_user_slot_rules_come_before_the_shipped_ones_and_interest_tags_add_up() -> None:
    text = "我家的猫叫咪咪"
    install(
        {
            "interest_tags": ["pets"],
            "tags": {"pets": {"type": "profile", "words": ["我家的猫"]}},
            "slots": [{"slot": "profile:pet", "types": ["profile"], "tags": ["pets"]}],
        }
    )
    assert slot_for(text, MemoryType.PROFILE, cues.lexicon_tags(text)) == "profile:pet"
    assert cues.interest_tag(["pets"]) == "pets"
    assert cues.interest_tag(["finance"]) == "finance"  # shipped ones stay


def test_configure_without_overlays_restores_the_shipped_lexicon() -> None:
    shipped = cues.load_lexicon()
    install({"tags": {"diet": {"words": ["发物"]}}})
    assert cues.load_lexicon() is not shipped
    cues.configure()
    assert cues.load_lexicon() is shipped
    assert lexicon_hits("发物") == []


def test_the_example_file_in_docs_is_valid_and_changes_recall() -> None:
    path = REPO / "docs" / "lexicon.example.toml"
    overlay = read_lexicon_file(path)
    cues.configure([overlay])
    assert query_cues("我不能碰哪些发物").type_hints == (MemoryType.PREFERENCE,)


# --- errors name the file, the key and the problem ------------------------------------------------


@pytest.mark.parametrize(
    ("data", "key", "problem"),
    [
        (
            {"tags": {"diet": {"type": "prefrence", "words": ["发物"]}}},
            "tags.diet.type",
            "unknown type 'prefrence'",
        ),
        ({"tags": {"diet": {"words": ["发物", 42]}}}, "tags.diet.words[1]", "not a string (got int 42)"),
        ({"tags": {"diet": {"words": "发物"}}}, "tags.diet.words", "must be a list of strings"),
        ({"tags": {"diet": {"words": ["  "]}}}, "tags.diet.words[0]", "empty string"),
        ({"tags": {"diet": {"words": ["吃"]}}}, "tags.diet.words[0]", "2+ characters"),
        ({"tags": {"diet": {"wrods": ["发物"]}}}, "tags.diet.wrods", "unknown key"),
        ({"tags": {"diet": {}}}, "tags.diet", "neither words nor remove"),
        ({"tags": {"my diet": {"words": ["发物"]}}}, "tags.my diet", "one word"),
        ({"tags": {"diet": ["发物"]}}, "tags.diet", "must be a table"),
        ({"remove": [1]}, "remove[0]", "not a string"),
        ({"entries": []}, "entries", "unknown key"),
        ({"version": 2}, "version", "unsupported version 2"),
        ({"slots": [{"types": ["profile"], "tags": ["pets"]}]}, "slots[0].slot", "missing"),
        (
            {"slots": [{"slot": "profile:pet", "types": ["pet"], "tags": ["pets"]}]},
            "slots[0].types[0]",
            "unknown type",
        ),
        ({"slots": [{"slot": "skill:{key}", "types": ["fact"]}]}, "slots[0].key_tag", "needs a key_tag"),
        ({"slots": [{"slot": "profile:pet"}]}, "slots[0]", "needs tags or words"),
    ],
)
def test_bad_content_is_reported_with_file_key_and_problem(
    data: dict[str, Any], key: str, problem: str
) -> None:
    with pytest.raises(LexiconError) as info:
        parse_overlay(data, "/etc/cuemem/lexicon.toml")
    assert info.value.source == "/etc/cuemem/lexicon.toml"
    assert info.value.key == key
    assert problem in info.value.problem
    assert str(info.value).startswith(f"cue lexicon /etc/cuemem/lexicon.toml: {key}: ")


def test_a_bad_file_leaves_the_installed_lexicon_alone(tmp_path: Path) -> None:
    good = write(tmp_path, "good.toml", '[tags.diet]\nwords = ["发物"]\n')
    bad = write(tmp_path, "bad.toml", '[tags.diet]\ntype = "nope"\nwords = ["x"]\n')
    apply_lexicon(Settings(lexicon_paths=[good]))
    with pytest.raises(LexiconError, match="bad.toml: tags.diet.type: unknown type 'nope'"):
        apply_lexicon(Settings(lexicon_paths=[good, bad]))
    assert query_cues("发物").tags == ("diet",)


# --- reading files (workers.lexicon) --------------------------------------------------------------


def test_bad_toml_syntax_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.toml", '[tags.diet]\nwords = ["发物"\ntype = "preference"\n')
    with pytest.raises(LexiconError) as info:
        read_lexicon_file(path)
    assert info.value.source == str(path)
    assert "invalid TOML" in str(info.value)
    assert "line 3" in str(info.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"
    with pytest.raises(LexiconError, match="nowhere.toml: no such file"):
        apply_lexicon(Settings(lexicon_paths=[missing]))


def test_yaml_files_work_and_their_syntax_errors_name_the_line(tmp_path: Path) -> None:
    good = write(tmp_path, "lex.yaml", "tags:\n  diet:\n    type: preference\n    words: [发物, allergen]\n")
    apply_lexicon(Settings(lexicon_paths=[good]))
    assert query_cues("allergen").type_hints == (MemoryType.PREFERENCE,)
    bad = write(tmp_path, "bad.yml", "tags:\n  diet:\n    words: [发物\n")
    with pytest.raises(LexiconError, match=r"bad.yml: invalid YAML at line \d+"):
        read_lexicon_file(bad)


def test_apply_lexicon_without_paths_restores_the_shipped_one_and_rereads_changed_files(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "lex.toml", '[tags.diet]\nwords = ["发物"]\n')
    apply_lexicon(Settings(lexicon_paths=[path]))
    assert lexicon_hits("发物")
    first = cues.load_lexicon()
    apply_lexicon(Settings(lexicon_paths=[path]))
    assert cues.load_lexicon() is first  # unchanged file: not parsed again
    path.write_text('[tags.diet]\nwords = ["发物", "忌嘴"]\n', encoding="utf-8")
    apply_lexicon(Settings(lexicon_paths=[path]))
    assert lexicon_hits("忌嘴")
    apply_lexicon(Settings())
    assert lexicon_hits("发物") == []


def test_the_container_installs_the_lexicon_of_its_settings(tmp_path: Path) -> None:
    from tests.support.fakes import FakeStore
    from workers.bootstrap import build_container

    path = write(tmp_path, "lex.toml", '[tags.diet]\ntype = "preference"\nwords = ["allergen"]\n')
    container = build_container(Settings(lexicon_paths=[path]), uow=FakeStore().uow)
    try:
        assert query_cues("allergen").type_hints == (MemoryType.PREFERENCE,)
    finally:
        container.close()


# --- the setting ----------------------------------------------------------------------------------


def test_lexicon_paths_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUEMEM_LEXICON_PATHS", "/etc/cuemem/a.toml:./b.toml")
    assert Settings().lexicon_paths == [Path("/etc/cuemem/a.toml"), Path("b.toml")]
    monkeypatch.setenv("CUEMEM_LEXICON_PATHS", '["/x/a b.toml"]')
    assert Settings().lexicon_paths == [Path("/x/a b.toml")]
    monkeypatch.setenv("CUEMEM_LEXICON_PATHS", "")
    assert Settings().lexicon_paths == []


def test_worker_processes_get_the_paths_back_intact(monkeypatch: pytest.MonkeyPatch) -> None:
    from workers.runtime.embedded import settings_env

    env = settings_env(Settings(lexicon_paths=[Path("/x/a.toml"), Path("b.toml")]))
    assert json.loads(env["CUEMEM_LEXICON_PATHS"]) == ["/x/a.toml", "b.toml"]
    monkeypatch.setenv("CUEMEM_LEXICON_PATHS", env["CUEMEM_LEXICON_PATHS"])
    assert Settings().lexicon_paths == [Path("/x/a.toml"), Path("b.toml")]
