"""A publish that loses its broker connection inside kombu is an outage every caller retries.

kombu's Redis transport can raise ``AttributeError`` from its own code when the channel's
connection was dropped mid-publish (``Channel._connparams`` reads ``self.connection.client``);
a task's follow-up was then dead-lettered instead of retried (the Redis crash fault test).
The fakes below raise it from kombu's real code, on a channel whose connection is gone."""

from __future__ import annotations

from typing import Any

import pytest
from kombu.exceptions import OperationalError
from kombu.transport.redis import Channel

from infra.broker import send_task
from shared.queues import ROUTES, TaskName
from shared.settings import Settings
from shared.storage import FollowUp
from workers.bootstrap import _broker_dispatcher
from workers.failures import PERMANENT_ERRORS, TRANSIENT_ERRORS


def _dropped_channel() -> Channel:
    channel = Channel.__new__(Channel)  # as the transport leaves it after the connection closed
    channel.connection = None
    return channel


class RacingApp:
    """A send-only app whose publish meets a dropped connection inside kombu."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send_task(self, name: str, **options: Any) -> None:
        self.sent.append((name, options))
        _dropped_channel()._connparams()


class BuggyApp:
    """A send-only app with a bug of its own: an AttributeError outside kombu."""

    def send_task(self, name: str, **options: Any) -> None:
        None.client  # type: ignore[attr-defined]  # noqa: B018


def test_kombus_own_attribute_error_is_raised_as_the_broker_outage_it_is() -> None:
    with pytest.raises(OperationalError, match="memory.embed") as raised:
        send_task(RacingApp(), "memory.embed", args=["t/e1"])  # type: ignore[arg-type]
    assert isinstance(raised.value.__cause__, AttributeError)
    assert isinstance(raised.value, TRANSIENT_ERRORS)
    assert not isinstance(raised.value, PERMANENT_ERRORS)


def test_an_attribute_error_from_anywhere_else_stays_a_bug() -> None:
    with pytest.raises(AttributeError):
        send_task(BuggyApp(), "memory.embed", args=["t/e1"])  # type: ignore[arg-type]


def test_a_tasks_follow_ups_meet_the_race_as_a_retryable_outage() -> None:
    app = RacingApp()
    send = _broker_dispatcher(Settings(), app=app)  # type: ignore[arg-type]
    followup = FollowUp(TaskName.EMBED.value, ("t1/ev-1",))
    with pytest.raises(TRANSIENT_ERRORS):
        send([followup])
    assert app.sent == [(TaskName.EMBED.value, {"args": ["t1/ev-1"], "queue": ROUTES[TaskName.EMBED].value})]
