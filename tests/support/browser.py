"""Headless Chromium for the inspector's browser tests: Debian's `chromium`, driven by Playwright
(Playwright's own browsers are never downloaded); the app under uvicorn on a free port; a page
that records what it must not do (dialogs, uncaught errors, console errors)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.sync_api import expect  # a dev dependency: missing, the browser tests fail

from tests.support.api import ApiEnv


def _chromium() -> str | None:
    explicit = os.environ.get("CUEMEM_TEST_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


CHROMIUM = _chromium()

# How long a page action or an `expect` waits for its condition: a hang guard, not a time limit
# (Playwright's own defaults, 30 s and 5 s, would turn a loaded machine's slow render red).
WAIT_MS = 120_000
expect.set_options(timeout=WAIT_MS)

# Without Chromium these tests skip (and say why), except where CI sets CUEMEM_REQUIRE_BROWSER=1
# (.ci/run): there a missing browser fails them, so that the only in-browser XSS/CSP check cannot
# vanish with a warning. Playwright is a dev dependency: its absence fails them everywhere.
REQUIRED = os.environ.get("CUEMEM_REQUIRE_BROWSER") == "1"

needs_browser = pytest.mark.skipif(
    not REQUIRED and CHROMIUM is None,
    reason="BROWSER TESTS SKIPPED: no Chromium (`chromium` on PATH or CUEMEM_TEST_CHROMIUM): "
    "apt-get install -y chromium chromium-driver (.ci/run does it)",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    url: str
    env: ApiEnv
    server: Any
    thread: threading.Thread


def serve(env: ApiEnv, app: Any) -> Served:
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="inspector-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_MS / 1000
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    return Served(f"http://127.0.0.1:{port}", env, server, thread)


def stop(served: Served) -> None:
    served.server.should_exit = True
    served.thread.join(timeout=15)


@dataclass
class Watched:
    """What the page did that it must not: dialogs (alert/confirm/prompt), uncaught errors."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)

    def clean(self) -> None:
        assert self.dialogs == [], f"a dialog fired: {self.dialogs}"
        assert self.errors == [], f"uncaught page errors: {self.errors}"
        # Failed requests (the 401 and 422 the test provokes) log "Failed to load resource";
        # anything else (a CSP violation, a script error) is a bug.
        others = [m for m in self.console if "Failed to load resource" not in m]
        assert others == [], f"console errors: {others}"


def open_page(browser: Any, url: str, timezone_id: str | None = None) -> tuple[Any, Watched]:
    """The inspector in a new context (``timezone_id``: the browser's zone, else the host's)."""
    context = browser.new_context(locale="en-US", timezone_id=timezone_id)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    watched = Watched()

    def on_dialog(dialog: Any) -> None:
        watched.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda exc: watched.errors.append(str(exc)))
    page.on("console", lambda msg: watched.console.append(msg.text) if msg.type == "error" else None)
    page.goto(url + "/inspector")
    page.wait_for_selector("body[data-ready='true']")
    return page, watched


def open_user(page: Any, key: str, user: str) -> None:
    """Sign the page in with the tenant's API ``key`` and open ``user`` from the user list."""
    page.fill("#api-key", key)
    page.click("#use-key")
    page.wait_for_selector(f"#user-list button[data-user='{user}']").click()
