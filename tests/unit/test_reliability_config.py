"""The reliability profile: the settings that make a killed worker's messages come back soon."""

from __future__ import annotations

import pytest

from shared.settings import Settings
from workers.reliability import RESTORE_MUTEX_S, celery_config


def test_unacked_messages_are_restored_promptly_and_a_dead_holder_cannot_block_restores():
    conf = celery_config(
        Settings(visibility_timeout_s=60, task_time_limit_s=30, retry_backoff_max_s=10), "redis://x"
    )
    options = conf["broker_transport_options"]
    assert options["visibility_timeout"] == 60
    # kombu scans every interval x throttle seconds (10 x 10 by default): scan on every call.
    assert options["unacked_restore_throttle"] == 1 and options["unacked_restore_interval"] <= 10
    assert options["unacked_mutex_expire"] == RESTORE_MUTEX_S < 300
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"]


def test_a_visibility_timeout_shorter_than_a_task_is_refused_naming_the_setting():
    with pytest.raises(ValueError, match="CUEMEM_VISIBILITY_TIMEOUT_S=20"):
        celery_config(
            Settings(visibility_timeout_s=20, task_time_limit_s=30, retry_backoff_max_s=10), "redis://x"
        )


def test_a_follow_up_the_broker_cannot_take_is_an_outage_not_a_poison_message():
    # Found by the long Redis-restart run: memory.index committed its work, then sending its
    # follow-up raised kombu's OperationalError while Redis was down, and the task was parked.
    from kombu.exceptions import OperationalError as BrokerUnreachable

    from workers.failures import PERMANENT_ERRORS, TRANSIENT_ERRORS

    exc = BrokerUnreachable("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    assert isinstance(exc, TRANSIENT_ERRORS) and not isinstance(exc, PERMANENT_ERRORS)
