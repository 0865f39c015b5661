"""`cuemem keys`: API keys of the HTTP API (create, list, revoke)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli.common import CliError, DataDir, echo_json, settings_for, setup_logging
from workers.runtime.local import open_runtime

keys_app = typer.Typer(help="API keys of the HTTP API: one tenant each, stored hashed.", no_args_is_help=True)


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant the key acts for (required)")],
    name: Annotated[str, typer.Option("--name", help="What the key is for (required)")],
    data_dir: DataDir = None,
) -> None:
    """Create a key and print it once, as JSON {id, tenant_id, name, key}: only its hash is kept."""
    from service.operations.curation import create_key
    from shared.api_keys import MAX_NAME_CHARS
    from shared.events import InvalidInput

    setup_logging(False)
    if not name.strip() or len(name) > MAX_NAME_CHARS:
        raise CliError(f"--name: must be 1 to {MAX_NAME_CHARS} characters")
    with open_runtime(settings_for(data_dir)) as rt:
        try:
            created = create_key(rt.container, tenant, name.strip())
        except InvalidInput as exc:
            raise CliError(f"--tenant: {exc.errors[0].problem}") from None
    typer.echo(json.dumps(created))


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's keys")] = None,
    data_dir: DataDir = None,
) -> None:
    """List keys as JSON (id, tenant, name, prefix, created, revoked); never the keys themselves."""
    from service.operations.curation import list_keys

    setup_logging(False)
    with open_runtime(settings_for(data_dir)) as rt:
        keys = list_keys(rt.container, tenant)
    echo_json([k.to_public() for k in keys])


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (from `cuemem keys list`)", metavar="KEY_ID")],
    data_dir: DataDir = None,
) -> None:
    """Revoke a key: every request with it is refused from now on."""
    from service.operations.curation import revoke_key

    setup_logging(False)
    with open_runtime(settings_for(data_dir)) as rt:
        key = revoke_key(rt.container, key_id)
    if key is None:
        raise CliError(f"KEY_ID: no key {key_id!r}")
    typer.echo(json.dumps(key.to_public()))
