#!/usr/bin/env bash
# scripts/fuzz.sh -- builds the libFuzzer targets of tests/fuzz/ with clang under ASan + UBSan
# (library sources linked statically) and runs each for a bounded time, starting from the
# checked-in corpus tests/fuzz/corpus/<kind>/ (read only: new inputs go to the build
# directory). Exits non-zero on any crash, leak, sanitizer report, timeout or broken
# invariant; the reproducer is written to <build>/findings/<target>/. Skips with a message
# (exit 0) when clang or libFuzzer is missing, unless PSA_FUZZ_REQUIRED=1.
#
# Environment:
#   PSA_FUZZ_SECONDS    fuzzing time per target (default 60); 0 replays the corpus only
#   PSA_FUZZ_TARGETS    targets to run (default: "yaml_config forward_cpu side_api")
#   PSA_FUZZ_BUILD_DIR  build directory (default: build/fuzz under the repository)
#   PSA_FUZZ_JOBS       build parallelism (default: nproc)
#   PSA_FUZZ_REQUIRED   1: a missing clang/libFuzzer is an error, not a skip
#   CC / CXX            clang compilers (default: clang / clang++)
#
# A finding: add the reproducer to tests/fuzz/corpus/<kind>/ as regression-<what>, fix the
# bug, and add a GoogleTest case (tests/robustness/fuzz_regressions_test.cpp).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${PSA_FUZZ_SECONDS:-60}
targets=${PSA_FUZZ_TARGETS:-"yaml_config forward_cpu side_api"}
build=${PSA_FUZZ_BUILD_DIR:-$root/build/fuzz}
jobs=${PSA_FUZZ_JOBS:-$(nproc)}
cc=${CC:-clang}
cxx=${CXX:-clang++}
say() { echo "fuzz.sh: $*"; }
skip() {
  if [ "${PSA_FUZZ_REQUIRED:-0}" = 1 ]; then
    say "error: $*" >&2
    exit 1
  fi
  say "skipped: $*"
  exit 0
}

case "$seconds" in '' | *[!0-9]*) say "PSA_FUZZ_SECONDS must be a whole number, got '$seconds'" >&2; exit 2 ;; esac
command -v "$cxx" >/dev/null 2>&1 || skip "no $cxx (install clang; libFuzzer comes with libclang-rt-*-dev)"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
  >"$probe/probe.cpp"
"$cxx" -fsanitize=fuzzer,address,undefined "$probe/probe.cpp" -o "$probe/probe" >/dev/null 2>&1 ||
  skip "$cxx cannot link -fsanitize=fuzzer,address,undefined (libFuzzer runtime missing: libclang-rt-*-dev)"

# LeakSanitizer (libFuzzer's -detect_leaks) needs ptrace-like thread suspension; see sanitize.sh.
printf '#include <cstdlib>\nint main() { void* volatile p = std::malloc(77); p = nullptr; return 0; }\n' >"$probe/leak.cpp"
leaks=0
if "$cxx" -fsanitize=address "$probe/leak.cpp" -o "$probe/leak" >/dev/null 2>&1 &&
   ! ASAN_OPTIONS=detect_leaks=1 "$probe/leak" >"$probe/leak.out" 2>&1 &&
   grep -q "detected memory leaks" "$probe/leak.out"; then
  leaks=1
else
  say "warning: LeakSanitizer does not work here; fuzzing without leak detection" >&2
fi

start=$(date +%s)
generator=()
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  # -O1 -g1: the usual libFuzzer setting; line tables are enough for symbolised reports.
  cmake -S "$root/tests/fuzz" -B "$build" "${generator[@]}" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" >/dev/null
else
  cmake -S "$root/tests/fuzz" -B "$build" >/dev/null
fi
build_targets=()
for t in $targets; do build_targets+=(--target "fuzz_$t"); done
cmake --build "$build" -j"$jobs" "${build_targets[@]}"
say "build done in $(( $(date +%s) - start )) s"

export ASAN_OPTIONS="detect_leaks=$leaks:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
for t in $targets; do
  case "$t" in
    yaml_config) kind=yaml; max_len=4096 ;;
    forward_cpu) kind=forward; max_len=512 ;;
    side_api) kind=side_api; max_len=512 ;;
    *) say "unknown target '$t' (known: yaml_config forward_cpu side_api)" >&2; exit 2 ;;
  esac
  bin="$build/fuzz_$t"
  seeds="$root/tests/fuzz/corpus/$kind"
  findings="$build/findings/$t"
  work="$build/corpus/$kind"
  mkdir -p "$findings" "$work"
  dict=()
  [ -f "$root/tests/fuzz/$kind.dict" ] && dict=(-dict="$root/tests/fuzz/$kind.dict")
  log="$build/fuzz_$t.log"
  rc=0
  if [ "$seconds" = 0 ]; then
    # Regression mode: every checked-in input once, no mutation.
    "$bin" -artifact_prefix="$findings/" -timeout=30 "$seeds"/* >"$log" 2>&1 || rc=$?
    say "$t: replayed $(find "$seeds" -type f | wc -l) corpus files: $( [ "$rc" = 0 ] && echo ok || echo FAILED )"
  else
    "$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=30 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$findings/" "${dict[@]}" "$work" "$seeds" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1 || true)
    say "$t: ${seconds} s, ${execs:-?} executions, ${cov:-cov: ?}, corpus $(find "$work" -type f | wc -l) files:" \
        "$( [ "$rc" = 0 ] && echo ok || echo FAILED )"
  fi
  if [ "$rc" != 0 ]; then
    status=1
    tail -n 60 "$log" >&2
    say "$t: reproducer(s) in $findings/ (replay: $bin <file>)" >&2
  fi
done
say "$( [ "$status" = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start )) s"
exit "$status"
