"""deploy/kubernetes/keda (a kustomize Component) and deploy/kubernetes-keda (the overlay that
enables it): KEDA scales the pipeline workers on the Redis lists of exactly the queues they
consume, and nothing else; the base applies without KEDA.

No cluster and no KEDA here: the documents are read as kustomize would read them, and checked
against the package (the Queue enum, the worker's queues, kombu's priority lists, the settings).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from producers.fair_share import BACKLOG_PRIORITY
from shared.queues import Queue
from shared.settings import Settings
from tests.support.deploy import ROOT
from workers.broker import PRIORITY_SEP, queue_lists
from workers.runtime.processes import worker_queues

K8S = ROOT / "deploy" / "kubernetes"
COMPONENT = K8S / "keda"
OVERLAY = ROOT / "deploy" / "kubernetes-keda"


def _yaml_docs(path: Any) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _base_docs() -> list[dict[str, Any]]:
    base = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return [doc for name in base["resources"] for doc in _yaml_docs(K8S / name)]


def _base(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in _base_docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def _scaled_objects() -> list[dict[str, Any]]:
    component = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    docs = [doc for name in component["resources"] for doc in _yaml_docs(COMPONENT / name)]
    scaled = [d for d in docs if d["kind"] == "ScaledObject"]
    assert scaled and len(scaled) == len(docs), "the component adds ScaledObjects only"
    return scaled


def _consumed_queues(deployment: dict[str, Any]) -> set[str]:
    """The queues the Deployment's `cuemem worker` consumes, as the command decides them: its -Q,
    or else workers.runtime.processes.worker_queues with the ConfigMap's settings."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    command = [str(part) for part in container["command"]]
    assert command[:2] == ["cuemem", "worker"], f"not a pipeline worker: {command}"
    assert "--index-owner" not in command, "the embedded index's owner must never be scaled"
    for flag in ("-Q", "--queues"):
        if flag in command:
            return set(command[command.index(flag) + 1].split(","))
    config = _base("ConfigMap", "cuemem-config")["data"]
    return set(worker_queues(Settings(qdrant_url=config.get("CUEMEM_QDRANT_URL"))))


def test_the_base_applies_without_keda() -> None:
    base = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "components" not in base, "the KEDA component is optional: only its overlay enables it"
    assert not any(str(r).startswith("keda") for r in base["resources"])
    assert all(d["apiVersion"].split("/")[0] != "keda.sh" for d in _base_docs())


def test_the_component_and_its_overlay() -> None:
    component = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert component["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
    # The autoscaler owns the replica count: the base's would be re-applied on every apply.
    (patch,) = component["patches"]
    assert patch["target"] == {"kind": "Deployment", "name": "cuemem-worker"}
    assert yaml.safe_load(patch["patch"]) == [{"op": "remove", "path": "/spec/replicas"}]
    overlay = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    assert overlay["kind"] == "Kustomization"
    assert [(OVERLAY / r).resolve() for r in overlay["resources"]] == [K8S]
    assert [(OVERLAY / c).resolve() for c in overlay["components"]] == [COMPONENT]


@pytest.mark.parametrize("scaled", _scaled_objects(), ids=lambda d: d["metadata"]["name"])
def test_the_scaled_object_targets_the_pipeline_workers(scaled: dict[str, Any]) -> None:
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    spec = scaled["spec"]
    target = spec["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"]) == ("apps/v1", "Deployment")
    deployment = _base("Deployment", target["name"])
    assert target["name"] != "cuemem-beat", "a second beat would enqueue every periodic task twice"
    _consumed_queues(deployment)  # a `cuemem worker`, never the index owner
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    # Enabling KEDA never runs fewer workers than the base alone.
    assert spec["minReplicaCount"] >= deployment["spec"]["replicas"]


@pytest.mark.parametrize("scaled", _scaled_objects(), ids=lambda d: d["metadata"]["name"])
def test_the_triggers_are_the_lists_of_exactly_the_workers_queues(scaled: dict[str, Any]) -> None:
    deployment = _base("Deployment", scaled["spec"]["scaleTargetRef"]["name"])
    consumed = _consumed_queues(deployment)
    assert consumed <= {q.value for q in Queue}, "a consumed queue is not in the Queue enum"
    triggers = scaled["spec"]["triggers"]
    assert {t["type"] for t in triggers} == {"redis"}
    names = [t["metadata"]["listName"] for t in triggers]
    assert len(names) == len(set(names)), "a list is watched twice"
    # Every queue's own list (priority 0), and the ingest backlog the fair share sends at 9.
    backlog = f"{Queue.INGEST.value}{PRIORITY_SEP}{BACKLOG_PRIORITY}"
    assert backlog in queue_lists(Queue.INGEST.value)
    expected = consumed | ({backlog} if Queue.INGEST.value in consumed else set())
    assert set(names) == expected
    for trigger in triggers:
        meta = trigger["metadata"]
        # A ScaledObject's trigger metadata is a map of strings (KEDA's CRD).
        assert all(isinstance(v, str) for v in meta.values()), meta
        assert int(meta["listLength"]) > 0


def test_keda_reads_the_brokers_redis_in_the_overlays_namespace() -> None:
    namespace = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())["namespace"]
    broker = urlparse(_base("ConfigMap", "cuemem-config")["data"]["CUEMEM_BROKER_URL"])
    service = _base("Service", broker.hostname or "")
    (port,) = [p["port"] for p in service["spec"]["ports"]]
    assert port == (broker.port or 6379)
    for scaled in _scaled_objects():
        for trigger in scaled["spec"]["triggers"]:
            meta = trigger["metadata"]
            # KEDA's operator runs in its own namespace: only the full service name resolves there.
            assert meta["address"] == f"{broker.hostname}.{namespace}.svc.cluster.local:{port}"
            assert meta["databaseIndex"] == (broker.path.strip("/") or "0")
