#!/usr/bin/env bash
# Quick start, step 1: installs the Debian 12 packages libpsa needs (scripts/setup.sh core),
# builds the library and the psa command into build/ (Release; CUDA backend when nvcc is
# found) and runs `psa demo`. Works from any directory; reuses an existing build/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/setup.sh core
if [ -f build/CMakeCache.txt ]; then
  cmake -S . -B build
else
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPSA_WITH_CUDA=AUTO
fi
cmake --build build -j"$(nproc)" --target psa_cli
build/cli/psa demo
