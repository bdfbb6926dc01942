#!/usr/bin/env bash
# bindings/python/tests/pip_install_test.sh -- ctest python.pip_install: `pip install` of a
# copy of bindings/python (+ psa.i) into a throwaway venv, offline, against the libpsa named
# by PSA_INCLUDE_DIR / PSA_LIB_DIR, then a CPU forward from outside the source tree.
# Usage: pip_install_test.sh <python> <repo root> <work dir>. Exit 77 (skipped) when the
# interpreter has no venv, pip or setuptools.
set -euo pipefail
python=$1 repo=$2 work=$3
if ! "$python" -c "import venv, setuptools, wheel, pip" 2>/dev/null; then
  echo "SKIP: $python lacks venv, pip, setuptools or wheel (apt-get install python3-venv python3-pip)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work/src/bindings"
# A copy: setuptools builds inside the project directory.
cp -r "$repo/bindings/python" "$work/src/bindings/python"
cp "$repo/bindings/psa.i" "$work/src/bindings/psa.i"
rm -rf "$work/src/bindings/python/build" "$work/src/bindings/python"/*.egg-info
"$python" -m venv --system-site-packages --without-pip "$work/venv"
PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$work/venv/bin/python" -m pip install -q --no-build-isolation --no-deps "$work/src/bindings/python"
cd "$work"
# LD_LIBRARY_PATH is not needed: the extension carries the library directory as its RPATH.
env -u LD_LIBRARY_PATH "$work/venv/bin/python" - <<'PY'
import numpy as np
import psa

assert psa.__file__.startswith(__import__("sys").prefix), psa.__file__
assert psa.__version__ == psa.library_version() == psa.header_version()
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, 2, 256, 64), dtype=np.float32) for _ in range(3))
cfg = psa.Config.load("Wan2.1_1.3b", "psa_topk")
cfg["use_rearrange"] = 0
with psa.Context(cfg, backend="cpu") as ctx:
    ctx.set_step(cfg["warmup_steps"])
    out = ctx.forward(q, k, v)
    print("pip-installed psa", psa.__version__, "from", psa.__file__, "density", ctx.stats().density)
assert out.shape == q.shape and np.isfinite(out).all()
PY
