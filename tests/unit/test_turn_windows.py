"""Context windows (shared/indexing/turn_windows.py) through the pipeline and recall, on fakes:
what a window holds, that a hit stands for every turn in it, that a retired memory hides only its
own statement of a turn, and that a privacy delete drops the windows quoting a blanked turn."""

from __future__ import annotations

from shared.indexing.collections import TURNS
from shared.indexing.reindex import rebuild_collection
from shared.indexing.turn_windows import CONTEXT_CHARS, clip, window_text
from shared.models import MemoryStatus
from tests.support.pipeline import TurnHarness, ask, turn

CAMPING = "周日我们全家去露营。"
PLACE = "营地在莫干山。"
FRAGMENT = "对了，那天记得带防晒霜。"
HOUSING = "I've been using Zillow and HotPads for the flat."
ASYLUM = "My asylum application took over a year to get approved."
OTHER = ["我最近在学吉他。", "公司下周要搬到新大楼。", "晚饭吃了一碗牛肉面。"]


def test_a_window_is_the_context_turns_cut_then_the_turn_itself():
    assert window_text("  the   turn ", []) == "the turn"  # a window of one: the turn alone
    assert window_text("c", ["a", "", "b"]) == "a\nb\nc"  # empty (redacted) context is left out
    long = "word " * 200
    cut = clip(long)
    assert len(cut) <= CONTEXT_CHARS + 2 and cut.endswith(" …") and not cut.endswith("wo …")
    assert clip("short text") == "short text"


def test_the_embed_stage_embeds_the_turn_with_the_turns_before_it_in_its_session():
    h = TurnHarness(window=3)
    texts: list[list[str]] = []
    embed = h.embedder.embed_passages
    h.embedder.embed_passages = lambda batch: texts.append(list(batch)) or embed(batch)  # type: ignore[method-assign]
    h.drain(turn(1, "lol ok"))
    h.drain(turn(2, "haha sure"))
    h.drain(turn(3, "nice one"))
    h.drain(turn(1, "hmm", session="s2"))
    assert texts[0] == ["lol ok"] and texts[2] == ["lol ok\nhaha sure\nnice one"]
    assert texts[3] == ["hmm"]  # another session: no context
    assert h.state.events["e-u1-s1-3"]["window"] == ("e-u1-s1-1", "e-u1-s1-2")
    with h.store.uow() as uow:
        [row] = uow.turn_index.rows("default", "u1", ["e-u1-s1-3"])
    assert row.context == ("lol ok", "haha sure")


def test_a_window_of_one_indexes_each_turn_alone():
    h = TurnHarness(window=1)
    h.say("lol ok", "haha sure")
    assert h.state.events["e-u1-s1-2"].get("window", ()) == ()


def _camping(h: TurnHarness) -> None:
    h.say(*OTHER[:2], CAMPING, PLACE, FRAGMENT, OTHER[2])


def _paths_of(h: TurnHarness, event_id: str, query: str) -> set[str]:
    out = ask(h, query, k=10)
    found = [i for i in out.items if any(s["event_id"] == event_id for s in i.sources)]
    return set(found[0].explanation["paths"]) if found else set()


def test_a_fragment_is_found_through_its_window():
    """ "那天记得带防晒霜" names no camping trip: the window that ends at it does."""
    with_windows, alone = TurnHarness(window=3), TurnHarness(window=1)
    for h in (with_windows, alone):
        _camping(h)
    # The fragment (two turns after the trip) matches the query's words through its window only.
    assert "turn_keyword" in _paths_of(with_windows, "e-u1-s1-5", "露营要准备什么？")
    assert "turn_keyword" not in _paths_of(alone, "e-u1-s1-5", "露营要准备什么？")


