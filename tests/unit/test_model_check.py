"""Recall's embedding-model check (service/operations/recall.py: check_model_cached, over the one
rule, shared.storage.check_embedding_model): refused on another model,
read from Postgres once per ``MODEL_RECHECK_S`` per process, not once per recall. On an injected
clock: how long the test takes plays no part."""

from __future__ import annotations

import pytest

from service.operations.recall import MODEL_RECHECK_S, check_model_cached
from shared.ingest.embed import claim_embedding_model
from shared.ports import EmbeddingModelMismatch
from shared.settings import Settings
from shared.storage import EMBEDDING_MODEL_KEY, check_embedding_model
from tests.support.clock import ManualClock
from tests.support.fakes import FakeStore
from workers.bootstrap import build_container
from workers.endpoints.embedders.hashing import HashingEmbedder


def _container(stored: str | None):
    store = FakeStore()
    opened: list[int] = []

    def uow():
        opened.append(1)
        return store.uow()

    embedder = HashingEmbedder(dim=16)
    if stored is not None:
        store.state.meta[EMBEDDING_MODEL_KEY] = stored if stored != "same" else embedder.model_name
    return build_container(Settings(), uow=uow, embedder=embedder), store, opened


def test_a_passed_check_holds_for_a_while_then_is_read_again() -> None:
    c, store, opened = _container("same")
    clock = ManualClock()
    check_model_cached(c, clock)
    assert len(opened) == 1
    assert c.model_checked_until == clock.now + MODEL_RECHECK_S
    store.state.meta[EMBEDDING_MODEL_KEY] = "another-model"  # a reindex under another model
    checked_at = clock.now
    for step in range(5):
        clock.now = checked_at + step * MODEL_RECHECK_S / 5
        check_model_cached(c, clock)
    assert len(opened) == 1  # no Postgres round trip per recall
    clock.now = checked_at + MODEL_RECHECK_S  # the window has passed
    with pytest.raises(EmbeddingModelMismatch):
        check_model_cached(c, clock)
    assert len(opened) == 2


def test_a_failed_check_is_never_remembered() -> None:
    c, store, opened = _container("another-model")
    for _ in range(2):
        with pytest.raises(EmbeddingModelMismatch):
            check_model_cached(c)
    assert len(opened) == 2 and c.model_checked_until == 0.0
    store.state.meta[EMBEDDING_MODEL_KEY] = c.embedder.model_name  # reindexed with this model
    clock = ManualClock()
    check_model_cached(c, clock)
    assert c.model_checked_until == clock.now + MODEL_RECHECK_S


def test_nothing_stored_yet_passes() -> None:
    c, _, opened = _container(None)
    check_model_cached(c)
    assert len(opened) == 1


def test_one_rule_for_embedding_and_search_and_only_the_first_embedding_claims() -> None:
    """shared.storage.check_embedding_model is the rule (another stored model is refused, none
    stored is no mismatch); ingest's claim writes the model only when none is stored."""
    store = FakeStore()
    embedder = HashingEmbedder(dim=16)
    with store.uow() as uow:
        assert check_embedding_model(uow.meta, embedder.model_name) is None
        assert uow.meta.get(EMBEDDING_MODEL_KEY) is None  # a check never writes
        claim_embedding_model(uow, embedder)
        assert check_embedding_model(uow.meta, embedder.model_name) == embedder.model_name
        uow.meta.set(EMBEDDING_MODEL_KEY, "another-model")
        for refused in (
            lambda: check_embedding_model(uow.meta, embedder.model_name),
            lambda: claim_embedding_model(uow, embedder),
        ):
            with pytest.raises(EmbeddingModelMismatch):
                refused()
        assert uow.meta.get(EMBEDDING_MODEL_KEY) == "another-model"
