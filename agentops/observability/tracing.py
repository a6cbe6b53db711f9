"""OpenTelemetry traces: the tracer (off unless AGENTOPS_OTLP_ENDPOINT is set) and span emission.

Spans are emitted after the fact, with the start and end times the engine measured, so no
span is ever open across a commit and nothing here runs inside a transaction: ``span_emit``
builds the finished span itself (the SDK's ``ReadableSpan``: its live-span machinery of
sampling, contexts and locks has nothing to do for a span that already ended) and hands it
to the BatchSpanProcessor's queue, whose own thread exports it over OTLP/HTTP (and, at a
process's normal exit, flushes what is left: the provider's shutdown hook). Parent spans
that outlive a process (a run attempt, a step) have ids derived from what they are
(``derived_id``), so any worker can name them as a parent, and the worker that sees them end
emits them with that very id.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

_state: dict[str, Any] = {}
CONTENT_MAX_CHARS = 16_000
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SCOPE = InstrumentationScope("agentops.engine")
_UNSET = Status(StatusCode.UNSET)


def _exporter(endpoint: str) -> Any:
    # Imported when tracing is on: the OTLP exporter brings protobuf and requests (~6 MB in
    # each of a worker host's processes, tracing off).
    otlp = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    return otlp.OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")


def tracer() -> trace.Tracer | None:
    """Return the process's tracer, made on first use; None when tracing is off."""
    endpoint = settings.AGENTOPS_OTLP_ENDPOINT
    if not endpoint:
        return None
    if _state.get("endpoint") != endpoint:
        provider = TracerProvider(
            resource=Resource.create({"service.name": settings.AGENTOPS_OTEL_SERVICE_NAME}))
        processor = BatchSpanProcessor(_exporter(endpoint))
        provider.add_span_processor(processor)  # the provider flushes it at exit
        old = _state.get("provider")
        if old is not None:
            old.shutdown()
        _state.update(endpoint=endpoint, provider=provider, processor=processor,
                      tracer=provider.get_tracer(_SCOPE.name))
    return _state["tracer"]


def content_captured() -> bool:
    """Return True when message content goes on spans and into the run (opt-in)."""
    return bool(settings.AGENTOPS_OTLP_ENDPOINT) and settings.AGENTOPS_TRACE_CONTENT


def derived_id(*parts: object, bits: int = 64) -> int:
    """Return a non-zero id of ``bits`` bits derived from ``parts`` (the same in every process)."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[: bits // 8], "big") or 1


def new_span_id() -> int:
    """Return a fresh random span id."""
    return RandomIdGenerator().generate_span_id()


def hex_id(value: int, bits: int = 64) -> str:
    """Return ``value`` as OpenTelemetry writes it (16 or 32 lower-case hex digits)."""
    return f"{value:0{bits // 4}x}"


@dataclass(frozen=True)
class SpanRef:
    """A span's place: its trace and its id."""

    trace_id: int
    span_id: int

    def link(self, **attributes: Any) -> Link:
        """Return an OpenTelemetry link to this span."""
        return Link(SpanContext(self.trace_id, self.span_id, is_remote=True,
                                trace_flags=TraceFlags(TraceFlags.SAMPLED)), attributes)


@dataclass
class SpanOut:
    """A finished span to emit: what it is, where it hangs, when it ran."""

    name: str
    ref: SpanRef
    parent: int | None
    start: dt.datetime
    end: dt.datetime
    attributes: dict[str, Any]
    kind: SpanKind = SpanKind.INTERNAL
    links: Sequence[Link] = ()
    error: str = ""


def _ns(at: dt.datetime) -> int:
    return int(at.timestamp() * 1_000_000_000)


def span_emit(out: SpanOut) -> None:
    """Queue one finished span for export (no I/O here); a no-op when tracing is off."""
    if tracer() is None:
        return
    parent = None
    if out.parent is not None:  # named by id: it may be another process's span
        parent = SpanContext(out.ref.trace_id, out.parent, is_remote=True,
                             trace_flags=_SAMPLED)
    start = _ns(out.start)
    _state["processor"].on_end(ReadableSpan(
        out.name, SpanContext(out.ref.trace_id, out.ref.span_id, is_remote=False,
                              trace_flags=_SAMPLED),
        parent, _state["provider"].resource,
        {k: v for k, v in out.attributes.items() if v is not None and v != ""},
        links=tuple(out.links), kind=out.kind, start_time=start,
        end_time=max(_ns(out.end), start), instrumentation_scope=_SCOPE,
        status=Status(StatusCode.ERROR, out.error[:300]) if out.error else _UNSET))


def content_json(value: Any) -> str:
    """Return ``value`` as JSON text cut to CONTENT_MAX_CHARS (a span attribute)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= CONTENT_MAX_CHARS else text[:CONTENT_MAX_CHARS] + "…"
