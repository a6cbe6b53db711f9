"""A small MCP server for the tests: a CRM with an outbox, run over stdio or streamable HTTP.

Every effect is appended to the JSON-lines file named by $CRM_OUTBOX, so a test can see
exactly what happened, and how many times.
"""
from __future__ import annotations

import json
import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("crm")
OUTBOX = os.environ["CRM_OUTBOX"]


def _log() -> list[dict]:
    try:
        with open(OUTBOX) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def _append(entry: dict) -> None:
    with open(OUTBOX, "a") as f:
        f.write(json.dumps(entry) + "\n")


@server.tool()
def find_customer(email: str) -> dict:
    """Find a customer by email."""
    return {"email": email, "name": "Ada Lovelace", "plan": "pro"}


@server.tool()
def send_email(to: str, body: str, idempotency_key: str) -> dict:
    """Send an email to a customer (at most once per idempotency key)."""
    sent = [e for e in _log() if e["kind"] == "email" and e["key"] == idempotency_key]
    if not sent:
        _append({"kind": "email", "key": idempotency_key, "to": to, "body": body})
    if "slow" in body:
        time.sleep(float(os.environ.get("CRM_SLOW_S", "3")))
    return {"message_id": f"m-{idempotency_key[:8]}", "to": to}


@server.tool()
def find_email(idempotency_key: str) -> dict:
    """Say whether an email with this key was sent."""
    sent = [e for e in _log() if e["kind"] == "email" and e["key"] == idempotency_key]
    return {"found": bool(sent), "message_id": f"m-{idempotency_key[:8]}" if sent else None}


@server.tool()
def recall_email(message_id: str, idempotency_key: str) -> dict:
    """Recall a sent email."""
    _append({"kind": "recall", "key": idempotency_key, "message_id": message_id})
    return {"recalled": message_id}


@server.tool()
def close_account(email: str) -> str:
    """Close a customer's account."""
    _append({"kind": "closed", "email": email})
    return f"closed {email}"


@server.tool()
def refuse(reason: str) -> str:
    """Always fail."""
    raise ValueError(f"refused: {reason}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
