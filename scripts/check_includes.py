#!/usr/bin/env python3
"""scripts/check_includes.py -- the layer check of libpsa's include graph: every quoted
#include in src/ and cuda/ must point to the same layer or one below it. Prints each upward
include (file:line -> target, with both layers) and exits 1 when there is any; CI and ctest
(test `include_layers`) run it from the repository root or with the root as argument.

Layers, lowest first (a directory may include its own layer and every layer below):
  0 src/core       status table, errors, tensor descriptors, Problem
  1 src/config     validated Config, the method -> route decision
  2 stages         src/{rearrange,pool,importance,mask,attention}: *_spec.h meanings + CPU reference
  3 src/context    the shape plan (route, blocks, permutations) and the context object
  3 cuda/core      shared device code (status, sm90 wrappers, wgmma ops)
  4 src/methods    rf_v2 / ada_bsa mask builders (read the plan)
  4 src/picture    mask pictures (PNG)
  4 cuda/<stage>   CUDA kernels, launchers and entries per stage
  5 src/backend    CPU and CUDA backends (read the plan, call the stages)
  6 src/pipeline   one forward: checks, the plan cache, dispatch to the backend
  7 src/api        extern "C" entry points
include/psa.h is visible to every layer.
"""
import pathlib
import re
import sys

STAGES = ("rearrange", "pool", "importance", "mask", "attention")


def layer_of(path: str):
    parts = path.split("/")
    if parts[0] == "src" and len(parts) > 1:
        parts = parts[1:]
    elif parts[0] == "cuda" and len(parts) > 1:
        return ("cuda/core", 3) if parts[1] == "core" else ("cuda/" + parts[1], 4)
    top = parts[0]
    table = {"core": 0, "config": 1, "context": 3, "methods": 4, "picture": 4, "backend": 5,
             "pipeline": 6, "api": 7}
    if top in STAGES:
        return (top, 2)
    if top in table:
        return (top, table[top])
    return None


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    bad = 0
    files = 0
    for base in ("src", "cuda"):
        for f in sorted((root / base).rglob("*")):
            if f.suffix not in (".h", ".cpp", ".cu", ".cuh", ".in"):
                continue
            files += 1
            rel = f.relative_to(root).as_posix()
            src_layer = layer_of(rel)
            if src_layer is None:
                continue
            for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                m = inc.match(line)
                if not m or m.group(1) == "psa.h":
                    continue
                target = m.group(1)
                dst_layer = layer_of(target)
                if dst_layer is None:
                    continue
                if dst_layer[1] > src_layer[1]:
                    bad += 1
                    print(f"{rel}:{n}: upward include of {target} "
                          f"({src_layer[0]}, layer {src_layer[1]} -> {dst_layer[0]}, layer {dst_layer[1]})")
    print(f"check_includes: {files} files, {bad} upward include(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
