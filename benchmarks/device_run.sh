#!/usr/bin/env bash
# benchmarks/device_run.sh -- build, test and benchmark libpsa on a GPU machine in one go:
# a Release build for sm_90a in a fresh build directory (BUILD overrides it), the GPU test
# suite (psa_cuda_tests), (MEMCHECK=1) compute-sanitizer memcheck on it, (TIMINGS=filter)
# disabled timing tests, (RACECHECK_FILTER=...) compute-sanitizer racecheck on a subset, the
# benchmark (psa_bench + cuDNN SDPA through run_bench.py; SHAPES picks the shapes) and
# (NCU=1) one ncu capture of the dense kernel at Wan2.1-1.3B (NCU_SHAPE picks another).
# Logs go under $OUT (default /tmp/psa-out; at most 8 files).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-/tmp/psa-out}
b=${BUILD:-/tmp/bg$(date +%s)}  # fresh by default: copied sources can look older than old objects
mkdir -p "$out"
t0=$(date +%s)
{ cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DPSA_BUILD_BINDINGS=OFF -DPSA_BUILD_EXAMPLES=OFF && cmake --build "$b" -j16 ; } >"$out/build.log" 2>&1 || { echo "BUILD FAILED"; grep -E "error" -A3 "$out/build.log" | head -40; exit 1; }
echo "build ok $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
timeout "${TESTS_TIMEOUT:-300}" "$b/tests/psa_cuda_tests" >"$out/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $(( $(date +%s) - t0 )) s: $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' "$out/gpu_tests.log" | tr '\n' ' ')"
if [ -n "${TIMINGS:-}" ]; then  # disabled timing tests, e.g. TIMINGS=CudaImportance.DISABLED_StandardShapeTimings
  t0=$(date +%s)
  "$b/tests/psa_cuda_tests" --gtest_also_run_disabled_tests --gtest_filter="$TIMINGS" >"$out/timings.log" 2>&1
  echo "timings rc=$? $(( $(date +%s) - t0 )) s"
  grep -vE '^\[ |^$|^Note:' "$out/timings.log" | head -60
fi
if [ -n "${MEMCHECK:-}" ]; then
  t0=$(date +%s)
  timeout "${MEMCHECK_TIMEOUT:-200}" compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$b/tests/psa_cuda_tests" ${MEMCHECK_FILTER:+--gtest_filter=$MEMCHECK_FILTER} >"$out/memcheck.log" 2>&1
  echo "memcheck rc=$? $(( $(date +%s) - t0 )) s: $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -1) $(grep -E '^\[  PASSED|^\[  FAILED' "$out/memcheck.log" | tr '\n' ' ')"
fi
if [ -n "${RACECHECK_FILTER:-}" ]; then
  t0=$(date +%s)
  timeout "${RACECHECK_TIMEOUT:-90}" compute-sanitizer --tool racecheck --error-exitcode 99 \
    "$b/tests/psa_cuda_tests" --gtest_filter="$RACECHECK_FILTER" >"$out/racecheck.log" 2>&1
  echo "racecheck rc=$? $(( $(date +%s) - t0 )) s: $(grep -E 'RACECHECK SUMMARY' "$out/racecheck.log" | tail -1) $(grep -E '^\[  PASSED|^\[  FAILED' "$out/racecheck.log" | tr '\n' ' ')"
fi
t0=$(date +%s)
PYTHONUNBUFFERED=1 python3 benchmarks/run_bench.py --bench "$b/benchmarks/psa_bench" --shapes "${SHAPES:-cogvideox,wan13,wan14}" \
  --out "$out" >"$out/bench.log" 2>&1
echo "bench rc=$? $(( $(date +%s) - t0 )) s"
grep -E "^(cogvideox|wan13|wan14) " "$out/bench.log"
if [ -n "${NCU:-}" ]; then
  t0=$(date +%s)
  timeout 150 ncu --clock-control none -k regex:sparse_attention --launch-skip 2 --launch-count 1 \
    --metrics sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
    "$b/benchmarks/psa_bench" --shapes "${NCU_SHAPE:-wan13}" --ncu --json /dev/null >"$out/ncu.txt" 2>&1
  echo "ncu rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "sm__|smsp__|launch__|l1tex__" "$out/ncu.txt"
fi
cat "$out/bench.md" 2>/dev/null | tail -25
