"""``/docs``: Swagger UI for the OpenAPI document, served from this process (the Swagger UI 5 that
the ``fastapi-offline`` package ships; Swagger UI 4, as ``swagger-ui-bundle`` has it, cannot read
OpenAPI 3.1), never from a CDN: the API's origin is the inspector's, where the operator's key
lives, and a script from elsewhere would run with it. The page has a Content-Security-Policy of
its own that allows scripts of this origin only. (FastAPI's own ``/docs`` and ``/redoc`` load
their scripts from jsDelivr; ``create_app`` turns them off.)
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from service.http.errors import ApiError

router = APIRouter()

_STATIC = Path(__file__).parent.parent / "static"
_SWAGGER = Path(fastapi_offline.__file__).parent / "static"
# The only files served under /docs/assets/: Swagger UI's script, style and icon, and the starter.
ASSETS = {
    "swagger-ui-bundle.js": (
        _SWAGGER / "swagger-ui-bundle.js",
        "text/javascript; charset=utf-8",
    ),
    "swagger-ui.css": (_SWAGGER / "swagger-ui.css", "text/css; charset=utf-8"),
    "favicon.png": (_SWAGGER / "favicon.png", "image/png"),
    "docs.js": (_STATIC / "docs.js", "text/javascript; charset=utf-8"),
}
HEADERS = {
    # Swagger UI sets style attributes on its elements and shows images as data: URLs.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>cuemem API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" href="/docs/assets/favicon.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/docs.js"></script>
</body>
</html>
"""


@router.get("/docs", include_in_schema=False)
def docs_page() -> HTMLResponse:
    return HTMLResponse(PAGE, headers=HEADERS)


@router.get("/docs/assets/{name}", include_in_schema=False)
def docs_asset(name: str) -> Response:
    if name not in ASSETS:
        raise ApiError(404, f"no docs file {name[:64]!r}")
    path, media_type = ASSETS[name]
    return Response(
        path.read_bytes(), media_type=media_type, headers={**HEADERS, "Cache-Control": "max-age=3600"}
    )
