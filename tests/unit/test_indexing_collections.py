"""The Collection classes (memories, turns): their reports can share one dictionary, and each kind of
index has exactly one collection (the container builds one index per kind)."""

from __future__ import annotations

from shared.indexing.collections import COLLECTIONS, MEMORIES, TURNS
from shared.queues import IndexKind


def _report_names(collection) -> set[str]:
    reindexed = collection.counts(collection.reindex_keys)
    return {*collection.report_keys, *collection.counts(("users", "points")), *reindexed}


def test_the_collections_reports_never_overwrite_each_other():
    # reconcile_indexes and rebuild_indexes merge the collections' counts into one report.
    assert not _report_names(MEMORIES) & _report_names(TURNS)


def test_the_report_keys_are_those_the_cli_and_tests_read():
    assert MEMORIES.report_keys == ("missing", "extra", "stale", "rescored", "bookkept", "foreign")
    assert TURNS.report_keys == (
        "turns_missing", "turns_extra", "turns_stale", "turns_bookkept", "turns_foreign", "turns_unembedded",
    )  # fmt: skip
    assert MEMORIES.counts(MEMORIES.reindex_keys) == ("indexed", "reembedded")
    assert TURNS.counts(TURNS.reindex_keys) == ("turns_indexed", "turns_embedded")


def test_one_collection_per_index_kind_memories_first():
    assert [c.kind for c in COLLECTIONS] == [IndexKind.MEMORIES, IndexKind.TURNS]
