"""A plain OpenAI-compatible call imports no SDK; a streamed one imports it on first use.

Each case runs in a fresh interpreter: this test process has imported the SDK already.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agentops.llm.fake_server import FakeModelServer
from agentops.llm.openai_compat import request_headers

ROOT = Path(__file__).resolve().parents[2]
SDK_MODULES = ("openai", "httpx", "httpx2", "httpcore", "httpcore2", "pydantic")
_CALL = """
import json, sys
from agentops.llm.openai_compat import OpenAICompatClient
from agentops.llm.protocol import ModelOptions
client = OpenAICompatClient(base_url=sys.argv[1], api_key="sk-x", model="fake",
                            options=ModelOptions(stream=sys.argv[2] == "stream"))
reply = client.complete(messages=[{"role": "user", "content": "hi"}], tools=[],
                        on_text=lambda piece: None)
print(json.dumps({"text": reply.text, "loaded": sorted(
    m for m in sys.modules if m.split(".")[0] in %r)}))
""" % (SDK_MODULES,)


def _call(url: str, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _CALL, url, mode], cwd=ROOT, check=True,
                         capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout.splitlines()[-1])


def test_a_plain_call_imports_no_sdk_nor_its_http_library() -> None:
    with FakeModelServer({}) as server:
        got = _call(server.base_url, "plain")
    assert got == {"text": "done", "loaded": []}


def test_a_streamed_call_goes_through_the_sdk() -> None:
    with FakeModelServer({}) as server:
        got = _call(server.base_url, "stream")
    assert got["text"] == "done" and "openai" in got["loaded"]


def test_plain_headers_carry_the_key_and_the_sdks_organization_and_project() -> None:
    headers = request_headers("sk-x", {"OPENAI_ORG_ID": "org-1", "OPENAI_PROJECT_ID": ""})
    assert headers["authorization"] == "Bearer sk-x" and headers["openai-organization"] == "org-1"
    assert "openai-project" not in headers and headers["content-type"] == "application/json"
    assert request_headers("", {})["authorization"] == "Bearer no-key"
