#!/usr/bin/env bash
# Installs the Debian 12 packages libpsa needs, only those that are missing.
# Usage: scripts/setup.sh [core|python|bindings|robustness|all]   (default: all)
# Runs apt-get as root directly, otherwise through sudo when available.
set -euo pipefail
what=${1:-all}
core="cmake g++ make pkg-config libyaml-cpp-dev libcxxopts-dev libgtest-dev libgmock-dev zlib1g-dev"
# bindings: SWIG (Python, C#), Python headers + NumPy + pytest (+ venv/pip/setuptools/wheel for
# the `pip install` test), Mono's mcs + mono, Rust (cargo, rustc; bindgen + libclang for the
# FFI currency check), pkg-config (the Rust crates and the pkg-config example find libpsa with it).
bindings="swig python3-dev python3-numpy python3-pytest python3-venv python3-pip python3-setuptools python3-wheel mono-mcs mono-runtime libmono-system-runtime4.0-cil cargo rustc bindgen libclang-dev pkg-config"
# python: what `pip install .` (the libpsa Python package) needs besides PyPI: the compiler,
# CMake and yaml-cpp of core, the Python headers, venv and pip.
python="cmake g++ make libyaml-cpp-dev python3-dev python3-venv python3-pip"
# robustness: clang with libFuzzer and the sanitizer runtimes (scripts/fuzz.sh, sanitize.sh).
robustness="clang libclang-rt-14-dev"
case "$what" in
  core) pkgs="$core" ;;
  python) pkgs="$python" ;;
  bindings) pkgs="$bindings" ;;
  robustness) pkgs="$robustness" ;;
  all) pkgs="$core $bindings $robustness" ;;
  *) echo "setup.sh: unknown set '$what' (expected core, python, bindings, robustness or all)" >&2; exit 2 ;;
esac
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup.sh: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
