"""Property-based run of the OpenAPI spec (schemathesis): generated requests, valid and invalid,
authenticated with a fixed key, never get a 5xx; every error keeps the one error shape.

Bounded (a few dozen examples per operation) so the run stays well under two minutes.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.support.api import api_settings, running_api, seed_memory

MAX_EXAMPLES = int(os.environ.get("CUEMEM_API_FUZZ_EXAMPLES", "25"))  # per operation and mode


@pytest.fixture
def api_env(it_settings: Any) -> Any:
    with running_api(api_settings(it_settings)) as env:
        # Something to find: generated ids rarely hit it, but list and recall read real rows.
        seed_memory(env.container, "tenant-a", "u1", "我不吃香菜")
        yield env


def test_no_5xx_anywhere(api_env: Any) -> None:
    """Every operation, in both generation modes: valid requests and requests that break the spec.

    Driven by hand rather than through schemathesis' pytest plugin, which does not load under the
    pytest this project pins."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", api_env.client.app)
    headers = api_env.auth("tenant-a")
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=MAX_EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.generate],
            )
            def run(case: Any) -> None:
                response = case.call(headers=headers)
                if response.status_code >= 500:
                    failures.append(
                        f"{case.method} {case.formatted_path} {case.body!r:.200} -> {response.text[:300]}"
                    )
                    return
                if response.status_code >= 400:
                    error = response.json()["error"]
                    assert isinstance(error["code"], str) and isinstance(error["message"], str)
                    assert all(set(f) == {"field", "problem"} for f in error["fields"])

            try:
                run()
            except Unsatisfiable:
                # An operation with nothing to break (no parameters, no body) has no negative case.
                assert mode is GenerationMode.NEGATIVE, operation.label
    assert not failures, "\n".join(failures[:20])
