"""The turn by itself (``Settings.turn_alone_vector``): the embed stage embeds each turn alone
beside its window, and recall gives each candidate the cosine of the query to its turns alone
(``shared/recall/alone.py``), on fakes."""

from __future__ import annotations

from shared.ingest.embed import embed_windows
from shared.vectors import cosine
from tests.support.pipeline import TurnHarness, ask, turn


def _recording(h: TurnHarness) -> list[list[str]]:
    texts: list[list[str]] = []
    embed = h.embedder.embed_passages
    h.embedder.embed_passages = lambda batch: texts.append(list(batch)) or embed(batch)  # type: ignore[method-assign]
    return texts


def test_each_turn_with_context_is_embedded_alone_too_in_the_same_call():
    h = TurnHarness(window=3, alone=True)
    texts = _recording(h)
    h.drain(turn(1, "lol ok"))
    h.drain(turn(2, "haha  sure"))
    assert texts[0] == ["lol ok"]  # no context: the window is the turn, one text for both
    assert texts[1] == ["lol ok\nhaha sure", "haha sure"]
    first, second = h.state.events["e-u1-s1-1"], h.state.events["e-u1-s1-2"]
    assert first["alone"] == first["embedding"]
    assert second["alone"] == h.embedder.embed_passages(["haha sure"])[0]
    assert second["alone"] != second["embedding"]


def test_off_no_turn_is_embedded_alone():
    h = TurnHarness(window=3)
    texts = _recording(h)
    h.drain(turn(1, "lol ok"))
    h.drain(turn(2, "haha sure"))
    assert texts == [["lol ok"], ["lol ok\nhaha sure"]]
    assert h.state.events["e-u1-s1-2"]["alone"] is None


def test_a_window_embedded_again_without_alone_keeps_no_alone_vector_of_before():
    """A window written without its turn alone (another model's rebuild, the setting turned off)
    leaves none: a turn never keeps an alone vector of another model or text than its window's."""
    h = TurnHarness(window=3, alone=True)
    h.say("lol ok", "haha sure")
    assert h.state.events["e-u1-s1-2"]["alone"] is not None
    with h.store.uow() as uow:
        embed_windows(uow, h.embedder, "default", "u1", ["e-u1-s1-2"], 3)
        uow.commit()
    assert h.state.events["e-u1-s1-2"]["alone"] is None
    with h.store.uow() as uow:
        embed_windows(uow, h.embedder, "default", "u1", ["e-u1-s1-2"], 3, alone=True)
        uow.commit()
    assert h.state.events["e-u1-s1-2"]["alone"] == h.embedder.embed_passages(["haha sure"])[0]


FOX = ["lol we saw a red fox", "it ran across the road", "then it hid under the old bridge"]


def test_recall_scores_each_candidate_by_its_own_turn_alone():
    h = TurnHarness(window=3, alone=True)
    h.say(*FOX)
    out = ask(h, "red fox", k=5, turn_alone=True)
    q = h.embedder.embed_query("red fox")
    scored = {s["event_id"]: i.explanation.get("turn_alone_score") for i in out.items for s in i.sources}
    assert scored, "nothing recalled"
    for n, text in enumerate(FOX, start=1):
        event_id = f"e-u1-s1-{n}"
        if event_id in scored:
            want = cosine(q, h.embedder.embed_passages([text])[0])
            assert scored[event_id] == round(want, 6), event_id
    # The window holding the fox scores its later neighbours as the fox; alone, they differ.
    windows = {s["event_id"]: i.explanation.get("turn_vector_score") for i in out.items for s in i.sources}
    fox, later = "e-u1-s1-1", ["e-u1-s1-2", "e-u1-s1-3"]
    assert set(scored) == {fox, *later}
    assert all(windows[e] > 0 for e in later)
    assert all(scored[fox] > scored[e] for e in later)


def test_recall_reads_no_alone_vector_unless_asked():
    h = TurnHarness(window=3, alone=True)
    h.say(*FOX)
    out = ask(h, "red fox", k=5)
    assert out.items and all("turn_alone_score" not in i.explanation for i in out.items)
    assert "alone_ms" not in out.trace["timings_ms"]
    asked = ask(h, "red fox", k=5, turn_alone=True)
    assert "alone_ms" in asked.trace["timings_ms"]


def test_another_users_alone_vectors_are_never_read():
    """u1 and u10 say the same turns; u10's alone vectors are dropped: u1's recall still scores
    u1's turns, and u10's recall scores none (nothing of u1's is read for it)."""
    h = TurnHarness(window=3, alone=True)
    h.say(*FOX)
    for n, text in enumerate(FOX, start=1):
        h.drain(turn(n, text, user="u10"))
    for row in h.state.events.values():
        if row["event"].user_id == "u10":
            row["alone"] = None
    mine = ask(h, "red fox", k=5, turn_alone=True)
    theirs = ask(h, "red fox", k=5, user="u10", turn_alone=True)
    assert any("turn_alone_score" in i.explanation for i in mine.items)
    assert theirs.items and all("turn_alone_score" not in i.explanation for i in theirs.items)


