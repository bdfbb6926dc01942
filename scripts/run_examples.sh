#!/usr/bin/env bash
# scripts/run_examples.sh BUILD_DIR -- runs the commands of examples/README.md for the C,
# C++, C# and Rust examples, from the repository root, against the build in BUILD_DIR (the
# README's commands name it `build`). An example whose tools are missing (mono/mcs, cargo,
# pkg-config) is skipped with the reason. Exits non-zero when any command fails, or when a
# command here and the README's differ. ctest runs it as examples.readme_commands.
#
# The commands below must match examples/README.md: they are the same text, with $B here
# where the README writes `build`. Edit both together; the check below fails otherwise.
set -uo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$1" && pwd) || { echo "run_examples.sh: no directory $1" >&2; exit 2; }
cd "$root"
# The commands use paths relative to the repository root, and $PWD/$B for absolute ones.
B=$(realpath --relative-to="$root" "$build")
readme=examples/README.md

failures=()
skipped=()
ran=()

# example <name> <command>: checks that <command> (with `build` for $B) is a line of the
# README, then runs it from the repository root.
example() {
  local name=$1 command=$2
  local as_written=${command//'$B'/build}
  echo
  echo "==== $name"
  if ! grep -qxF -- "$as_written" "$readme"; then
    echo "run_examples.sh: $name: this command is not in $readme:" >&2
    echo "  $as_written" >&2
    failures+=("$name (command differs from $readme)")
    return
  fi
  echo "\$ $command"
  if (cd "$root" && eval "$command"); then
    ran+=("$name")
  else
    failures+=("$name")
  fi
}

# skip <name> <reason>
skip() {
  echo
  echo "==== $1: SKIPPED: $2"
  skipped+=("$1 ($2)")
}

have() { command -v "$1" >/dev/null 2>&1; }

# ---- the commands of examples/README.md (must match it) ---------------------------------
commands=()

commands+=('cc -std=c11 -Iinclude examples/c/linked_example.c -L$B -lpsa -lm -Wl,-rpath,"$PWD/$B" -o $B/examples/linked_example && $B/examples/linked_example')
if have cc; then
  example "C, linked" "${commands[-1]}"
else
  skip "C, linked" "cc not found"
fi

commands+=('cc -std=c11 -Iinclude examples/c/dlopen_example.c -ldl -lm -o $B/examples/dlopen_example && $B/examples/dlopen_example $B/libpsa.so.0')
if have cc; then
  example "C, dlopen" "${commands[-1]}"
else
  skip "C, dlopen" "cc not found"
fi

commands+=('cmake --install $B --prefix $B/prefix && cmake -S examples/cpp -B $B/examples/cpp-consumer -DCMAKE_PREFIX_PATH="$PWD/$B/prefix" && cmake --build $B/examples/cpp-consumer && $B/examples/cpp-consumer/psa_cpp_example')
example "C++, find_package" "${commands[-1]}"

commands+=('cmake --build $B --target psa_csharp_assembly && mcs -r:$B/bindings/csharp/Psa.dll -out:$B/examples/Example.exe examples/csharp/Example.cs && MONO_PATH=$B/bindings/csharp LD_LIBRARY_PATH=$B/bindings/csharp:$B mono $B/examples/Example.exe')
if ! have mcs || ! have mono; then
  skip "C#" "mcs or mono not found (bash scripts/setup.sh bindings)"
elif ! grep -qs '^PSA_MCS:FILEPATH=/' "$B/CMakeCache.txt"; then
  skip "C#" "$B was configured without the C# binding (SWIG or Mono missing then, or PSA_BUILD_BINDINGS=OFF; rerun cmake -S . -B $B)"
else
  example "C#" "${commands[-1]}"
fi

commands+=('PKG_CONFIG_PATH=$B/pkgconfig LD_LIBRARY_PATH=$B cargo run --offline --manifest-path examples/rust/Cargo.toml')
if ! have cargo; then
  skip "Rust" "cargo not found (bash scripts/setup.sh bindings)"
elif ! have pkg-config; then
  skip "Rust" "pkg-config not found (bash scripts/setup.sh core)"
else
  example "Rust" "${commands[-1]}"
fi

# ---- the other direction: every command line of the README is one of the above ----------
# (lines inside ```sh blocks; the Python commands are run by scripts/python_package_test.sh).
while IFS= read -r line; do
  found=0
  for command in "${commands[@]}"; do
    [ "${command//'$B'/build}" = "$line" ] && found=1 && break
  done
  if [ "$found" = 0 ]; then
    echo "run_examples.sh: $readme has a command that this script does not run:" >&2
    echo "  $line" >&2
    failures+=("README command not in run_examples.sh")
  fi
done < <(awk '/^```sh$/ {inside = 1; next} /^```$/ {inside = 0; next}
              inside && $0 !~ /^python3 / && $0 !~ /^\.venv\// && $0 !~ /^#/ && NF' "$readme")

echo
echo "run_examples.sh ($B): ran ${#ran[@]}, skipped ${#skipped[@]}, failed ${#failures[@]}"
for s in "${skipped[@]+"${skipped[@]}"}"; do echo "  skipped: $s"; done
for f in "${failures[@]+"${failures[@]}"}"; do echo "  FAILED: $f"; done
[ "${#failures[@]}" -eq 0 ]
