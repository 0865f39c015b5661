"""deploy/kubernetes/ agrees with Kubernetes and with the package it deploys.

No cluster here: every document is checked against the Kubernetes 1.37 API schema bundled with
``kubernetes-validate`` (offline, strict: an unknown field fails), and the properties the compose
file promises hold here too: the same services, real commands and settings with compose's
defaults, secrets only from a Secret, one beat, scalable workers, a durable Redis, Flower behind
a login, probes on real routes.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

from shared.settings import Settings
from tests.support.deploy import ROOT, assert_durable_redis, check_command

K8S = ROOT / "deploy" / "kubernetes"
VERSION = "1.37.0"
SECRET_NAME = re.compile(r"PASSWORD|API_KEY|SECRET|TOKEN|AUTH|DATABASE_URL")
WORKLOADS = ("Deployment", "StatefulSet", "Job")


def _documents() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


DOCS = _documents()


def _by(kind: str, name: str) -> dict[str, Any]:
    found = [d for _, d in DOCS if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["spec"]["template"]["spec"]["containers"]


def _cuemem_containers() -> list[tuple[str, dict[str, Any]]]:
    return [
        (d["metadata"]["name"], c)
        for _, d in DOCS
        if d["kind"] in WORKLOADS
        for c in _containers(d)
        if c["image"] == "cuemem"
    ]


@pytest.mark.parametrize(("file", "doc"), DOCS, ids=[f"{f}:{d['kind']}" for f, d in DOCS])
def test_every_document_is_valid_kubernetes(file: str, doc: dict[str, Any]) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(doc, VERSION, strict=True)


def test_the_schema_check_can_fail() -> None:
    """The control: a misspelt field and a wrong type are refused by the same check."""
    import kubernetes_validate
    from kubernetes_validate.utils import ValidationError

    beat = copy.deepcopy(_by("Deployment", "cuemem-beat"))
    beat["spec"]["replica"] = 1
    with pytest.raises(ValidationError):
        kubernetes_validate.validate(beat, VERSION, strict=True)
    worker = copy.deepcopy(_by("Deployment", "cuemem-worker"))
    worker["spec"]["replicas"] = "two"
    with pytest.raises(ValidationError):
        kubernetes_validate.validate(worker, VERSION, strict=True)


def test_kustomization_lists_every_file_and_names_the_image() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files
    assert [i["name"] for i in kustomization["images"]] == ["cuemem"]
    assert _cuemem_containers(), "no container runs the cuemem image"


def test_the_services_of_compose_are_all_here() -> None:
    for kind, name in [
        ("Deployment", "cuemem-api"),
        ("Service", "cuemem-api"),
        ("Deployment", "cuemem-worker"),
        ("Deployment", "cuemem-beat"),
        ("Deployment", "cuemem-flower"),
        ("Job", "cuemem-migrate"),
        ("StatefulSet", "qdrant"),
        ("Service", "qdrant"),
        ("StatefulSet", "redis"),
        ("Service", "redis"),
    ]:
        _by(kind, name)
    for _, doc in DOCS:
        if doc["kind"] == "Service":
            selector = doc["spec"]["selector"]
            assert any(
                d["kind"] in WORKLOADS and d["spec"]["template"]["metadata"]["labels"] == selector
                for _, d in DOCS
            ), f"Service {doc['metadata']['name']} selects no pod"


@pytest.mark.parametrize(
    ("workload", "container"), _cuemem_containers(), ids=[n for n, _ in _cuemem_containers()]
)
def test_every_command_exists_in_the_package(workload: str, container: dict[str, Any]) -> None:
    check_command(workload, [str(part) for part in container["command"]])


def test_settings_are_real_with_composes_defaults() -> None:
    config = _by("ConfigMap", "cuemem-config")["data"]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["x-cuemem-env"]
    fields = set(Settings.model_fields)
    for name, value in config.items():
        assert name.startswith("CUEMEM_") and name[7:].lower() in fields, name
        assert not SECRET_NAME.search(name), f"{name} is a secret: it belongs in the Secret"
        Settings(**{name[7:].lower(): value})  # the package accepts the value
        default = re.fullmatch(r"\$\{\w+:-(?P<d>[^}]*)\}", str(compose.get(name, "")))
        if default is not None:
            assert value == default["d"], f"{name}: {value!r} here, {default['d']!r} in compose"
    assert {"CUEMEM_BROKER_URL", "CUEMEM_QDRANT_URL"} <= set(config)
    # And the other way: every setting compose passes is here, in the Secret, or unset by default.
    (api,) = _containers(_by("Deployment", "cuemem-api"))
    secret = {e["name"] for e in api["env"]}
    for name, value in compose.items():
        unset = re.fullmatch(r"\$\{\w+:-\}", str(value)) is not None
        assert name in config or name in secret or unset, f"{name} is set in compose but not here"


def test_secrets_come_only_from_the_secret() -> None:
    checked = 0
    for workload, container in _cuemem_containers():
        assert container["envFrom"] == [{"configMapRef": {"name": "cuemem-config"}}], workload
        env = {e["name"]: e for e in container.get("env", [])}
        assert "CUEMEM_DATABASE_URL" in env, workload
        for name, entry in env.items():
            assert "value" not in entry, f"{workload}.{name} is a literal"
            assert SECRET_NAME.search(name), f"{workload}.{name}: only secrets are set one by one"
            assert entry["valueFrom"]["secretKeyRef"]["name"] == "cuemem-secrets"
            checked += 1
    assert checked >= 10


def test_one_beat_scalable_workers_and_a_login_for_flower() -> None:
    beat = _by("Deployment", "cuemem-beat")["spec"]
    assert beat["replicas"] == 1 and beat["strategy"] == {"type": "Recreate"}
    worker = _by("Deployment", "cuemem-worker")
    assert not any("hostPort" in p for c in _containers(worker) for p in c.get("ports", []))
    # Running tasks finish before a pod stops: the grace outlasts the task time limit.
    grace = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > int(_by("ConfigMap", "cuemem-config")["data"]["CUEMEM_TASK_TIME_LIMIT_S"])
    (flower,) = _containers(_by("Deployment", "cuemem-flower"))
    auth = {e["name"]: e for e in flower["env"]}["FLOWER_BASIC_AUTH"]["valueFrom"]["secretKeyRef"]
    assert not auth.get("optional", False), "Flower never runs without a login"
    for _, doc in DOCS:
        if doc["kind"] in WORKLOADS and any(c["image"] == "cuemem" for c in _containers(doc)):
            assert doc["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_redis_is_as_durable_as_in_compose() -> None:
    (redis,) = _containers(_by("StatefulSet", "redis"))
    # The container's command (or, without one, the image's: it runs the args) followed by its args.
    assert_durable_redis([*redis.get("command", []), *redis["args"]])
    assert redis["volumeMounts"][0]["mountPath"] == "/data"


def test_probes_ask_real_routes() -> None:
    from service.http.app import ROUTERS

    routes = {route.path for router in ROUTERS for route in router.routes}  # type: ignore[attr-defined]
    (api,) = _containers(_by("Deployment", "cuemem-api"))
    for probe in ("livenessProbe", "readinessProbe"):
        path = api[probe]["httpGet"]["path"]
        assert path in routes, f"{probe}: {path} is not a route of the API"
        assert api[probe]["httpGet"]["port"] == 8080
    assert api["command"][api["command"].index("--port") + 1] == "8080"


# Kubernetes quantity suffixes (resource.Quantity): binary, decimal, and milli for CPU.
_SUFFIX = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "m": 1e-3,
}


def _quantity(value: str | int | float) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]i|[kMGTm])?", str(value))
    assert match, f"not a quantity this check reads: {value!r}"
    return float(match[1]) * _SUFFIX.get(match[2] or "", 1)


@pytest.mark.parametrize(
    ("workload", "container"),
    [(d["metadata"]["name"], c) for _, d in DOCS if d["kind"] in WORKLOADS for c in _containers(d)],
    ids=lambda x: x if isinstance(x, str) else x["name"],
)
def test_every_container_has_requests_and_limits(workload: str, container: dict[str, Any]) -> None:
    """Sized from `cuemem bench footprint` (docs/BENCHMARKS.md): a request to schedule by and a
    limit above it, for CPU and memory, on every container."""
    resources = container.get("resources", {})
    for kind in ("cpu", "memory"):
        request = resources.get("requests", {}).get(kind)
        limit = resources.get("limits", {}).get(kind)
        assert request is not None and limit is not None, f"{workload}: no {kind} request and limit"
        assert 0 < _quantity(request) <= _quantity(limit), (
            f"{workload}: {kind} limit {limit} < request {request}"
        )


def test_every_sized_manifest_says_where_its_numbers_come_from() -> None:
    for path in sorted(K8S.glob("*.yaml")):
        text = path.read_text()
        if "resources:" in text and "containers:" in text:
            assert "docs/BENCHMARKS.md" in text, f"{path.name}: say where its sizes come from"
