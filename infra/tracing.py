"""Traces across the pipeline (OpenTelemetry), in one place: off unless ``CUEMEM_TRACING=true``.

Off, nothing of OpenTelemetry is imported and :func:`span` hands back one shared no-op context:
a publish, a task or a recall pays one boolean test. On (the ``tracing`` extra installed):

- :func:`configure` sets a tracer provider for the process (unless the application already set
  one: its own exporters are kept) that exports by OTLP/HTTP to ``OTEL_EXPORTER_OTLP_ENDPOINT``
  (the standard ``OTEL_*`` variables apply), and instruments Celery: every message sent carries
  the trace context in its headers, and every task runs in a span that continues it. So one turn
  is one trace: ``cuemem.publish`` → ``memory.record`` → extract, embed, persist, index, each task
  of that turn a child of the one that sent it.
- :func:`span` opens a span under the current one; the names and attributes follow the GenAI
  semantic conventions where they cover the operation (``embeddings {model}``, ``chat {model}``,
  ``retrieval cuemem``), ``cuemem.*`` attributes otherwise. No span holds a turn's or a memory's
  text: ids, counts and timings only.
- :func:`current_context` / :func:`link_to` let a recall link to the traces of the turns whose
  memories it returned (stored with each event when it was recorded).

Names: every span cuemem opens has the instrumentation scope ``cuemem`` (:data:`SERVICE`); a
process reports as the service ``cuemem-worker`` (:data:`WORKER_SERVICE`) when it is a Celery
worker and as ``cuemem`` otherwise (the API, the CLI, an application's ``Publisher`` or
in-process recall), whichever of its parts sets tracing up first. ``OTEL_SERVICE_NAME`` overrides
the service name, as everywhere in OpenTelemetry.

It lives in the I/O commons because the ``Publisher`` and the workers both open spans and neither
may import the other; the API and the CLI import it from here too (one mechanism, one home).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

_NOOP = contextlib.nullcontext()
_state: dict[str, Any] = {"on": False, "tracer": None}
# Span kinds by name, resolved once OpenTelemetry is imported.
PRODUCER, CLIENT, INTERNAL = "PRODUCER", "CLIENT", "INTERNAL"
# The service name of every process but a worker, and the instrumentation scope of every span.
SERVICE = "cuemem"
# The service name of the Celery worker processes (workers/celery_app.py).
WORKER_SERVICE = "cuemem-worker"


class TracingUnavailable(RuntimeError):
    """Tracing was asked for and the ``tracing`` extra is not installed."""


def enabled() -> bool:
    return bool(_state["on"])


def configure(settings: Any, service: str = SERVICE, *, exporter: Any = None) -> bool:
    """Turn tracing on for this process when ``settings.tracing`` is set, as the service
    ``service`` (unless ``OTEL_SERVICE_NAME`` names it); returns whether it is on. Idempotent: a
    second call changes nothing. ``exporter`` replaces the OTLP exporter (tests pass an in-memory
    one)."""
    if _state["on"] or not getattr(settings, "tracing", False):
        return bool(_state["on"])
    try:
        from opentelemetry import trace
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:
        raise TracingUnavailable(
            f"CUEMEM_TRACING is on but OpenTelemetry is not installed ({exc.name}): "
            "pip install 'cuemem[tracing]', or unset CUEMEM_TRACING"
        ) from None
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        provider = current  # the application's own: its exporters stay, ours is not added
    else:
        name = os.environ.get("OTEL_SERVICE_NAME") or service
        provider = TracerProvider(resource=Resource.create({"service.name": name}))
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    instrumentor = CeleryInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=provider)
    _state.update(on=True, tracer=trace.get_tracer(SERVICE), provider=provider)
    log.info(
        "tracing on: service %s, spans exported by %s",
        service,
        type(exporter).__name__ if exporter else "OTLP",
    )
    return True


def shutdown() -> None:
    """Turn tracing off again in this process: what is buffered is exported, Celery is no longer
    instrumented, :func:`span` is a no-op. (The global tracer provider stays: OpenTelemetry sets
    it once per process.)"""
    if not _state["on"]:
        return
    flush()
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    CeleryInstrumentor().uninstrument()
    _state.update(on=False, tracer=None, provider=None)


def flush(timeout_ms: int = 5000) -> None:
    """Export what is buffered (before a process exits)."""
    provider = _state.get("provider")
    if provider is not None:
        provider.force_flush(timeout_ms)


def span(name: str, attributes: Mapping[str, Any] | None = None, kind: str = INTERNAL) -> Any:
    """A span under the current one, as a context manager yielding it (``None`` when off)."""
    if not _state["on"]:
        return _NOOP
    return _started(name, attributes, kind)


@contextlib.contextmanager
def _started(name: str, attributes: Mapping[str, Any] | None, kind: str) -> Iterator[Any]:
    from opentelemetry.trace import SpanKind

    tracer = _state["tracer"]
    clean = {k: v for k, v in (attributes or {}).items() if v is not None}
    with tracer.start_as_current_span(name, kind=getattr(SpanKind, kind), attributes=clean) as current:
        yield current


def set_attributes(current: Any, attributes: Mapping[str, Any]) -> None:
    """Add attributes to a span :func:`span` yielded (nothing when off)."""
    if current is not None:
        current.set_attributes({k: v for k, v in attributes.items() if v is not None})


def current_context() -> str | None:
    """The current span as a W3C ``traceparent`` value, to store with what it produced; None
    when off or outside a span."""
    if not _state["on"]:
        return None
    from opentelemetry.trace import get_current_span

    context = get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def link_to(current: Any, traceparents: Sequence[str], attributes: Mapping[str, Any] | None = None) -> int:
    """Link ``current`` to the spans these ``traceparent`` values name (malformed ones are
    skipped); returns how many were linked."""
    if current is None or not traceparents:
        return 0
    from opentelemetry.trace import SpanContext, TraceFlags

    linked = 0
    for value in dict.fromkeys(traceparents):
        parts = value.split("-") if isinstance(value, str) else []
        if len(parts) != 4:
            continue
        try:
            context = SpanContext(
                int(parts[1], 16),
                int(parts[2], 16),
                is_remote=True,
                trace_flags=TraceFlags(int(parts[3], 16)),
            )
        except ValueError:
            continue
        if context.is_valid:
            current.add_link(context, dict(attributes or {}))
            linked += 1
    return linked
