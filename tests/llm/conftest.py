"""Fixtures that run a real llama.cpp OpenAI-compatible server (Gemma 3 270M) for slow tests."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "llama_server.sh"
LLAMA_API_KEY = "secret"
N_CTX = 2048
BUILD_TIMEOUT_S = 1800
READY_TIMEOUT_S = 60


@dataclass(frozen=True)
class LlamaBuild:
    """The cached venv's interpreter and the model file it serves."""

    python: str
    gguf: str


def _unavailable(message: str) -> NoReturn:
    """Skip locally, but fail under CI, where the real-model tests must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _script(command: str) -> str:
    """Run scripts/llama_server.sh COMMAND and return the last line it printed."""
    try:
        done = subprocess.run(
            ["bash", str(SCRIPT), command],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        _unavailable(f"scripts/llama_server.sh {command} took over {BUILD_TIMEOUT_S} s")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        _unavailable(f"llama.cpp server build failed (scripts/llama_server.sh {command}):\n{tail}")
    return lines[-1]


def _free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_ready(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until /v1/models answers (any HTTP status means the server is up)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"llama server exited with {process.returncode}:\n{log.read_text()[-3000:]}"
            )
        try:
            urllib.request.urlopen(f"{base_url}/models", timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # 401 from the --api_key instance: up and guarding
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"llama server not ready after {READY_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@contextmanager
def _serve(build: LlamaBuild, *extra: str) -> Iterator[str]:
    """Run one llama_cpp.server process and yield its /v1 base URL."""
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    command = [
        build.python, "-m", "llama_cpp.server",
        "--model", build.gguf,
        # Gemma's own template has no tool calls; this one emits them when a tool is forced.
        "--chat_format", "chatml-function-calling",
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(N_CTX),
        *extra,
    ]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        _wait_ready(base_url, process, log)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def llama_build() -> LlamaBuild:
    """Build (or reuse) the cached llama.cpp venv and Gemma 3 270M GGUF."""
    gguf = _script("path")
    return LlamaBuild(python=_script("python"), gguf=gguf)


@pytest.fixture(scope="session")
def llama_server(llama_build: LlamaBuild) -> Iterator[str]:
    """Yield the base URL of a keyless real llama.cpp server."""
    with _serve(llama_build) as base_url:
        yield base_url


@pytest.fixture(scope="session")
def llama_server_with_key(llama_build: LlamaBuild) -> Iterator[str]:
    """Yield the base URL of a real llama.cpp server that requires ``LLAMA_API_KEY``."""
    with _serve(llama_build, "--api_key", LLAMA_API_KEY) as base_url:
        yield base_url
