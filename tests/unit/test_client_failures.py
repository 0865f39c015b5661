"""The HTTP API client (producers.client), sync and async, when the API refuses or fails: errors
mapped to CuememAPIError naming the fields; 429/503 and connection failures retried (Retry-After
honoured, waits recorded through the injected ``sleep``), other 4xx never; URL and key settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from producers.client import CuememAPIError, CuememClient, CuememConnectionError, Readiness
from tests.support.api_answers import MEMORY, RECALL
from tests.support.client_api import Api, capture, error, run_both, scripted, sync_client

# --- errors -----------------------------------------------------------------------------------


def test_api_errors_carry_status_code_message_and_name_the_fields() -> None:
    fields = [
        {"field": "role", "problem": "'robot' is not one of user, assistant, system, tool"},
        {"field": "content", "problem": "must not be empty"},
    ]

    api = scripted("POST", "/v1/events", error(422, "invalid_event", "the event is invalid", fields))

    for raised, used, sleeps in run_both(
        api, capture(lambda c: c.publish(user_id="u", session_id="s", role="robot", content=""))
    ):
        assert isinstance(raised, CuememAPIError)
        assert (raised.status, raised.code, raised.message) == (422, "invalid_event", "the event is invalid")
        assert raised.fields == fields
        assert str(raised) == (
            "HTTP 422 invalid_event: the event is invalid (role: 'robot' is not one of user, assistant, "
            "system, tool; content: must not be empty)"
        )
        assert len(used.requests) == 1 and sleeps == []  # a 4xx is never retried


@pytest.mark.parametrize(
    ("status", "code"),
    [(400, "bad_request"), (401, "unauthorized"), (403, "forbidden"), (404, "not_found"), (409, "conflict")],
)
def test_no_retry_on_4xx(status: int, code: str) -> None:
    api = Api()
    api.queue("GET", "/v1/users/u/memories/m1", error(status, code, "no"), httpx.Response(200, json=MEMORY))
    client, sleeps = sync_client(api)
    with pytest.raises(CuememAPIError) as info:
        client.memory("u", "m1")
    assert (info.value.status, info.value.code, info.value.fields) == (status, code, [])
    assert len(api.requests) == 1 and sleeps == []


def test_error_bodies_that_are_not_the_contract_still_map() -> None:
    api = Api()
    api.queue("GET", "/v1/health", httpx.Response(502, text="<html>Bad gateway</html>"))
    client, _ = sync_client(api)
    with pytest.raises(CuememAPIError) as info:
        client.health()
    assert (info.value.status, info.value.code, info.value.message) == (
        502,
        "http_502",
        "<html>Bad gateway</html>",
    )
    assert str(info.value) == "HTTP 502 http_502: <html>Bad gateway</html>"


# --- retries ----------------------------------------------------------------------------------


def test_429_is_retried_after_the_servers_retry_after() -> None:
    api = scripted(
        "POST",
        "/v1/recall",
        error(429, "rate_limited", "slow down", **{"Retry-After": "2"}),
        error(429, "rate_limited", "slow down", **{"Retry-After": "0.5"}),
        httpx.Response(200, json=RECALL),
    )

    for result, used, sleeps in run_both(api, lambda c: c.recall("u", "q")):
        assert result == RECALL
        assert len(used.requests) == 3
        assert sleeps == [2.0, 0.5]


def test_retry_after_as_an_http_date() -> None:
    # The pause is the date less the clock when the answer is read: bounded by the clock read
    # before and after the call, not by a guess at how long the call takes.
    when = (datetime.now(UTC) + timedelta(seconds=20)).replace(microsecond=0)
    api = Api()
    header = {"Retry-After": format_datetime(when, usegmt=True)}
    api.queue("GET", "/v1/health", error(429, "rate_limited", "later", **header))
    api.queue("GET", "/v1/health", httpx.Response(200, json={"status": "ok"}))
    client, sleeps = sync_client(api)
    before = datetime.now(UTC)
    assert client.health() == {"status": "ok"}
    after = datetime.now(UTC)
    [slept] = sleeps
    assert max(0.0, (when - after).total_seconds()) <= slept <= (when - before).total_seconds()


def test_503_is_retried_with_backoff_then_raised_when_attempts_run_out() -> None:
    def api() -> Api:
        return Api(default=lambda r: error(503, "unavailable", "not ready"))

    for raised, used, sleeps in run_both(
        api, capture(lambda c: c.memories("u")), max_attempts=3, backoff_s=0.1
    ):
        assert isinstance(raised, CuememAPIError) and (raised.status, raised.code) == (503, "unavailable")
        assert len(used.requests) == 3
        assert len(sleeps) == 2 and all(0 < s <= 30 for s in sleeps)


def test_503_then_success() -> None:
    api = Api()
    api.queue("GET", "/v1/users/u/memories", error(503, "unavailable", "x"), error(503, "unavailable", "x"))
    api.default = lambda r: httpx.Response(200, json={"items": [], "total": 0})
    client, sleeps = sync_client(api)
    assert client.memories("u") == {"items": [], "total": 0}
    assert len(api.requests) == 3 and len(sleeps) == 2


def test_a_retry_after_longer_than_the_cap_is_not_waited_for() -> None:
    api = Api(default=lambda r: error(429, "rate_limited", "come back in an hour", **{"Retry-After": "3600"}))
    client, sleeps = sync_client(api)
    with pytest.raises(CuememAPIError) as info:
        client.health()
    assert info.value.status == 429 and info.value.retry_after == 3600.0
    assert len(api.requests) == 1 and sleeps == []


def test_connection_errors_are_retried_then_raised_as_connection_errors() -> None:
    api = scripted(
        "GET", "/v1/health", httpx.ConnectError("refused"), httpx.Response(200, json={"status": "ok"})
    )

    for result, used, sleeps in run_both(api, lambda c: c.health()):
        assert result == {"status": "ok"} and len(used.requests) == 2 and len(sleeps) == 1

    down = Api(default=lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused")))
    client, sleeps = sync_client(down, max_attempts=2)
    with pytest.raises(
        CuememConnectionError, match=r"GET http://cuemem.test/v1/health: ConnectError: refused"
    ):
        client.health()
    assert len(down.requests) == 2


def test_ready_answers_503_as_not_ready_without_retrying() -> None:
    api = scripted(
        "GET", "/v1/ready", httpx.Response(503, json={"status": "starting", "checks": {"db": False}})
    )

    for result, used, sleeps in run_both(api, lambda c: c.ready()):
        assert result == Readiness(False, 503, {"status": "starting", "checks": {"db": False}})
        assert len(used.requests) == 1 and sleeps == []


# --- configuration ----------------------------------------------------------------------------


def test_url_and_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUEMEM_API_URL", "http://env.test:8000/v1/")
    monkeypatch.setenv("CUEMEM_API_KEY", "ck_env")
    api = Api(default=lambda r: httpx.Response(200, json={"status": "ok"}))
    client = CuememClient(transport=httpx.MockTransport(api))
    client.health()
    [request] = api.requests
    assert str(request.url) == "http://env.test:8000/v1/health"
    assert request.headers["Authorization"] == "Bearer ck_env"
    # An explicit key wins; no key at all sends no Authorization (auth off on localhost).
    monkeypatch.delenv("CUEMEM_API_KEY")
    CuememClient(transport=httpx.MockTransport(api)).health()
    assert "Authorization" not in api.requests[-1].headers


def test_a_missing_url_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUEMEM_API_URL", raising=False)
    with pytest.raises(ValueError, match="base_url: not given and CUEMEM_API_URL is not set"):
        CuememClient()
