"""The use cases and every synchronous entry point but the CLI: ``service.operations`` (recall,
curation, index follow-ups, waiting, dead letters, the in-process backend), ``service.http`` (the
FastAPI app, ``create_app(container)``, run by ``cuemem serve``) and ``service.mcp``."""
