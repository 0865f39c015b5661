"""Checks shared by the deployment files' tests (docker-compose.yml, deploy/kubernetes/): a
container's command must exist in the package and parse, without running it."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"


def _cli_group() -> Any:
    import typer

    from cli.main import app

    return typer.main.get_command(app)


def check_command(name: str, argv: list[str]) -> None:
    """``argv`` (a container's command) names a real ``cuemem`` command with real options, or a
    ``celery -A <module>`` worker, beat or flower with real options."""
    if argv[0] == "cuemem":
        group = _cli_group()
        assert len(argv) > 1 and argv[1] in group.commands, f"{name}: no `cuemem {argv[1:2]}` command"
        command = group.commands[argv[1]]
        declared = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        for token in argv[2:]:
            if token.startswith("-"):
                assert token.split("=", 1)[0] in declared, f"{name}: `cuemem {argv[1]}` has no {token}"
        # Click parses the whole line (types, ranges, required arguments) without running it.
        command.make_context(f"cuemem {argv[1]}", argv[2:])
    elif argv[0] == "celery":
        assert argv[1] in ("-A", "--app"), f"{name}: name the app with -A"
        module, subcommand = argv[2], argv[3]
        was_imported = module in sys.modules
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin, f"{name}: module {module} does not exist"
        assert (module in sys.modules) == was_imported, "the app module must not be imported here"
        tree = ast.parse(Path(spec.origin).read_text())
        assigned = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        assert "app" in assigned, f"{module} defines no module-level `app`"
        assert subcommand in ("worker", "beat", "flower"), subcommand
        if subcommand == "flower":
            _check_flower(argv[4:])
    else:
        pytest.fail(f"{name}: unknown program {argv[0]!r}")


def _check_flower(options: list[str]) -> None:
    assert importlib.util.find_spec("flower") is not None, "flower is not installed"
    importlib.metadata.version("flower")
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    assert any(re.match(r"flower\b", dep) for dep in dependencies), "the image would lack flower"
    import flower.options  # noqa: F401  (defines flower's command-line options)
    from tornado.options import options as defined

    for token in options:
        assert token.startswith("--")
        assert token[2:].split("=", 1)[0] in defined, f"flower has no option {token}"


# What a durable Redis needs (docs/RELIABILITY.md, "A crash of Redis", "Delivery"): fsync before
# every answer, so a host crash loses no acknowledged publish; and a broker that refuses writes when
# full rather than evicting queued messages, ledger entries or seq counters.
DURABLE_REDIS = {"appendonly": "yes", "appendfsync": "always", "maxmemory-policy": "noeviction"}


def redis_server_config(argv: list[str]) -> dict[str, str]:
    """The configuration ``redis-server`` runs with, read from its command line as Redis reads it
    (``server.c``): each ``--name`` starts a config line whose arguments are the words up to the
    next ``--name``, the lines are read like a redis.conf after any config file, names are
    case-insensitive, and a later line for the same name wins. A config file or an ``include``
    would hide options from this check, so they are refused."""
    assert argv and Path(argv[0]).name == "redis-server", f"not a redis-server command: {argv}"
    lines: list[list[str]] = []
    for arg in argv[1:]:
        if arg.startswith("--") and len(arg) > 2:
            lines.append([arg[2:]])
        elif not lines:
            raise AssertionError(f"redis-server reads the config file {arg!r}: put the options on its line")
        else:
            lines[-1].append(arg)
    config: dict[str, str] = {}
    for name, *values in lines:
        assert "=" not in name, f"redis-server takes `--{name.split('=')[0]} value`, not `--{name}`"
        config[name.lower()] = " ".join(values)
    assert "include" not in config, "an included config file could override these options unseen"
    return config


def assert_durable_redis(argv: list[str]) -> None:
    config = redis_server_config(argv)
    for name, value in DURABLE_REDIS.items():
        effective = config.get(name, "").lower()
        assert effective == value, f"redis-server runs with {name} {effective or '(default)'!r}: {argv}"