def test_the_relevance_features_carry_the_alone_cosine_and_its_gap_to_the_best():
    h = TurnHarness(window=3, alone=True)
    h.say(*FOX)
    out = ask(h, "red fox", k=5, turn_alone=True)
    feats = [i.explanation["features"] for i in out.items]
    best = max(f.get("turn_alone", 0.0) for f in feats)
    assert best > 0
    for item, f in zip(out.items, feats, strict=True):  # a feature at 0 is not listed
        assert f.get("turn_alone", 0.0) == item.explanation["turn_alone_score"]
        assert f.get("turn_alone_gap", 0.0) == round(best - f.get("turn_alone", 0.0), 6)
    assert any(f.get("turn_alone_gap", 0.0) > 0 for f in feats)
    off = ask(h, "red fox", k=5)
    assert off.items and all(
        "turn_alone" not in i.explanation["features"] and i.explanation["features"]["turn_alone_gap"] == 1.0
        for i in off.items
    )


def _alone_vectors(h: TurnHarness) -> dict[str, list[float] | None]:
    return {ref: row.get("alone") for ref, row in h.state.events.items()}


def test_reindex_gives_turns_logged_before_the_setting_their_vector_alone():
    """Turns logged with the setting off (two users, ids colliding by prefix) get, from
    ``cuemem reindex`` with it on, each the vector of its own text alone; off, none."""
    from shared.indexing.reindex import rebuild_indexes
    from shared.indexing.turn_windows import alone_text

    h = TurnHarness(window=3)
    for user in ("u1", "u10"):
        for n, text in enumerate(FOX, start=1):
            h.drain(turn(n, f"{user} {text}", user=user))
    assert set(_alone_vectors(h).values()) == {None}
    assert "turns_alone" not in rebuild_indexes(h.store.uow, h.indexes, h.embedder)
    assert set(_alone_vectors(h).values()) == {None}
    stats = rebuild_indexes(h.store.uow, h.indexes, h.embedder, alone=True)
    assert stats["turns_alone"] == 6
    for row in h.state.events.values():
        assert row["alone"] == h.embedder.embed_passages([alone_text(row["event"].content)])[0]
    # Now recall scores them alone; a second run has nothing left to fill.
    out = ask(h, "red fox", user="u10", turn_alone=True)
    assert any("turn_alone_score" in i.explanation for i in out.items)
    assert rebuild_indexes(h.store.uow, h.indexes, h.embedder, alone=True)["turns_alone"] == 0


def test_reindex_for_another_model_embeds_the_turns_alone_again_with_it():
    from shared.indexing.reindex import rebuild_indexes
    from shared.indexing.turn_windows import alone_text
    from workers.endpoints.embedders.hashing import HashingEmbedder

    h = TurnHarness(window=3, alone=True)
    h.say(*FOX)
    other = HashingEmbedder(dim=24)
    stats = rebuild_indexes(h.store.uow, h.indexes, other, alone=True)
    assert stats["turns_embedded"] == 3 and stats["turns_alone"] == 3
    for row in h.state.events.values():
        assert row["embedding_model"] == other.model_name
        assert row["alone"] == other.embed_passages([alone_text(row["event"].content)])[0]


def test_an_alone_vector_is_kept_only_while_its_window_is_of_that_model():
    h = TurnHarness(window=3)
    h.say(*FOX)
    with h.store.uow() as uow:
        model = h.embedder.model_name
        assert [t.event_id for t in uow.turn_index.without_alone("", 10, model)] == [
            "e-u1-s1-1",
            "e-u1-s1-2",
            "e-u1-s1-3",
        ]
        assert [t.event_id for t in uow.turn_index.without_alone("default/e-u1-s1-1", 1, model)] == [
            "e-u1-s1-2"
        ]
        assert uow.turn_index.without_alone("", 10, "another-model") == []
        assert not uow.turn_index.set_alone("default/e-u1-s1-1", [1.0] * 16, "another-model")
        assert uow.turn_index.set_alone("default/e-u1-s1-1", [1.0] * 16, model)
        uow.events.redact("default", "u1", ["e-u1-s1-2"])
        assert not uow.turn_index.set_alone("default/e-u1-s1-2", [1.0] * 16, model)
        assert [t.event_id for t in uow.turn_index.without_alone("", 10, model)] == ["e-u1-s1-3"]
