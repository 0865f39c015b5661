"""cuemem's HTTP API (FastAPI): ``service.app.create_app(container)``, run by ``cuemem serve``."""
