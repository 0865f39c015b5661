"""cuemem's HTTP API (FastAPI): ``service.http.app.create_app(container)``, run by ``cuemem serve``."""
