"""The memory inspector: one static page (``service/http/static/``) that speaks the ``/v1`` API from
the browser with the key the operator pastes in. No build step: plain HTML, CSS and JS modules
(ES modules, loaded by the browser as they are).

The page is served without a key (it holds no data); every call it makes carries the key and is
scoped to that key's tenant like any other client. The Content-Security-Policy allows only the
page's own script and style, and the script writes data with ``textContent`` only.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from service.http.errors import ApiError

STATIC = Path(__file__).parent.parent / "static"
_JS = "text/javascript; charset=utf-8"
# Only these files are served: the page, its modules and its stylesheet.
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "inspector.css": "text/css; charset=utf-8",
    **{
        name: _JS
        for name in (
            "inspector.js",
            "dom.js",
            "charts.js",
            "memories.js",
            "memory_page.js",
            "overview.js",
            "recall.js",
            "timeline.js",
            "timeline_marks.js",
            "zones.js",
        )
    },
}
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _asset(name: str) -> Response:
    return Response((STATIC / name).read_bytes(), media_type=ASSETS[name], headers=HEADERS)


# ``GET /inspector/`` (the page), its script and style; ``/inspector`` redirects.
router = APIRouter()


@router.get("/inspector", include_in_schema=False)
def inspector_redirect() -> RedirectResponse:
    # Relative, so that the page also works behind a proxy that adds a path prefix.
    return RedirectResponse("inspector/", status_code=307)


@router.get("/inspector/", include_in_schema=False)
def inspector_page() -> Response:
    return _asset("index.html")


@router.get("/inspector/{name}", include_in_schema=False)
def inspector_asset(name: str) -> Response:
    if name not in ASSETS or name == "index.html":
        raise ApiError(404, f"no inspector file {name[:64]!r}")
    return _asset(name)
