"""scripts/llama_server.sh shows the model-server compile's progress from ninja's lines.

The build itself takes 6-50 min, so the test feeds the script's progress filter (the same
function the build pipes pip's output through) lines captured from a real build's log.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "llama_server.sh"
SRC = "/tmp/pip-install-x/llama-cpp-python_1/vendor/llama.cpp"
TOTAL = 193


def _compile(n: int, path: str) -> str:
    return (f"  [{n}/{TOTAL}] /usr/bin/g++ -DGGML_BUILD -I{SRC}/ggml/src/. -O3 -DNDEBUG -fPIC "
            f"-MD -MT vendor/x.o -MF vendor/x.o.d -o vendor/{path}.o -c {SRC}/{path}")


CAPTURED = [
    "  -- ggml version: 0.25.3",
    "  CMake Warning (dev) at CMakeLists.txt:20 (install):",
    "  This warning is for project developers.  Use -Wno-dev to suppress it.",
    "  *** Building project with Ninja...",
    *[_compile(n, f"ggml/src/file{n}.cpp") for n in range(1, 10)],
    f"  [10/{TOTAL}] : && /usr/bin/g++ -fPIC -O3 -shared -Wl,-soname,libggml-base.so.0 "
    "-o bin/libggml-base.so.0.25.3 vendor/a.o vendor/b.o && :",
    *[_compile(n, f"src/file{n}.cpp") for n in range(11, TOTAL + 1)],
    f"{SRC}/src/llama.cpp:12:3: error: 'foo' was not declared in this scope",
    "Successfully installed llama-cpp-python-0.3.16",
]


def _progress(lines: list[str]) -> list[str]:
    done = subprocess.run(["bash", str(SCRIPT), "progress"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.splitlines()


def test_progress_shows_ninja_steps_every_five_percent_with_the_file():
    shown = _progress(CAPTURED)
    steps = [line for line in shown if " compiling [" in line]
    assert steps[0] == "llama_server.sh: compiling [1/193] 0% llama.cpp/ggml/src/file1.cpp"
    assert steps[1] == "llama_server.sh: compiling [10/193] 5% linking bin/libggml-base.so.0.25.3"
    assert steps[-1] == "llama_server.sh: compiling [193/193] 100% llama.cpp/src/file193.cpp"
    assert 20 <= len(steps) <= 22  # one per 5%, plus the first and the last: not 193 lines
    assert all(line.startswith("llama_server.sh: ") for line in shown)


def test_progress_shows_errors_and_the_verdict_but_not_cmake_noise():
    shown = _progress(CAPTURED)
    assert any("error: 'foo' was not declared" in line for line in shown)
    assert shown[-1] == "llama_server.sh: Successfully installed llama-cpp-python-0.3.16"
    assert not any("CMake Warning" in line or "ggml version" in line for line in shown)


def test_make_style_percent_lines_still_show():
    assert _progress(["[ 42%] Building CXX object ggml.o", "-- noise"]) == [
        "llama_server.sh: [ 42%] Building CXX object ggml.o"]


def test_the_build_says_where_its_full_log_is():
    text = SCRIPT.read_text()
    assert '| build_progress' in text
    assert text.count("full output: $CACHE/llama-build.log") + text.count(
        "its full output goes to $CACHE/llama-build.log") == 2
