"""Traces end to end: one turn followed from ``Publisher.publish`` through every Celery task of
that turn (real worker processes, exporting by OTLP to a receiver started here) to the recall
that used it (this process, an in-memory exporter), which links back to the turn's trace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra import tracing
from producers.publisher import Publisher
from service.operations.recall import recall_for
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.processes import assert_python_runs
from tests.support.services import wait_processed, wait_until
from workers.bootstrap import build_container
from workers.runtime.embedded import settings_env

USER = "u-traced"
SECRET_TEXT = "我对花生过敏"  # a turn's text must appear in no span


@pytest.fixture
def receiver(monkeypatch) -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    # Read by the worker processes' OTLP exporter (they inherit the environment).
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    yield r
    r.stop()


@pytest.fixture
def in_memory() -> Iterator[object]:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    yield exporter
    tracing.shutdown()


def _values(span: ReceivedSpan) -> list[str]:
    out: list[str] = []
    for v in span.attributes.values():
        out += [str(x) for x in v] if isinstance(v, list) else [str(v)]
    return out


def test_one_turn_is_one_trace_from_publish_through_its_tasks_to_the_recall_that_used_it(
    it_settings, start_workers, receiver, in_memory
):
    settings = it_settings.model_copy(update={"tracing": True})
    assert tracing.configure(settings, "cuemem-test", exporter=in_memory)
    c = build_container(settings)
    workers = start_workers(settings)
    with Publisher.from_settings(settings) as pub:
        published = pub.publish(user_id=USER, session_id="s1", role="user", content=SECRET_TEXT)
    wait_processed(c, [published.event_id], workers)

    [publish] = [s for s in in_memory.get_finished_spans() if s.name == "cuemem.publish"]
    assert publish.attributes["cuemem.event_id"] == published.event_id
    assert publish.kind.name == "PRODUCER"
    trace_id = f"{publish.context.trace_id:032x}"

    def turn_spans() -> list[ReceivedSpan]:
        return [s for s in receiver.snapshot() if s.trace_id == trace_id]

    # Every task of the turn, in worker processes, continues the publish's trace: the record
    # task (which runs extract, embed and persist in process) and the index task it sends.
    assert wait_until(
        lambda: {"run/memory.record", "run/memory.index"} <= {s.name for s in turn_spans()}, 60
    ), [(s.name, s.trace_id) for s in receiver.snapshot()]
    spans = turn_spans()
    names = {s.name for s in spans}
    assert {"cuemem.unit", "cuemem.advance"} <= names
    embeddings = [s for s in spans if s.name.startswith("embeddings ")]
    assert embeddings and all(s.attributes["gen_ai.operation.name"] == "embeddings" for s in embeddings)
    assert embeddings[0].attributes["gen_ai.request.model"] == c.embedder.model_name
    assert {s.service for s in spans} == {"cuemem-worker"}
    assert {s.scope for s in spans if s.name.startswith("cuemem.")} == {"cuemem"}
    # Parent to child: every span of the turn hangs under another span of it, up to the publish.
    here = [s for s in in_memory.get_finished_spans() if f"{s.context.trace_id:032x}" == trace_id]
    assert {"cuemem.publish", "apply_async/memory.record"} <= {s.name for s in here}
    ids = {s.span_id for s in spans} | {f"{s.context.span_id:016x}" for s in here}
    assert all(s.parent_id in ids for s in spans), [(s.name, s.parent_id) for s in spans]
    # No other turn's trace holds a unit of this one.
    strays = [s for s in receiver.snapshot() if s.trace_id != trace_id and published.event_id in _values(s)]
    assert strays == []

    # The recall that used the turn's memory links back to the turn's trace.
    out = recall_for(c, USER, "我对什么过敏？", reinforce=False)
    assert SECRET_TEXT in [item["content"] for item in out["items"]]
    [retrieval] = [s for s in in_memory.get_finished_spans() if s.name == "retrieval cuemem"]
    assert retrieval.attributes["gen_ai.operation.name"] == "retrieval"
    assert retrieval.attributes["cuemem.recall.linked_turns"] >= 1
    assert trace_id in {f"{link.context.trace_id:032x}" for link in retrieval.links}
    query = [s for s in in_memory.get_finished_spans() if s.name.startswith("embeddings ")]
    assert any(s.attributes["cuemem.embedding.purpose"] == "query" for s in query)

    # Ids, counts and timings only: the turn's text is in no span, here or in the workers.
    local = [str(v) for s in in_memory.get_finished_spans() for v in s.attributes.values()]
    assert all(SECRET_TEXT not in v for v in local + [v for s in receiver.snapshot() for v in _values(s)])
    c.close()


def test_an_apps_publish_reports_the_documented_service_and_scope(it_settings, receiver):
    # A fresh interpreter, as an application that only publishes: its Publisher sets tracing up.
    # The names are the README's: the service `cuemem` (as the API's and the CLI's), the scope
    # `cuemem`; the workers' `cuemem-worker` is checked above.
    code = (
        "from infra import tracing\n"
        "from producers.publisher import Publisher\n"
        "from shared.settings import Settings\n"
        "with Publisher.from_settings(Settings(tracing=True)) as pub:\n"
        "    pub.publish(user_id='u-named', session_id='s1', role='user', content='hello')\n"
        "tracing.flush()\n"
    )
    env = {k: v for k, v in settings_env(it_settings).items() if k != "OTEL_SERVICE_NAME"}
    assert_python_runs(code, timeout=120, env=env)
    assert wait_until(lambda: any(s.name == "cuemem.publish" for s in receiver.snapshot()), 60)
    [publish] = [s for s in receiver.snapshot() if s.name == "cuemem.publish"]
    assert (publish.service, publish.scope) == ("cuemem", "cuemem")


def test_off_needs_nothing_of_opentelemetry():
    # A fresh interpreter where OpenTelemetry cannot be imported (the extra not installed): what
    # the product imports to publish, record and recall works with tracing off, and a span is the
    # one shared no-op. (Some dependencies, such as redis-py, import OpenTelemetry themselves when
    # it is installed; cuemem's own code never needs it when off.)
    blocked = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    code = blocked + (
        "from infra import tracing\n"
        "import producers.publisher, workers.bootstrap, workers.tasks, service.operations.recall\n"
        "from shared.settings import Settings\n"
        "assert not tracing.configure(Settings(), 'x')\n"
        "assert tracing.span('x', {'a': 1}) is tracing.span('y')\n"
        "with tracing.span('x') as s:\n"
        "    assert s is None\n"
        "assert tracing.current_context() is None\n"
        "try:\n"
        "    tracing.configure(Settings(tracing=True), 'x')\n"
        "except tracing.TracingUnavailable as exc:\n"
        "    assert \"pip install 'cuemem[tracing]'\" in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('configure without OpenTelemetry did not refuse')\n"
    )
    assert_python_runs(code, timeout=120)
    # With OpenTelemetry installed and tracing off: no tracer provider set, Celery not instrumented.
    code = (
        "import producers.publisher, workers.bootstrap, workers.tasks\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.instrumentation.celery import CeleryInstrumentor\n"
        "from workers.bootstrap import build_container\n"
        "from shared.settings import Settings\n"
        "build_container(Settings(database_url='postgresql+psycopg://nobody@127.0.0.1:1/x'))\n"
        "assert type(trace.get_tracer_provider()).__name__ == 'ProxyTracerProvider'\n"
        "assert not CeleryInstrumentor().is_instrumented_by_opentelemetry\n"
    )
    assert_python_runs(code, timeout=120)
