"""The server client (QdrantServerIndex) beyond the shared contract: the model recorded in the
collection metadata, adoption of unrecorded collections, the sparse vector declared with IDF.
"""

from __future__ import annotations

import pytest
from qdrant_client import QdrantClient, models

from shared.ports import EmbeddingModelMismatch
from tests.support.index_points import DIM, MODEL, basis, check_dense_only_collection_asks_for_reindex, pid
from workers.index import UNRECORDED
from workers.index.server import QdrantServerIndex

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")


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


def test_server_collection_without_sparse_vector_asks_for_reindex() -> None:
    client = QdrantClient(":memory:")
    _bare_collection(client)  # as an older cuemem (or a hand) made it: dense vectors only
    index = QdrantServerIndex(client, "test")
    check_dense_only_collection_asks_for_reindex(index)
    index.close()


def test_server_declares_the_sparse_vector_with_idf() -> None:
    client = QdrantClient(":memory:")
    QdrantServerIndex(client, "test").ensure(DIM, MODEL)

    sparse = client.get_collection("test").config.params.sparse_vectors or {}
    assert sparse["bm25"].modifier == models.Modifier.IDF
