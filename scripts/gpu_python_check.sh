#!/usr/bin/env bash
# scripts/gpu_python_check.sh -- GPU machine only: the Python package with its CUDA backend.
# Installs the package (pip, no build isolation: scikit-build-core and SWIG must already be
# importable / on PATH) into a target directory, then runs the Python tests from outside the
# source tree (the CUDA ones run here: PyTorch + a GPU) and the PyTorch example. Logs and
# summary.txt go to $OUT (else /tmp/psa-py). Env: CUDA_ARCHS (90a), PSA_PY_TARGET, PSA_PY_BUILD;
# CC/CXX/CUDAHOSTCXX pick the compiler (one whose libstdc++ is shared: see CMakeLists.txt).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/psa-py}
target=${PSA_PY_TARGET:-/tmp/psa-pkg}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
say "gpu_python_check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); $(python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())' 2>&1)"
t0=$(date +%s)
skb=${PSA_PY_BUILD:-/tmp/psa-skb}
rm -rf "$target" "$skb"   # fresh: a kept CMake cache would keep its old compiler
# The JAX handler library too, when this Python has jax (its XLA FFI headers).
jax_args=()
if jax_inc=$(python3 -c "import jax.ffi; print(jax.ffi.include_dir())" 2>/dev/null); then
  jax_args=(-C cmake.define.PSA_BUILD_JAX=ON -C "cmake.define.PSA_JAX_INCLUDE_DIR=$jax_inc")
  export PSA_JAX_REQUIRED=1
fi
if ! python3 -m pip install --no-build-isolation --no-deps --no-compile --target "$target" "$root" \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" -C build-dir="$skb" "${jax_args[@]}" \
    >"$out/pip.log" 2>&1; then
  say "pip install FAILED"; grep -E "error|Error" -A3 "$out/pip.log" | head -40; exit 1
fi
say "pip install ok ($(( $(date +%s) - t0 )) s)"
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
cd /tmp
python3 -c "import psa; print('psa', psa.__version__, 'from', psa.__file__, 'cuda', psa.cuda_available())" | tee -a "$summary"
t0=$(date +%s)
python3 -B -m pytest -q -p no:cacheprovider -rs "$root/bindings/python/tests" >"$out/pytest.log" 2>&1
say "pytest rc=$? ($(( $(date +%s) - t0 )) s): $(tail -1 "$out/pytest.log")"
grep -E "^(FAILED|ERROR|SKIPPED)" "$out/pytest.log" | head -20 | tee -a "$summary"
cd "$root"
python3 examples/python/torch_cuda_example.py >"$out/torch_example.log" 2>&1
say "torch_cuda_example rc=$?"
cat "$out/torch_example.log" | tee -a "$summary"
if [ ${#jax_args[@]} -gt 0 ]; then
  python3 benchmarks/jax_bench.py --json "$out/jax_bench.json" >"$out/jax_bench.log" 2>&1
  say "jax_bench rc=$?"
  tail -15 "$out/jax_bench.log" | tee -a "$summary"
fi