def test_a_hit_on_a_window_stands_for_every_turn_it_holds():
    h = TurnHarness(window=3)
    # Neighbours with words of their own: chit-chat ("haha") is left out by the relevance floor.
    h.say("lol we saw a red fox", "it ran across the road", "then it hid under the old bridge")
    out = ask(h, "red fox", k=5)
    ids = [s["event_id"] for i in out.items for s in i.sources]
    # The fox turn first (its own words match), then the turns whose windows hold it.
    assert ids[0] == "e-u1-s1-1" and {"e-u1-s1-2", "e-u1-s1-3"} <= set(ids)


def test_reindex_rebuilds_the_same_windows():
    h = TurnHarness(window=3)
    _camping(h)
    before = {p: s.sparse for p, s in h.turns._points.items()}
    h.turns.delete("default", "u1", list(h.turns.ids("default", "u1")))
    rebuild_collection(h.store.uow, TURNS, h.turns, h.embedder)
    after = {p: s.sparse for p, s in h.turns._points.items()}
    assert after == before


def test_superseding_one_fact_of_a_turn_hides_that_statement_only():
    h = TurnHarness(window=1)
    h.say(f"{HOUSING} {ASYLUM}")
    event_id = "e-u1-s1-1"
    with h.store.uow() as uow:
        for m in uow.memories.from_event("default", "u1", event_id):
            m.status, m.content = MemoryStatus.SUPERSEDED, HOUSING
            uow.memories.save(m)
        uow.commit()
    out = ask(h, "asylum application approved")
    [item] = [i for i in out.items if i.id == f"event:{event_id}"]
    assert "asylum" in item.content and "Zillow" not in item.content


def test_a_rephrased_retired_memory_keeps_its_turn_hidden():
    h = TurnHarness(window=1)
    h.say(f"{HOUSING} {ASYLUM}")
    with h.store.uow() as uow:
        [m] = uow.memories.from_event("default", "u1", "e-u1-s1-1")
        m.status, m.content = MemoryStatus.FORGOTTEN, "The user waited long for asylum."
        uow.memories.save(m)
        uow.commit()
    assert all(i.id != "event:e-u1-s1-1" for i in ask(h, "asylum application approved").items)
    # The control: the same turn with no retired memory comes back.
    fresh = TurnHarness(window=1)
    fresh.drain(turn(1, "lol my asylum application took over a year to get approved"))
    assert any(i.id == "event:e-u1-s1-1" for i in ask(fresh, "asylum application approved").items)


def test_a_privacy_delete_drops_the_windows_that_quote_the_blanked_turn():
    h = TurnHarness(window=3)
    _camping(h)
    with h.store.uow() as uow:
        blanked = uow.events.redact("default", "u1", ["e-u1-s1-3"])
        windows = uow.turn_index.unembed_windows("default", "u1", [e for e, _ in blanked])
        uow.commit()
    assert windows == ["e-u1-s1-4", "e-u1-s1-5"]  # the two windows after it held it
    for event_id in windows:
        row = h.state.events[event_id]
        assert row["embedding"] is None and row.get("window", ()) == ()
    assert h.state.events["e-u1-s1-6"]["window"] == ("e-u1-s1-4", "e-u1-s1-5")  # never held it
    with h.store.uow() as uow:  # another user's delete touches none of them
        assert uow.turn_index.unembed_windows("default", "u2", ["e-u1-s1-6"]) == []


def test_every_statement_of_a_retired_split_memory_is_cut_out_of_its_turn():
    """Extraction split a turn at a comma: forgetting both parts leaves nothing of either."""
    h = TurnHarness(window=1)
    h.say(
        "I moved to Boston last year. I work at Acme as a nurse, and I am allergic to peanuts. "
        "My favorite food is sushi."
    )
    with h.store.uow() as uow:
        drafts = uow.memories.from_event("default", "u1", "e-u1-s1-1")
        assert len(drafts) >= 2  # the rules split this turn
        for m in drafts:
            m.status = MemoryStatus.FORGOTTEN
            uow.memories.save(m)
        uow.commit()
    for query in ("where do I work as a nurse", "allergic to peanuts", "favorite food sushi"):
        for item in ask(h, query).items:
            assert "nurse" not in item.content and "peanuts" not in item.content, (query, item)
