#!/usr/bin/env python3
"""benchmarks/jax_bench.py -- psa.jax.attention (libpsa as an XLA FFI custom call) jitted,
against jax.nn.dot_product_attention(implementation="cudnn"), on the Wan2.1-1.3B 480p
self-attention shape: B=1, 12 heads, 21x30x52 = 32,760 tokens, head_dim 128, bf16, BSND
(jax's [B, T, N, H]: layout="blhd" for libpsa, no transposes on either side).

Usage (one command, well under 2 minutes on an H100; jax with CUDA and the psa package
built with its JAX handlers, see bindings/python/README.md "JAX"):

    python benchmarks/jax_bench.py [--iters 20] [--json out.json]
    python benchmarks/jax_bench.py --platform cpu --grid 2,8,16 --heads 2   # CPU smoke run

Inputs are video-like (a smooth function of the latent position per head and channel plus
noise, as benchmarks/psa_bench.cu makes them), so the presets' masks are as sparse as on
real activations. Rows: cuDNN SDPA, libpsa's dense kernel (the model's `baseline` preset)
and the shipped PSA presets (sparse forward: step=None). Per row: the median time of a
blocked call (jax.block_until_ready after each), the mean time of `--iters` calls queued
back to back, the speed-up over cuDNN and the relative L2 error against cuDNN's output.
Exit status: 0, 2 without a CUDA device in jax (one line saying so).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Tuple


def video_like(key: Any, shape: Tuple[int, int, int, int], grid: Tuple[int, int, int],
               dtype: Any) -> Any:
    import jax
    import jax.numpy as jnp

    b, seq, heads, dim = shape
    t, h, w = grid
    kf, kp, kn = jax.random.split(key, 3)
    freq = jnp.array([0.05, 0.05, 0.05]) + jnp.array([0.4, 0.3, 0.3]) * jax.random.uniform(
        kf, (heads, dim, 3))
    phase = 6.2831853 * jax.random.uniform(kp, (heads, dim))
    pos = jnp.stack(jnp.meshgrid(jnp.arange(t), jnp.arange(h), jnp.arange(w), indexing="ij"),
                    -1).reshape(seq, 3).astype(jnp.float32)
    field = 1.5 * jnp.sin(jnp.einsum("lc,hdc->lhd", pos, freq) + phase)
    noise = (jax.random.uniform(kn, (b, seq, heads, dim)) - 0.5) * 0.5
    return (field[None] + noise).astype(dtype)


def timed(fn: Callable[[], Any], iters: int, warmup: int = 3) -> Tuple[float, float, Any]:
    """(median ms of a blocked call, mean ms of `iters` queued calls, the output)."""
    import jax

    out = None
    for _ in range(warmup):
        out = jax.block_until_ready(fn())
    blocked: List[float] = []
    for _ in range(iters):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        blocked.append((time.perf_counter() - start) * 1e3)
    start = time.perf_counter()
    for _ in range(iters):
        out = fn()
    jax.block_until_ready(out)
    queued = (time.perf_counter() - start) * 1e3 / iters
    return statistics.median(blocked), queued, out


def rel_l2(a: Any, b: Any) -> float:
    import jax.numpy as jnp

    a32, b32 = a.astype(jnp.float32), b.astype(jnp.float32)
    return float(jnp.linalg.norm(a32 - b32) / jnp.linalg.norm(b32))


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", default="21,30,52", help="latent grid t,h,w (21,30,52)")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--model", default="Wan2.1_1.3b")
    parser.add_argument("--presets", default="psa_balanced,psa_topk",
                        help="PSA presets of --model to time (comma separated)")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--platform", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args(argv)

    import jax
    import jax.numpy as jnp

    if args.platform == "cuda":
        try:
            device = jax.devices("cuda")[0]
        except RuntimeError:
            print("jax_bench: no CUDA device in jax (jax %s, backends: %s): nothing timed"
                  % (jax.__version__, jax.default_backend()))
            return 2
        dtype, impl = jnp.bfloat16, "cudnn"
    else:
        device, dtype, impl = jax.devices("cpu")[0], jnp.float32, "xla"

    import psa
    import psa.jax

    grid = tuple(int(x) for x in args.grid.split(","))
    assert len(grid) == 3, "--grid t,h,w"
    seq = grid[0] * grid[1] * grid[2]
    shape = (args.batch, seq, args.heads, args.head_dim)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    with jax.default_device(device):
        q, k, v = (jax.block_until_ready(video_like(key, shape, grid, dtype)) for key in keys)

    sdpa = jax.jit(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation=impl))

    def psa_call(preset: str) -> Callable[[Any, Any, Any], Any]:
        return jax.jit(lambda q, k, v: psa.jax.attention(
            q, k, v, model=args.model, preset=preset, grid=grid, layout="blhd"))

    print("jax_bench: jax %s on %s; q/k/v %s %s (B, L, H, D), grid %s, %d iters"
          % (jax.__version__, device, shape, jnp.dtype(dtype).name, grid, args.iters))
    rows: List[Dict[str, Any]] = []
    start = time.perf_counter()
    base_ms, _, reference = timed(lambda: sdpa(q, k, v), args.iters)
    rows.append({"name": "jax.nn.dot_product_attention (%s)" % impl, "blocked_ms": base_ms,
                 "queued_ms": _, "speedup": 1.0, "rel_l2": 0.0,
                 "compile_and_first_s": None})
    for preset in ["baseline"] + [p for p in args.presets.split(",") if p]:
        fn = psa_call(preset)
        t0 = time.perf_counter()
        jax.block_until_ready(fn(q, k, v))  # trace, compile, plan
        first = time.perf_counter() - t0
        blocked, queued, out = timed(lambda: fn(q, k, v), args.iters)
        name = "psa.jax %s" % ("dense (baseline)" if preset == "baseline" else preset)
        rows.append({"name": name, "blocked_ms": blocked, "queued_ms": queued,
                     "speedup": base_ms / blocked, "rel_l2": rel_l2(out, reference),
                     "compile_and_first_s": first})

    width = max(len(r["name"]) for r in rows)
    print("%-*s  %11s  %10s  %8s  %9s  %s" % (width, "call", "blocked ms", "queued ms",
                                              "speed-up", "rel L2", "first call"))
    for r in rows:
        first = "" if r["compile_and_first_s"] is None else "%.2f s" % r["compile_and_first_s"]
        print("%-*s  %11.3f  %10.3f  %7.2fx  %9.2e  %s" % (
            width, r["name"], r["blocked_ms"], r["queued_ms"], r["speedup"], r["rel_l2"], first))
    print("jax_bench: done in %.1f s; context cache %s"
          % (time.perf_counter() - start, psa.jax.cache_info()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"jax": jax.__version__, "device": str(device), "shape": shape,
                       "grid": grid, "dtype": jnp.dtype(dtype).name, "iters": args.iters,
                       "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
