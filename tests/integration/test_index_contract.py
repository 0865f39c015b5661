"""One contract for every VectorIndex: the embedded engine, the server client and the test fake.

The server adapter runs against qdrant-client's local mode (":memory:"), which shares the client
API with a real server; it is a compatibility check, not an engine test.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient, models

from shared.ports import EmbeddingModelMismatch, IndexPoint, IndexUnavailable, VectorIndex
from tests.fake_index import FakeVectorIndex
from workers.index import UNRECORDED
from workers.index.edge import EdgeVectorIndex
from workers.index.server import QdrantServerIndex

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

DIM = 8
MODEL = "test-model-a"
OTHER_MODEL = "test-model-b"
TENANT = "t1"
USER = "alice"
REPO_ROOT = Path(__file__).resolve().parents[2]


def pid(n: int) -> str:
    """A readable, sortable point id: pid(1) < pid(2) < ... as UUID text."""
    return str(uuid.UUID(int=n))


def basis(i: int, scale: float = 1.0) -> list[float]:
    return [scale if k == i else 0.0 for k in range(DIM)]


def point(
    n: int,
    vector: list[float],
    *,
    tenant: str = TENANT,
    user: str = USER,
    status: str = "active",
    type_: str = "fact",
) -> IndexPoint:
    return IndexPoint(
        id=pid(n), tenant_id=tenant, user_id=user, vector=vector, payload={"status": status, "type": type_}
    )


def _edge(tmp_path: Path) -> EdgeVectorIndex:
    return EdgeVectorIndex(tmp_path / "shard")


def _server(tmp_path: Path) -> QdrantServerIndex:
    return QdrantServerIndex(QdrantClient(":memory:"), "test")


def _fake(tmp_path: Path) -> FakeVectorIndex:
    return FakeVectorIndex()


FACTORIES: dict[str, Callable[[Path], VectorIndex]] = {"edge": _edge, "server": _server, "fake": _fake}


@pytest.fixture(params=sorted(FACTORIES))
def blank(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    """An index that was never ensured."""
    index = FACTORIES[request.param](tmp_path)
    yield index
    index.close()


@pytest.fixture
def index(blank: VectorIndex) -> VectorIndex:
    blank.ensure(DIM, MODEL)
    return blank


# ---- the contract ---------------------------------------------------------------------------------


def test_search_returns_nearest_point_first_with_payload(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0)), point(2, basis(1)), point(3, basis(2))])

    hits = index.search(TENANT, USER, [0.1, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], limit=3)

    assert [h.id for h in hits] == [pid(2), pid(1), pid(3)]
    assert hits[0].score == pytest.approx(0.9 / (0.82**0.5), abs=1e-5)
    assert hits[0].score > hits[1].score > hits[2].score
    assert hits[0].payload == {"tenant_id": TENANT, "user_id": USER, "status": "active", "type": "fact"}


def test_limit_caps_results(index: VectorIndex) -> None:
    index.upsert([point(n, basis(n)) for n in range(5)])

    assert len(index.search(TENANT, USER, basis(0), limit=2)) == 2
    assert index.search(TENANT, USER, basis(0), limit=0) == []


# Users and tenants that must never see each other's points: look-alikes differ by one character,
# by case or by a trailing space; the last looks like a query injection and must just match nothing.
SCOPES = [
    ("t1", "alice"),
    ("t1", "alice2"),
    ("t1", "Alice"),
    ("t1", "alice "),
    ("t2", "alice"),
    ("t10", "alice"),
]


def test_search_and_ids_never_cross_users_or_tenants(index: VectorIndex) -> None:
    # The same vector for everyone, so only the filter can keep them apart.
    index.upsert([point(n, basis(0), tenant=t, user=u) for n, (t, u) in enumerate(SCOPES, start=1)])

    for n, (tenant, user) in enumerate(SCOPES, start=1):
        hits = index.search(tenant, user, basis(0), limit=10)
        assert [h.id for h in hits] == [pid(n)], (tenant, user)
        assert hits[0].payload["tenant_id"] == tenant
        assert hits[0].payload["user_id"] == user
        assert index.ids(tenant, user) == {pid(n)}


@pytest.mark.parametrize(
    ("tenant", "user"),
    [
        ("t1", "* OR 1=1"),
        ("t1", "alice' OR '1'='1"),
        ("t1", "al"),
        ("t1", "ALICE"),
        ("t", "alice"),
        ("*", "*"),
    ],
)
def test_unknown_or_injection_looking_scope_finds_nothing(index: VectorIndex, tenant: str, user: str) -> None:
    index.upsert([point(n, basis(0), tenant=t, user=u) for n, (t, u) in enumerate(SCOPES, start=1)])

    assert index.search(tenant, user, basis(0), limit=10, statuses=("active", "superseded")) == []
    assert index.ids(tenant, user) == set()


def test_status_filter(index: VectorIndex) -> None:
    index.upsert(
        [
            point(1, basis(0), status="active"),
            point(2, basis(0), status="superseded"),
            point(3, basis(0), status="deleted"),
        ]
    )

    assert [h.id for h in index.search(TENANT, USER, basis(0), limit=10)] == [pid(1)]
    both = index.search(TENANT, USER, basis(0), limit=10, statuses=("active", "superseded"))
    assert [h.id for h in both] == [pid(1), pid(2)]
    assert [h.id for h in index.search(TENANT, USER, basis(0), limit=10, statuses="superseded")] == [pid(2)]
    assert index.search(TENANT, USER, basis(0), limit=10, statuses=()) == []


def test_upsert_replaces_point_with_same_id(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0), status="active")])
    index.upsert([point(1, basis(1), status="superseded")])

    assert index.count() == 1
    assert index.search(TENANT, USER, basis(0), limit=10) == []
    [hit] = index.search(TENANT, USER, basis(1), limit=10, statuses=("superseded",))
    assert hit.id == pid(1)
    assert hit.score == pytest.approx(1.0, abs=1e-5)


def test_ids_are_canonical_uuid_text(index: VectorIndex) -> None:
    index.upsert([IndexPoint(id=pid(7).upper(), tenant_id=TENANT, user_id=USER, vector=basis(0), payload={})])

    assert index.ids(TENANT, USER) == {pid(7)}


def test_delete_is_scoped_to_the_user(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0), user="alice"), point(2, basis(0), user="bob"), point(3, basis(1))])

    # Bob guesses Alice's id; nothing happens to Alice's point.
    index.delete(TENANT, "bob", [pid(1)])
    index.delete("t2", "alice", [pid(1)])
    assert index.ids(TENANT, "alice") == {pid(1), pid(3)}

    index.delete(TENANT, "alice", [pid(1), pid(99)])
    assert index.ids(TENANT, "alice") == {pid(3)}
    assert index.ids(TENANT, "bob") == {pid(2)}
    assert index.count() == 2

    index.delete(TENANT, "alice", [])
    assert index.count() == 2


def test_ids_and_count(index: VectorIndex) -> None:
    assert index.count() == 0
    assert index.ids(TENANT, USER) == set()

    index.upsert([point(n, basis(n % DIM), status="superseded" if n % 2 else "active") for n in range(1, 6)])
    index.upsert([point(10, basis(0), user="bob")])

    # ids() lists every status: it is what reconciliation compares with the database.
    assert index.ids(TENANT, USER) == {pid(n) for n in range(1, 6)}
    assert index.ids(TENANT, "bob") == {pid(10)}
    assert index.count() == 6


def test_reset_drops_everything_and_switches_model(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0)), point(2, basis(1), user="bob")])

    index.reset(DIM * 2, OTHER_MODEL)

    assert index.count() == 0
    assert index.ids(TENANT, USER) == set()
    index.ensure(DIM * 2, OTHER_MODEL)
    with pytest.raises(EmbeddingModelMismatch):
        index.ensure(DIM, MODEL)
    index.upsert(
        [IndexPoint(id=pid(3), tenant_id=TENANT, user_id=USER, vector=[1.0] * (DIM * 2), payload={})]
    )
    assert index.ids(TENANT, USER) == {pid(3)}


def test_ensure_is_idempotent_and_keeps_points(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0))])

    index.ensure(DIM, MODEL)

    assert index.ids(TENANT, USER) == {pid(1)}


def test_other_model_raises_mismatch(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0))])

    with pytest.raises(EmbeddingModelMismatch) as excinfo:
        index.ensure(DIM, OTHER_MODEL)
    assert (excinfo.value.stored, excinfo.value.configured) == (MODEL, OTHER_MODEL)
    assert "reindex" in str(excinfo.value)

    with pytest.raises(EmbeddingModelMismatch):
        index.ensure(DIM + 1, MODEL)
    # A refused ensure changes nothing.
    assert index.ids(TENANT, USER) == {pid(1)}


@pytest.mark.parametrize("bad", ["", "   "])
def test_empty_tenant_or_user_is_rejected(index: VectorIndex, bad: str) -> None:
    index.upsert([point(1, basis(0))])

    for call in (
        lambda t, u: index.search(t, u, basis(0), limit=5),
        lambda t, u: index.ids(t, u),
        lambda t, u: index.delete(t, u, [pid(1)]),
        lambda t, u: index.upsert([point(2, basis(0), tenant=t, user=u)]),
    ):
        with pytest.raises(ValueError, match="tenant_id"):
            call(bad, USER)
        with pytest.raises(ValueError, match="user_id"):
            call(TENANT, bad)
    assert index.count() == 1


def test_malformed_points_are_rejected(index: VectorIndex) -> None:
    with pytest.raises(ValueError, match="UUID"):
        index.upsert([IndexPoint(id="alice", tenant_id=TENANT, user_id=USER, vector=basis(0))])
    with pytest.raises(ValueError, match="dimensions"):
        index.upsert([IndexPoint(id=pid(1), tenant_id=TENANT, user_id=USER, vector=[1.0] * (DIM - 1))])
    with pytest.raises(ValueError, match="contradicts"):
        index.upsert(
            [
                IndexPoint(
                    id=pid(1), tenant_id=TENANT, user_id=USER, vector=basis(0), payload={"user_id": "bob"}
                )
            ]
        )
    with pytest.raises(ValueError, match="dimensions"):
        index.search(TENANT, USER, [1.0] * (DIM + 1), limit=1)
    assert index.count() == 0


def test_ties_are_ordered_by_id(index: VectorIndex) -> None:
    # Inserted in reverse id order, with equal scores reached through different vectors too.
    tied = [point(n, basis(0, scale=float(n))) for n in range(9, 0, -1)]
    index.upsert([*tied, point(20, basis(1)), point(21, [1.0, 1.0, 0, 0, 0, 0, 0, 0])])

    first = index.search(TENANT, USER, basis(0), limit=4)
    assert [h.id for h in first] == [pid(n) for n in range(1, 5)]
    assert all(h.score == pytest.approx(1.0, abs=1e-5) for h in first)

    everything = index.search(TENANT, USER, basis(0), limit=20)
    assert [h.id for h in everything] == [*(pid(n) for n in range(1, 10)), pid(21), pid(20)]
    assert index.search(TENANT, USER, basis(0), limit=20) == everything


def test_unensured_index_reads_empty_and_refuses_writes(blank: VectorIndex) -> None:
    assert blank.search(TENANT, USER, basis(0), limit=5) == []
    assert blank.ids(TENANT, USER) == set()
    assert blank.count() == 0
    blank.delete(TENANT, USER, [pid(1)])
    with pytest.raises(IndexUnavailable, match="ensure"):
        blank.upsert([point(1, basis(0))])


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
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_edge_second_process_is_refused_and_owner_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    owner = EdgeVectorIndex(path)
    try:
        owner.ensure(DIM, MODEL)
        owner.upsert([point(1, basis(0))])

        refused = _probe_other_process(path)

        message = str(refused["unavailable"])
        assert f"{path}.lock" in message
        assert f"pid {os.getpid()}" in message
        # The refused attempt never touched the shard, so the owner's next flush still works.
        owner.upsert([point(2, basis(1))])
        assert owner.ids(TENANT, USER) == {pid(1), pid(2)}
    finally:
        owner.close()

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
    idle = EdgeVectorIndex(path)  # constructed, never used: must not own anything yet
    try:
        writer = EdgeVectorIndex(path)
        writer.ensure(DIM, MODEL)
        writer.upsert([point(1, basis(0))])
        writer.close()
        assert idle.ids(TENANT, USER) == {pid(1)}
    finally:
        idle.close()


def test_edge_data_and_model_persist_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    first = EdgeVectorIndex(path)
    first.ensure(DIM, MODEL)
    first.upsert([point(1, basis(0)), point(2, basis(1), status="superseded")])
    first.delete(TENANT, USER, [pid(2)])
    first.close()

    second = EdgeVectorIndex(path)
    try:
        # No ensure(): a reopened shard serves reads and writes with the recorded dim.
        assert [h.id for h in second.search(TENANT, USER, basis(0), limit=5)] == [pid(1)]
        with pytest.raises(ValueError, match="dimensions"):
            second.upsert([IndexPoint(id=pid(3), tenant_id=TENANT, user_id=USER, vector=[1.0] * (DIM + 1))])
        with pytest.raises(EmbeddingModelMismatch):
            second.ensure(DIM, OTHER_MODEL)
        second.ensure(DIM, MODEL)
        assert second.count() == 1
    finally:
        second.close()
    assert json.loads((tmp_path / "shard.meta.json").read_text()) == {"model": MODEL, "dim": DIM}


def test_edge_shard_without_meta_is_adopted_only_when_empty(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    meta = tmp_path / "shard.meta.json"
    index = EdgeVectorIndex(path)
    try:
        index.ensure(DIM, MODEL)
        meta.unlink()
        index.ensure(DIM, OTHER_MODEL)  # empty: nothing to mix up
        index.upsert([point(1, basis(0))])
        meta.unlink()
        with pytest.raises(EmbeddingModelMismatch) as excinfo:
            index.ensure(DIM, OTHER_MODEL)
        assert excinfo.value.stored == UNRECORDED
    finally:
        index.close()


def test_edge_never_creates_in_or_wipes_a_foreign_directory(tmp_path: Path) -> None:
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("precious")
    index = EdgeVectorIndex(foreign)
    try:
        with pytest.raises(IndexUnavailable, match="neither an empty directory"):
            index.ensure(DIM, MODEL)
        with pytest.raises(IndexUnavailable, match="neither an empty directory"):
            index.reset(DIM, MODEL)
    finally:
        index.close()
    assert sorted(p.name for p in foreign.iterdir()) == ["keep.txt"]


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


# ---- server client: the model record in collection metadata ---------------------------------------


def _bare_collection(client: QdrantClient, dim: int = DIM) -> None:
    """A collection made by hand, without cuemem's metadata record."""
    client.create_collection(
        "test", vectors_config={"dense": models.VectorParams(size=dim, distance=models.Distance.COSINE)}
    )


def test_server_records_model_in_collection_metadata() -> None:
    client = QdrantClient(":memory:")
    index = QdrantServerIndex(client, "test")
    index.ensure(DIM, MODEL)

    assert client.get_collection("test").config.metadata == {"model": MODEL, "dim": DIM}
    index.close()


def test_server_adopts_only_an_empty_unrecorded_collection() -> None:
    client = QdrantClient(":memory:")
    _bare_collection(client)
    index = QdrantServerIndex(client, "test")
    index.ensure(DIM, MODEL)
    assert client.get_collection("test").config.metadata == {"model": MODEL, "dim": DIM}

    client.delete_collection("test")
    _bare_collection(client)
    client.upsert("test", [models.PointStruct(id=pid(1), vector={"dense": basis(0)}, payload={})])
    with pytest.raises(EmbeddingModelMismatch) as excinfo:
        QdrantServerIndex(client, "test").ensure(DIM, MODEL)
    assert excinfo.value.stored == UNRECORDED
    index.close()
