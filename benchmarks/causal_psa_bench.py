#!/usr/bin/env python3
"""benchmarks/causal_psa_bench.py -- the causal PSA variant (type psa_causal, spec App. A) at
vision-language prefill sizes against causal dense attention (torch SDPA, cuDNN backend).

Shape: Qwen2.5-VL-7B's text decoder, one layer: 28 query heads, 4 KV heads (GQA), head_dim
128, bf16, batch 1, L prefill tokens (--lengths, default 32768,131072). Inputs: q and k share
a smooth random field along the sequence plus noise (neighbouring tokens attend to each other,
as in real prefill), v random; fixed seed.

Per length and preset (--presets of model Qwen2.5-VL-7B, default psa_balanced,psa_topk,dense;
"dense" is libpsa's own attention kernel over every causal key, type dense with causal = 1):
  density  libpsa's statistics of one forward (a level-p block counts 1/p, over all nb x nb
           block pairs; causal dense attention is about 0.5);
  causal work  the density as a share of the nb (nb + 1) / 2 causal block pairs;
  rel-L2   ||psa - dense|| / ||dense|| in fp32, dense = causal SDPA on the same bf16 inputs;
  ms       median of --iters forwards (CUDA events, after --warmup), psa.Context.forward;
  stages   then --iters more forwards with the context's stage events on: the median ms of
           rearrange, pool (K/V pyramids), importance (antidiagonal scores), mask (similarity
           cap, level rule, work list), attention and total, printed under each row;
  SDPA ms  causal cuDNN SDPA (torch.nn.attention.sdpa_kernel(CUDNN_ATTENTION); K/V repeated to
           28 heads when the backend refuses GQA), same timing rule.
Prints one markdown table (BENCHMARKS.md format). About 1-3 minutes on an H100 with the
defaults. Needs a CUDA build of the psa package and torch with CUDA.

    python3 benchmarks/causal_psa_bench.py [--lengths 32768,131072] [--iters 5]
"""

from __future__ import annotations

import argparse
import math
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", default="32768,131072")
    ap.add_argument("--presets", default="psa_balanced,psa_topk,dense")
    ap.add_argument("--model", default="Qwen2.5-VL-7B")
    ap.add_argument("--heads", type=int, default=28)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()

    import torch
    import psa

    if not torch.cuda.is_available() or not psa.cuda_available():
        print("SKIP: no CUDA device or psa built without CUDA")
        return 77
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)

    def timed(fn):
        for _ in range(args.warmup):
            fn()
        times = []
        for _ in range(args.iters):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        return sorted(times)[len(times) // 2]

    def timing_setter():
        """psa_context_set_stage_timing (experimental C API, not in the SWIG module): from
        the binding if it has it, else through ctypes from the libpsa next to the package."""
        f = getattr(psa.capi, "psa_context_set_stage_timing", None)
        if f is not None:
            return f
        import ctypes
        import glob
        import os
        here = os.path.dirname(os.path.abspath(psa.capi.__file__))
        for path in sorted(glob.glob(os.path.join(here, "libpsa.so*")) +
                           glob.glob(os.path.join(here, "..", "lib*", "libpsa.so*"))):
            try:
                fn = ctypes.CDLL(path).psa_context_set_stage_timing
            except (OSError, AttributeError):
                continue
            fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int32], ctypes.c_int
            # The SWIG proxy holds the C pointer in .this (a SwigPyObject, int() = address).
            return lambda handle, on: fn(int(getattr(handle, "this", handle)), on)
        return None

    def stage_split(ctx, fn):
        """Median per-stage times of --iters forwards from the context's own stage events
        (psa_context_set_stage_timing); {} when the binding does not expose it."""
        setter = timing_setter()
        if setter is None:
            return {}
        try:
            setter(ctx.handle, 1)
        except (TypeError, ValueError, OSError) as e:
            print(f"stage timing unavailable: {e}", file=sys.stderr)
            return {}
        try:
            runs = []
            for _ in range(max(args.iters, 1)):
                fn()
                torch.cuda.synchronize()
                runs.append(ctx.stats().stage_ms)
        finally:
            setter(ctx.handle, 0)
        return {name: sorted(r[name] for r in runs)[len(runs) // 2] for name in runs[0]}

    def inputs(L):
        H, Hk, D = args.heads, args.kv_heads, args.head_dim
        pos = torch.arange(L, device=dev, dtype=torch.float32)[:, None] / 64.0
        freq = torch.randn(1, D, device=dev, generator=gen)
        phase = torch.rand(1, D, device=dev, generator=gen) * 6.283
        field = torch.sin(pos * freq + phase)  # [L, D], smooth along the sequence
        q = field + 0.5 * torch.randn(1, H, L, D, device=dev, generator=gen)
        k = field + 0.5 * torch.randn(1, Hk, L, D, device=dev, generator=gen)
        v = torch.randn(1, Hk, L, D, device=dev, generator=gen)
        return [x.to(torch.bfloat16).contiguous() for x in (q, k, v)]

    def causal_work(L, dens, block=128):
        """The density (over all nb x nb block pairs) as a share of the causal pairs
        nb (nb + 1) / 2: the fraction of causal dense attention's work the sparse stage does."""
        nb = -(-L // block)
        return dens * nb * nb / (nb * (nb + 1) / 2)

    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    rows = []
    t_start = time.time()
    for L in (int(x) for x in args.lengths.split(",")):
        q, k, v = inputs(L)
        rep = args.heads // args.kv_heads
        kr, vr = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)

        def sdpa():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, kr, vr, is_causal=True)

        with torch.no_grad():
            dense = sdpa().float()
            sdpa_ms = timed(sdpa)
            for preset in args.presets.split(","):
                if preset == "dense":  # libpsa's own kernel over every causal key
                    cfg = psa.Config()
                    cfg["type"] = "dense"
                    cfg["causal"] = True
                else:
                    cfg = psa.Config.load(args.model, preset)
                with psa.Context(cfg, backend="cuda") as ctx:
                    out = ctx.forward(q, k, v)
                    torch.cuda.synchronize()
                    st = ctx.stats()
                    err = (out.float() - dense).norm().item() / dense.norm().item()
                    ms = timed(lambda: ctx.forward(q, k, v, out=out))
                    split = stage_split(ctx, lambda: ctx.forward(q, k, v, out=out))
                rows.append((L, preset, st.density, err, ms, sdpa_ms))
                print("L=%d %s: density %.4f rel-L2 %.3e  %.2f ms  (cuDNN SDPA causal %.2f ms)"
                      % (L, preset, st.density, err, ms, sdpa_ms), flush=True)
                if split:
                    print("    stages (CUDA events, ms): " + ", ".join(
                        "%s %.2f" % (name, t) for name, t in split.items()), flush=True)
        del q, k, v, kr, vr, dense
        torch.cuda.empty_cache()
    print()
    print("| tokens | preset | density | causal work | rel-L2 vs causal dense | psa ms | cuDNN SDPA causal ms | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for L, preset, dens, err, ms, sms in rows:
        work = 1.0 if preset == "dense" else causal_work(L, dens)  # dense: density reads 1
        print("| %d | %s | %.4f | %.3f | %.3e | %.2f | %.2f | %.2fx |"
              % (L, preset, dens, work, err, ms, sms, sms / ms))
    print("\n%s, %d heads / %d KV heads, d%d, bf16; total %.0f s"
          % (torch.cuda.get_device_name(), args.heads, args.kv_heads, args.head_dim,
             time.time() - t_start))
    ok = all(math.isfinite(r[3]) and 0 < r[2] <= 1 for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
