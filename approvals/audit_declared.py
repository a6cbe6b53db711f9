"""The audit sink declared in settings (AGENTOPS_AUDIT_SINK): parse and check the address."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

MIN_SECRET = 16


class SinkDeclarationError(ValueError):
    """AGENTOPS_AUDIT_SINK (or its secret) is not usable; the message says what is wrong."""


@dataclass(frozen=True)
class Sink:
    """Where audit rows go: ``kind`` is webhook, syslog-udp or syslog-tcp."""

    address: str
    kind: str
    host: str = ""
    port: int = 0
    secret: str = ""


def sink_from_setting(raw: str, secret: str = "") -> Sink | None:
    """Return the sink ``raw`` declares, or None when it is empty.

    ``https://…`` / ``http://…``: a webhook signed with ``secret`` (HMAC-SHA256, at least 16
    characters). ``syslog://host:port`` or ``syslog+udp://…``: RFC 5424 over UDP;
    ``syslog+tcp://host:port``: RFC 5424 over TCP with octet-counting framing (RFC 6587).
    """
    raw = raw.strip()
    if not raw:
        return None
    parts = urlsplit(raw)
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise SinkDeclarationError(f"AGENTOPS_AUDIT_SINK {raw!r} has no host")
        if len(secret) < MIN_SECRET:
            raise SinkDeclarationError(
                f"AGENTOPS_AUDIT_SINK_SECRET must be at least {MIN_SECRET} characters for a "
                "webhook sink: the receiver checks each row's signature with it")
        return Sink(address=raw, kind="webhook", secret=secret)
    kinds = {"syslog": "syslog-udp", "syslog+udp": "syslog-udp", "syslog+tcp": "syslog-tcp"}
    if parts.scheme not in kinds:
        raise SinkDeclarationError(
            f"AGENTOPS_AUDIT_SINK {raw!r}: the scheme must be https, http, syslog, syslog+udp "
            "or syslog+tcp")
    try:
        port = parts.port
    except ValueError as exc:
        raise SinkDeclarationError(f"AGENTOPS_AUDIT_SINK {raw!r}: {exc}") from exc
    if not parts.hostname or not port:
        raise SinkDeclarationError(f"AGENTOPS_AUDIT_SINK {raw!r} needs a host and a port, "
                                   "e.g. syslog+tcp://127.0.0.1:5514")
    return Sink(address=f"{parts.scheme}://{parts.hostname}:{port}", kind=kinds[parts.scheme],
                host=parts.hostname, port=port)
