"""A local OTLP/HTTP trace receiver: what a real collector (Jaeger, Tempo ...) would be sent.

It listens on a loopback port, decodes each ``POST /v1/traces`` body with the
``opentelemetry-proto`` messages (gzip or not) and keeps every span it received.
"""
from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def any_value(v: AnyValue):
    """Return an OTLP attribute value as Python."""
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


class Receiver:
    """Collects decoded spans; ``spans()`` returns them as plain dicts."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver._lock:
                    receiver.requests.append(request)
                    receiver.bodies.append(body)
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[dict]:
        """Return every span received: ids in hex, attributes and links decoded."""
        with self._lock:
            requests = list(self.requests)
        out = []
        for request in requests:
            for rs in request.resource_spans:
                service = {a.key: any_value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append({
                            "name": s.name, "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(), "parent": s.parent_span_id.hex(),
                            "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                            "attrs": {a.key: any_value(a.value) for a in s.attributes},
                            "links": [(ln.trace_id.hex(), ln.span_id.hex(),
                                       {a.key: any_value(a.value) for a in ln.attributes})
                                      for ln in s.links],
                            "error": s.status.code == s.status.STATUS_CODE_ERROR,
                            "service": service.get("service.name")})
        return out

    def raw(self) -> bytes:
        """Return every body received, decoded from gzip, concatenated."""
        with self._lock:
            return b"".join(self.bodies)
