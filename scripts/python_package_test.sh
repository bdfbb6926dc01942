#!/usr/bin/env bash
# scripts/python_package_test.sh -- the Python package as a new user gets it, run by
# scripts/test.sh (and so by CI): a copy of the source tree (the files git tracks or would
# track: what a clone of this commit holds), a fresh venv, `pip install` of that copy (which
# builds libpsa through CMake: CUDA when nvcc is found), every build directory deleted,
# then the Python tests, the Python examples as examples/README.md writes them, and
# `mypy --strict` against the installed package. Exits non-zero on any failure.
#   PSA_PY_WORK   work directory (default: build-python/ in the repository; removed first)
#   PSA_PY_EXTRAS pip extras to install with the package (default: test,typecheck)
#   PSA_PY_SKIP_FRAMEWORKS=1  leave out requirements-test.txt (torch, diffusers, transformers,
#                 jax): their tests skip; the venv shrinks from about 6 GiB to under 1 GiB
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${PSA_PY_WORK:-$root/build-python}
python=${PSA_PYTHON:-/usr/bin/python3}
extras=${PSA_PY_EXTRAS:-test,typecheck}

rm -rf "$work"
mkdir -p "$work/src"
# torch's CUDA wheels (requirements-test.txt) make the venv about 6 GiB, and pip unpacks them
# beside its download: say so up front when the disk is short, not only as pip's Errno 28.
free_kib=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
if [ -n "$free_kib" ] && [ "$free_kib" -lt $((12 * 1024 * 1024)) ] &&
   [ "${PSA_PY_SKIP_FRAMEWORKS:-0}" != 1 ]; then
  echo "python_package_test: warning: $((free_kib / 1024)) MiB free under $work; the venv with" \
       "the test frameworks needs about 12 GiB (PSA_PY_WORK moves it, PSA_PY_SKIP_FRAMEWORKS=1" \
       "leaves torch, diffusers, transformers and jax out)" >&2
fi
# The clone: tracked files plus new files git would track (nothing ignored, no build tree).
(cd "$root" && git ls-files -z --cached --others --exclude-standard) |
  (cd "$root" && xargs -0 cp --parents -t "$work/src" 2>/dev/null || true)
[ -f "$work/src/pyproject.toml" ] || { echo "python_package_test: copy failed" >&2; exit 1; }

"$python" -m venv "$work/venv"
py="$work/venv/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
req="$work/src/bindings/python/requirements-test.txt"
# JAX: psa/_jax_ffi.so (psa.jax) needs only the header-only XLA FFI API that jaxlib ships, so
# the pinned jax of $req goes in first and the isolated build is pointed at its headers
# (PSA_JAX_INCLUDE_DIR, PSA_BUILD_JAX=ON); tests/test_jax.py then must find the handlers.
jax_defines=()
jax_pin=$(grep -E '^jax(\[[a-z,]+\])?==' "$req" 2>/dev/null || true)
if [ -n "$jax_pin" ] && [ "${PSA_PY_SKIP_FRAMEWORKS:-0}" != 1 ]; then
  start=$(date +%s)
  if "$py" -m pip install -q "$jax_pin" &&
     jax_inc=$("$py" -c 'import jax.ffi; print(jax.ffi.include_dir())'); then
    jax_defines=(--config-settings="cmake.define.PSA_JAX_INCLUDE_DIR=$jax_inc"
                 --config-settings=cmake.define.PSA_BUILD_JAX=ON)
    export PSA_JAX_REQUIRED=1
    echo "python_package_test: $jax_pin took $(( $(date +%s) - start )) s (FFI headers: $jax_inc)"
  else
    echo "python_package_test: $jax_pin could not be installed: psa.jax not built, its tests skip"
  fi
fi
start=$(date +%s)
"$py" -m pip install -q ${jax_defines[@]+"${jax_defines[@]}"} "$work/src[$extras]"
echo "python_package_test: pip install took $(( $(date +%s) - start )) s"
if [ -f "$req" ] && [ "${PSA_PY_SKIP_FRAMEWORKS:-0}" != 1 ]; then
  start=$(date +%s)
  "$py" -m pip install -q -r "$req"
  echo "python_package_test: test frameworks ($req) took $(( $(date +%s) - start )) s"
fi
# Every build directory goes: the installed package must stand on its own.
find "$work/src" -maxdepth 1 -name 'build*' -exec rm -rf {} +
rm -rf "$work/src/_skbuild"

cd "$work"
"$py" - <<'PY'
import os, sys
import psa
site = os.path.dirname(os.path.dirname(psa.__file__))
assert site.startswith(sys.prefix), ("psa imported from outside the venv", psa.__file__)
assert psa.__version__ == psa.library_version() == psa.header_version()
print("python_package_test: psa %s from %s (CUDA backend usable: %s)"
      % (psa.__version__, os.path.dirname(psa.__file__), psa.cuda_available()))
PY
status=0
env -u LD_LIBRARY_PATH "$py" -B -m pytest -q -p no:cacheprovider "$work/src/bindings/python/tests" || status=1
# The Python examples, exactly as examples/README.md writes them (from the repository root).
# .venv/bin/python there is this venv's interpreter (a link: the commands stay verbatim).
ln -sfn "$work/venv" "$work/src/.venv"
(cd "$work/src" && env -u LD_LIBRARY_PATH .venv/bin/python examples/python/numpy_example.py) || status=1
rc=0
(cd "$work/src" && env -u LD_LIBRARY_PATH .venv/bin/python examples/python/torch_cuda_example.py) || rc=$?
case $rc in
  0) ;;
  77) echo "python_package_test: torch_cuda_example.py skipped (exit 77: see its SKIP line)" ;;
  *) status=1 ;;
esac
# Types: the installed package, strict.
(cd "$work/src" && "$work/venv/bin/mypy" --strict --config-file pyproject.toml -p psa) || status=1
echo "python_package_test: $([ $status = 0 ] && echo OK || echo FAILED)"
exit $status
