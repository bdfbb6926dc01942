#!/usr/bin/env bash
# Quick start, step 2: installs the Debian 12 packages (scripts/setup.sh all; when the
# bindings' tools cannot be installed, CMake skips the bindings), builds everything into
# build/ (Release; CUDA backend when nvcc is found) and runs the whole test suite: the CPU
# tests always, the GPU tests (label gpu) when nvidia-smi sees a GPU. Exits non-zero on any
# failure; the last lines printed are the summaries (ctest's, then each step's). Works from
# any directory.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if ! bash scripts/setup.sh all; then
  echo "test.sh: warning: the bindings' tools could not be installed; CMake skips the bindings" >&2
  bash scripts/setup.sh core
fi
if [ -f build/CMakeCache.txt ]; then
  cmake -S . -B build
else
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPSA_WITH_CUDA=AUTO
fi
jobs=$(nproc)
cmake --build build -j"$jobs"

status=0
summaries=()
failure_tails=()  # logs of failed steps whose last lines are printed again at the end
# run_ctest <log name> <ctest args...>: runs ctest, keeps its summary line, records failure.
run_ctest() {
  local log="build/$1.log"
  shift
  local rc=0
  ctest --test-dir build --output-on-failure "$@" 2>&1 | tee "$log" || rc=$?
  [ "$rc" -eq 0 ] || status=1
  local line
  line=$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1 || true)
  [ -n "$line" ] && summaries+=("$line")
  return 0
}

run_ctest ctest-cpu -j"$jobs" -LE gpu --no-tests=error
if nvidia-smi -L >/dev/null 2>&1; then
  run_ctest ctest-gpu -L gpu --no-tests=ignore
else
  echo "test.sh: no GPU (nvidia-smi -L failed): skipping the tests labelled gpu"
fi

# ---- the Python package as a user installs it (scripts/python_package_test.sh) ---------------
# A copy of the tree, a fresh venv, `pip install` (libpsa built again through CMake), every
# build directory deleted, then the Python tests, the Python examples and mypy --strict
# against the installed package. PSA_SKIP_PYTHON_PACKAGE=1 skips it.
if [ "${PSA_SKIP_PYTHON_PACKAGE:-0}" = 1 ]; then
  echo "test.sh: PSA_SKIP_PYTHON_PACKAGE=1: skipping scripts/python_package_test.sh"
else
  if bash scripts/python_package_test.sh 2>&1 | tee build/python-package.log; then
    summaries+=("python package: OK (pip install, tests, examples, mypy --strict)")
  else
    summaries+=("python package: FAILED (scripts/python_package_test.sh; log: build/python-package.log)")
    failure_tails+=(build/python-package.log)
    status=1
  fi
fi

# ---- robustness steps (scripts/sanitize.sh, scripts/fuzz.sh) --------------------------------
# The CPU suite again under ASan + UBSan in build/sanitize (plus a LeakSanitizer pass), then each
# libFuzzer target for PSA_FUZZ_SECONDS (45 s here) in build/fuzz; fuzz.sh prints "skipped" and
# succeeds when clang/libFuzzer is missing. About 5 minutes on 2 cores from a clean tree.
# PSA_SKIP_ROBUSTNESS=1 skips both. Any failure fails this script.
if [ "${PSA_SKIP_ROBUSTNESS:-0}" = 1 ]; then
  echo "test.sh: PSA_SKIP_ROBUSTNESS=1: skipping scripts/sanitize.sh and scripts/fuzz.sh"
else
  bash scripts/sanitize.sh || status=1
  PSA_FUZZ_SECONDS=${PSA_FUZZ_SECONDS:-45} bash scripts/fuzz.sh || status=1
fi

# A failed step's own output is far above the summary; its last lines come again here.
for log in ${failure_tails[@]+"${failure_tails[@]}"}; do
  echo
  echo "---- the last 40 lines of $log ----"
  tail -n 40 "$log"
done
echo
for line in "${summaries[@]}"; do echo "$line"; done
exit "$status"
