"""OpenTelemetry traces: the tracer (off unless AGENTOPS_OTLP_ENDPOINT is set) and span emission.

Spans are emitted after the fact, with the start and end times the engine measured, so no
span is ever open across a commit and nothing here runs inside a transaction: ``span_emit``
only hands a finished span to the BatchSpanProcessor's queue, whose own thread exports it
over OTLP/HTTP (and, at a process's normal exit, flushes what is left: the provider's
shutdown hook). Parent spans that outlive a process (a run attempt, a step) have ids derived
from what they are (``derived_id``), so any worker can name them as a parent, and the worker
that sees them end emits them with that very id (``_PresetIds``).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

_preset: ContextVar[tuple[int, int] | None] = ContextVar("agentops_span_ids", default=None)
_state: dict[str, Any] = {}
CONTENT_MAX_CHARS = 16_000


class _PresetIds(RandomIdGenerator):
    """Random ids, except for the span being emitted under ``_preset`` (trace id, span id)."""

    def generate_span_id(self) -> int:
        preset = _preset.get()
        return preset[1] if preset else super().generate_span_id()

    def generate_trace_id(self) -> int:
        preset = _preset.get()
        return preset[0] if preset else super().generate_trace_id()


def _exporter(endpoint: str) -> OTLPSpanExporter:
    return OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")


def tracer() -> trace.Tracer | None:
    """Return the process's tracer, made on first use; None when tracing is off."""
    endpoint = settings.AGENTOPS_OTLP_ENDPOINT
    if not endpoint:
        return None
    if _state.get("endpoint") != endpoint:
        provider = TracerProvider(
            resource=Resource.create({"service.name": settings.AGENTOPS_OTEL_SERVICE_NAME}),
            id_generator=_PresetIds())
        provider.add_span_processor(BatchSpanProcessor(_exporter(endpoint)))
        old = _state.get("provider")
        if old is not None:
            old.shutdown()
        _state.update(endpoint=endpoint, provider=provider,
                      tracer=provider.get_tracer("agentops.engine"))
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
    t = tracer()
    if t is None:
        return
    ctx = Context()
    if out.parent is not None:
        parent = SpanContext(out.ref.trace_id, out.parent, is_remote=True,
                             trace_flags=TraceFlags(TraceFlags.SAMPLED))
        ctx = trace.set_span_in_context(NonRecordingSpan(parent))
    attributes = {k: v for k, v in out.attributes.items() if v is not None and v != ""}
    token = _preset.set((out.ref.trace_id, out.ref.span_id))
    try:
        span = t.start_span(out.name, context=ctx, kind=out.kind, attributes=attributes,
                            links=list(out.links), start_time=_ns(out.start))
    finally:
        _preset.reset(token)
    if out.error:
        span.set_status(Status(StatusCode.ERROR, out.error[:300]))
    span.end(end_time=max(_ns(out.end), _ns(out.start)))


def content_json(value: Any) -> str:
    """Return ``value`` as JSON text cut to CONTENT_MAX_CHARS (a span attribute)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= CONTENT_MAX_CHARS else text[:CONTENT_MAX_CHARS] + "…"
