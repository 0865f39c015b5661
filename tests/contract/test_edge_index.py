"""The embedded engine (EdgeVectorIndex) beyond the shared contract: one owning process, lazy
opening, persistence and adoption of shards, and files deleted or replaced under the open index
(docs/RELIABILITY.md, "Consistency").
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sys
from contextlib import closing
from pathlib import Path

import pytest

from shared.ports import EmbeddingModelMismatch, IndexPoint, IndexUnavailable, SparseTerms
from tests.support.index_points import DIM, MODEL, OTHER_MODEL, TENANT, USER, basis, pid, point
from tests.support.processes import python_json
from workers.index import UNRECORDED
from workers.index.edge import EdgeVectorIndex

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")


# ---- embedded engine: ownership and persistence ---------------------------------------------------

_PROBE = """
import json, sys
from pathlib import Path
from shared.ports import IndexUnavailable
from workers.index.edge import EdgeVectorIndex
index = EdgeVectorIndex(Path(sys.argv[1]))
try:
    print(json.dumps({"count": index.count(), "ids": sorted(index.ids("t1", "alice"))}))
except IndexUnavailable as exc:
    print(json.dumps({"unavailable": str(exc)}))
finally:
    index.close()
"""


def _probe_other_process(path: Path) -> dict[str, object]:
    result: dict[str, object] = python_json(_PROBE, str(path), timeout=60)
    return result


def test_edge_second_process_is_refused_and_owner_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    with closing(EdgeVectorIndex(path)) as owner:
        owner.ensure(DIM, MODEL)
        owner.upsert([point(1, basis(0))])

        refused = _probe_other_process(path)

        message = str(refused["unavailable"])
        assert f"{path}.lock" in message
        assert f"pid {os.getpid()}" in message
        # The refused attempt never touched the shard, so the owner's next flush still works.
        owner.upsert([point(2, basis(1))])
        assert owner.ids(TENANT, USER) == {pid(1), pid(2)}

    assert _probe_other_process(path) == {"count": 2, "ids": [pid(1), pid(2)]}


def test_edge_second_instance_in_same_process_is_refused(tmp_path: Path) -> None:
    first = EdgeVectorIndex(tmp_path / "shard")
    second = EdgeVectorIndex(tmp_path / "shard")
    try:
        first.ensure(DIM, MODEL)
        with pytest.raises(IndexUnavailable, match="owned by another process"):
            second.count()
    finally:
        first.close()
        second.close()


def test_edge_opens_lazily_and_close_releases(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    with closing(EdgeVectorIndex(path)) as idle:  # constructed, never used: must not own anything yet
        writer = EdgeVectorIndex(path)
        writer.ensure(DIM, MODEL)
        writer.upsert([point(1, basis(0))])
        writer.close()
        assert idle.ids(TENANT, USER) == {pid(1)}


def test_edge_data_and_model_persist_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    first = EdgeVectorIndex(path)
    first.ensure(DIM, MODEL)
    first.upsert([point(1, basis(0)), point(2, basis(1), status="superseded")])
    first.delete(TENANT, USER, [pid(2)])
    first.close()

    with closing(EdgeVectorIndex(path)) as second:
        # No ensure(): a reopened shard serves reads and writes with the recorded dim.
        assert [h.id for h in second.search(TENANT, USER, basis(0), limit=5)] == [pid(1)]
        with pytest.raises(ValueError, match="dimensions"):
            second.upsert([IndexPoint(id=pid(3), tenant_id=TENANT, user_id=USER, vector=[1.0] * (DIM + 1))])
        with pytest.raises(EmbeddingModelMismatch):
            second.ensure(DIM, OTHER_MODEL)
        second.ensure(DIM, MODEL)
        assert second.count() == 1
    assert json.loads((tmp_path / "shard.meta.json").read_text()) == {"model": MODEL, "dim": DIM}


def test_edge_shard_without_meta_is_adopted_only_when_empty(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    meta = tmp_path / "shard.meta.json"
    with closing(EdgeVectorIndex(path)) as index:
        index.ensure(DIM, MODEL)
        meta.unlink()
        index.ensure(DIM, OTHER_MODEL)  # empty: nothing to mix up
        index.upsert([point(1, basis(0))])
        meta.unlink()
        with pytest.raises(EmbeddingModelMismatch) as excinfo:
            index.ensure(DIM, OTHER_MODEL)
        assert excinfo.value.stored == UNRECORDED


def test_edge_never_creates_in_or_wipes_a_foreign_directory(tmp_path: Path) -> None:
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("precious")
    with closing(EdgeVectorIndex(foreign)) as index:
        with pytest.raises(IndexUnavailable, match="neither an empty directory"):
            index.ensure(DIM, MODEL)
        with pytest.raises(IndexUnavailable, match="neither an empty directory"):
            index.reset(DIM, MODEL)
    assert sorted(p.name for p in foreign.iterdir()) == ["keep.txt"]


# ---- the embedded index's files deleted under it (docs/RELIABILITY.md, "Consistency") -------------


class Losses:
    """What the adapter reports through ``on_lost`` (the composition root sends a reconcile)."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def __call__(self, note: str) -> None:
        self.notes.append(note)


