#!/usr/bin/env bash
# benchmarks/build_bench.sh BUILD_DIR [ARCH] -- builds psa_bench against BUILD_DIR/libpsa_internal.a
# with nvcc (the root CMakeLists does not add benchmarks/ yet; benchmarks/CMakeLists.txt is the
# CMake route once it does). Output: BUILD_DIR/psa_bench.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?build dir}
arch=${2:-90a}
libdirs=""
for d in $(echo "${CMAKE_PREFIX_PATH:-}" | tr : " "); do [ -d "$d/lib/x86_64-linux-gnu" ] && libdirs="$libdirs -L$d/lib/x86_64-linux-gnu"; done
nvcc -O3 -std=c++17 -gencode=arch=compute_${arch},code=sm_${arch} \
  -I"$root/include" -I"$root/src" -I"$root" \
  "$root/benchmarks/psa_bench.cu" "$build/libpsa_internal.a" $libdirs -lyaml-cpp \
  -o "$build/psa_bench"
echo "built $build/psa_bench"
