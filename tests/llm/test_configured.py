"""agentops.llm.configured: one configured client per process, rebuilt when settings change."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from agentops.llm.configured import model_from_settings
from agentops.llm.protocol import ModelOptions

from . import test_openai_compat_errors as served
from .test_openai_compat_errors import API_KEY, Canned, FakeServer, completion

fake = served.fake  # the fake chat-completions server fixture, shared


def _point_at(settings: Any, server: FakeServer, name: str = "fake-model") -> None:
    settings.AGENTOPS_MODEL_PROVIDER = "openai"
    settings.AGENTOPS_MODEL_BASE_URL = server.base_url
    settings.AGENTOPS_MODEL_API_KEY = API_KEY
    settings.AGENTOPS_MODEL_NAME = name


def test_the_process_keeps_one_client(settings: Any, fake: FakeServer) -> None:
    _point_at(settings, fake)
    assert model_from_settings() is model_from_settings()


def test_a_changed_setting_builds_a_new_client_that_uses_it(settings: Any,
                                                            fake: FakeServer) -> None:
    fake.answer = Canned(body=completion({"content": "hi"}))
    _point_at(settings, fake)
    first = model_from_settings()
    settings.AGENTOPS_MODEL_NAME = "other-model"
    second = model_from_settings()
    assert second is not first
    second.complete(messages=[{"role": "user", "content": "x"}], tools=[])
    assert fake.requests[-1]["json"]["model"] == "other-model"
    settings.AGENTOPS_MODEL_STREAM = True
    assert model_from_settings().options.stream is True


def test_explicit_options_get_their_own_client(settings: Any, fake: FakeServer) -> None:
    _point_at(settings, fake)
    mine = model_from_settings(ModelOptions(repair_turns=0))
    assert mine is not model_from_settings()
    assert mine.options.repair_turns == 0


def test_the_pool_keeps_a_connection_per_run_in_flight(settings: Any, fake: FakeServer) -> None:
    _point_at(settings, fake)
    settings.AGENTOPS_RUNS_IN_FLIGHT = 37
    assert model_from_settings()._lanes._keep == 37


def test_only_the_configured_providers_sdk_is_imported() -> None:
    code = ("import sys, agentops.llm.configured, agentops.agents; "
            "print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
