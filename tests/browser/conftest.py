"""Fixtures of the inspector's browser tests: the API on real Postgres and Redis, and Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api import ApiEnv, api_settings, running_api
from tests.support.browser import CHROMIUM


@pytest.fixture
def env(it_settings) -> Iterator[ApiEnv]:
    # Flower's address is set so that the pipeline view shows its link.
    settings = api_settings(it_settings).model_copy(update={"flower_url": "http://localhost:5555"})
    with running_api(settings) as env:
        yield env


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None, (
        "no Chromium (`chromium` on PATH or CUEMEM_TEST_CHROMIUM) and CUEMEM_REQUIRE_BROWSER=1: "
        "apt-get install -y chromium chromium-driver"
    )
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield b
        finally:
            b.close()
