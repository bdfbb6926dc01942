#!/usr/bin/env bash
# examples/c/pkgconfig_test.sh -- ctest examples.pkgconfig: compiles linked_example.c with
# nothing but `pkg-config --cflags --libs psa` from the install prefix and runs it. The
# flags must be -I/-L/-lpsa only (the private dependencies stay inside libpsa.so).
# Usage: pkgconfig_test.sh <cc> <prefix> <libdir relative to prefix> <examples/c> <work dir>
# Exit 77 (skipped) without pkg-config.
set -euo pipefail
cc=$1 prefix=$2 libdir=$3 src=$4 work=$5
if ! command -v pkg-config >/dev/null 2>&1; then
  echo "SKIP: pkg-config not found (apt-get install pkg-config)"
  exit 77
fi
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
flags=$(pkg-config --cflags --libs psa)
echo "pkg-config --cflags --libs psa: $flags"
for f in $flags; do
  case "$f" in
    -I* | -L* | -lpsa) ;;
    *) echo "unexpected flag from psa.pc: $f" >&2; exit 1 ;;
  esac
done
mkdir -p "$work"
# shellcheck disable=SC2086  # word splitting of the flags is intended
"$cc" -std=c11 -Wall -Wextra -pedantic -Werror "$src/linked_example.c" $flags -lm -o "$work/linked_example"
LD_LIBRARY_PATH="$prefix/$libdir" "$work/linked_example"