def _meta(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "shard.meta.json").read_text())


def test_edge_files_deleted_under_the_open_index_are_noticed_and_never_answered_from_memory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shard"
    losses = Losses()
    with closing(EdgeVectorIndex(path, on_lost=losses)) as index:
        index.ensure(DIM, MODEL)
        index.upsert([point(1, basis(0)), point(2, basis(1)), point(3, basis(2))])
        assert len(index.search(TENANT, USER, basis(0), limit=5)) == 3
        shutil.rmtree(path)
        # The engine would go on answering the three points from memory; the index says it lost them.
        with pytest.raises(IndexUnavailable, match="missing .*vanished while pid"):
            index.search(TENANT, USER, basis(0), limit=5)
        with pytest.raises(IndexUnavailable, match="missing .*vanished while pid"):
            index.search_keywords(TENANT, USER, SparseTerms((1,), (1.0,)), limit=5)
        [note] = losses.notes
        assert "vanished while pid" in note and _meta(tmp_path)["lost"] == note
        assert index.lost() == note
        # Reads that feed a repair see what is left: nothing.
        assert index.ids(TENANT, USER) == set() and index.payloads(TENANT, USER) == {}
        # Writes go on into a new shard; the loss is reported once.
        index.ensure(DIM, MODEL)
        index.upsert([point(4, basis(3))])
        assert index.count() == 1 and losses.notes == [note]
        with pytest.raises(IndexUnavailable, match="incomplete"):
            index.search(TENANT, USER, basis(3), limit=5)
        # A reconciliation that ran to its end after the note clears it, not after another one.
        assert index.mark_rebuilt("an older note") is False
        index.upsert([point(1, basis(0)), point(2, basis(1)), point(3, basis(2))])
        assert index.mark_rebuilt(note) is True
        assert [h.id for h in index.search(TENANT, USER, basis(3), limit=1)] == [pid(4)]
        assert index.lost() is None and _meta(tmp_path) == {"model": MODEL, "dim": DIM}
    with closing(EdgeVectorIndex(path)) as reopened:
        assert reopened.ids(TENANT, USER) == {pid(1), pid(2), pid(3), pid(4)}


