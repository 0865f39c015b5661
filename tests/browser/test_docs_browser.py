"""``/docs`` in Chromium: Swagger UI renders the API from files of this origin alone, under its own
Content-Security-Policy (a CSP violation or a script error is a console error, and fails)."""

from __future__ import annotations

from tests.support.browser import WAIT_MS, needs_browser, serve, stop


@needs_browser
def test_docs_render_from_this_origin_under_their_csp(env, browser):
    served = serve(env, env.client.app)
    try:
        page = browser.new_context().new_page()
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        origins: set[str] = set()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("request", lambda request: origins.add(request.url.split("/")[2]))
        page.goto(served.url + "/docs")
        page.wait_for_selector("#operations-tag-events")
        assert page.locator(".opblock-summary-path[data-path='/v1/events']").count() >= 1
        assert errors == [], errors
        assert origins == {served.url.split("/")[2]}, origins
    finally:
        stop(served)