def test_edge_write_into_vanishing_files_is_transient_not_an_engine_error(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    losses = Losses()
    with closing(EdgeVectorIndex(path, on_lost=losses)) as index:
        index.ensure(DIM, MODEL)
        index.upsert([point(1, basis(0))])
        # Halfway through a deletion: the segments' files are gone, the directories still there.
        for segment in (path / "segments").iterdir():
            shutil.rmtree(segment)
            segment.mkdir()
        with pytest.raises(IndexUnavailable, match="could not write"):
            index.upsert([point(2, basis(1))])
        shutil.rmtree(path)  # the deletion finishes; the task's retry:
        index.ensure(DIM, MODEL)
        index.upsert([point(2, basis(1))])
        assert index.ids(TENANT, USER) == {pid(2)} and len(losses.notes) == 1
        with pytest.raises(IndexUnavailable, match="incomplete"):
            index.search(TENANT, USER, basis(1), limit=5)
    # Leaving the block closed the index: a close after the loss releases the lock (no flush into
    # vanished files).
    with closing(EdgeVectorIndex(path)) as reopened:
        assert reopened.ids(TENANT, USER) == {pid(2)}


def test_edge_set_payload_delete_and_close_after_the_files_vanished(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    index = EdgeVectorIndex(path)
    index.ensure(DIM, MODEL)
    index.upsert([point(1, basis(0))])
    shutil.rmtree(path)
    index.set_payload(TENANT, USER, {pid(1): {"score": 2.0}})  # no shard: nothing to update
    index.delete(TENANT, USER, [pid(1)])
    index.close()  # before the fix: the flush into vanished files raised and kept the lock
    with (
        closing(EdgeVectorIndex(path)) as other,
        pytest.raises(IndexUnavailable, match="missing although shard.meta.json records it"),
    ):
        other.search(TENANT, USER, basis(0), limit=5)


def test_edge_directory_replaced_under_the_open_index_is_reloaded_and_noted(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    with closing(EdgeVectorIndex(path)) as index:
        index.ensure(DIM, MODEL)
        index.upsert([point(1, basis(0))])
        index.close()
        shutil.copytree(path, tmp_path / "backup")
        index.upsert([point(2, basis(1))])
        # A backup restored under the running owner: an older copy, in a new directory.
        shutil.rmtree(path)
        shutil.copytree(tmp_path / "backup", path)
        assert index.ids(TENANT, USER) == {pid(1)}
        with pytest.raises(IndexUnavailable, match="incomplete"):
            index.search(TENANT, USER, basis(0), limit=5)


def test_edge_meta_without_its_shard_is_noted_at_ensure_and_cleared_by_reset(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    first = EdgeVectorIndex(path)
    first.ensure(DIM, MODEL)
    first.upsert([point(1, basis(0))])
    first.close()
    shutil.rmtree(path)  # deleted while no process had it open
    losses = Losses()
    with closing(EdgeVectorIndex(path, on_lost=losses)) as index:
        index.ensure(DIM, MODEL)  # the index worker starting: an empty shard, and the loss noted
        [note] = losses.notes
        assert "was missing although shard.meta.json records it" in note and index.lost() == note
        index.upsert([point(2, basis(1))])
        with pytest.raises(IndexUnavailable, match="incomplete"):
            index.search(TENANT, USER, basis(1), limit=5)
        index.reset(DIM, MODEL)  # `cuemem reindex` starts from an empty index and fills it all
        assert index.lost() is None and index.search(TENANT, USER, basis(1), limit=5) == []
        assert len(losses.notes) == 1


def test_edge_lost_notes_a_missing_shard_for_the_reconciliation_about_to_run(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    first = EdgeVectorIndex(path)
    first.ensure(DIM, MODEL)
    first.close()
    shutil.rmtree(path)
    with closing(EdgeVectorIndex(path)) as index:
        note = index.lost()
        assert note is not None and _meta(tmp_path)["lost"] == note
        index.ensure(DIM, MODEL)  # the reconciliation writes: the note stays until it finished
        assert index.lost() == note and index.mark_rebuilt(note)
        assert EdgeVectorIndex(tmp_path / "never").lost() is None


def test_edge_loss_noticed_by_a_container_sends_a_reconciliation(tmp_path: Path) -> None:
    from shared.queues import TaskName
    from shared.settings import Settings
    from shared.storage import FollowUp
    from workers.bootstrap import build_container

    sent: list[FollowUp] = []
    settings = Settings(
        data_dir=tmp_path, broker_url="redis://127.0.0.1:1/0", database_url="postgresql://x/y"
    )
    c = build_container(settings, uow=lambda: None, dispatch=sent.extend)  # type: ignore[arg-type,return-value]
    try:
        c.index().ensure(DIM, MODEL)
        c.index().upsert([point(1, basis(0))])
        shutil.rmtree(tmp_path / "qdrant")
        with pytest.raises(IndexUnavailable, match="vanished while pid"):
            c.index().search(TENANT, USER, basis(0), limit=5)
        assert sent == [FollowUp(TaskName.RECONCILE.value, ())]
    finally:
        c.close()


def _count_in_forked_child(index: EdgeVectorIndex, out: multiprocessing.Queue[str]) -> None:
    try:
        index.count()
        out.put("opened")
    except IndexUnavailable as exc:
        out.put(f"unavailable: {exc}")


@pytest.mark.skipif(sys.platform != "linux", reason="fork() semantics")
def test_edge_index_opened_before_fork_is_refused_in_child(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "shard")
    index.ensure(DIM, MODEL)
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[str] = ctx.Queue()
    child = ctx.Process(target=_count_in_forked_child, args=(index, out))
    try:
        child.start()
        answer = out.get(timeout=30)
        child.join(timeout=30)
        assert answer.startswith("unavailable:") and "before a fork" in answer
        index.upsert([point(1, basis(0))])
        assert index.count() == 1
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        index.close()
