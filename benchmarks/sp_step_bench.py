#!/usr/bin/env python3
"""benchmarks/sp_step_bench.py -- one denoising step of diffusers' WanTransformer3DModel on one GPU
and sequence-parallel over the ranks of torchrun (NCCL), dense against libpsa.

    torchrun --nproc-per-node 2 benchmarks/sp_step_bench.py --model 14b --layers 10 --json s.json
    torchrun --nproc-per-node 2 benchmarks/sp_step_bench.py --tiny --device cpu

The step, the model (random weights, diffusers' released Wan2.1 configs, --layers N of the
blocks) and the inputs are those of benchmarks/diffusers_step_bench.py: the transformer on a
batch of 2 (cond + uncond) plus the guidance combine; every rank builds the same model and
inputs (same seeds). Rows (eager):
  dense, 1 GPU        diffusers' default processors, SDPA forced to cuDNN (--sdpa).
  dense, ulysses W    diffusers' own context parallelism (model.enable_parallelism with
                      ContextParallelConfig(ulysses_degree=W), attention backend _native_cudnn).
  CONFIG, 1 GPU       psa.diffusers.enable_psa (CONFIG: a preset or topk:D as in
                      diffusers_step_bench.py), stepped past the preset's warm-up.
  CONFIG, ulysses W / ring W
                      psa.distributed.enable_sequence_parallel with that degree.
Each parallel row's output (every rank returns the whole latent) is compared with the one-GPU
output of the same configuration (relative L2: the model's other layers run on token shards,
so their GEMMs round differently; the attention itself is the one-process attention). Times:
CUDA events around a step after a synchronisation and a barrier, the slowest rank's, median
of --steps steps after --warmup.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffusers_step_bench as db  # noqa: E402  (the model, inputs and step of the 1-GPU bench)
import sp_bench  # noqa: E402  (ranks, timing and the worst-rank reductions)


def log(msg):
    if dist.get_rank() == 0:
        print("[sp-step %6.1fs] %s" % (time.time() - db.T0, msg), file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(db.MODELS), default="14b")
    ap.add_argument("--tiny", action="store_true", help="CPU-sized model (the CPU check)")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--configs", default="dense,topk:0.15")
    ap.add_argument("--modes", default="ulysses", help="ulysses, ring or both")
    ap.add_argument("--sdpa", default=None, choices=("cudnn", "flash", "efficient", "math",
                                                     "auto"), help="default: cudnn on CUDA")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps (>= 1)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, metavar="FILE")
    ap.add_argument("--commit", default=None)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    configs = [c for c in args.configs.split(",") if c]
    for m in modes:
        if m not in ("ulysses", "ring"):
            ap.error("--modes: %r is not ulysses or ring" % m)
    if args.warmup < 1:
        ap.error("--warmup: %d: at least 1 (its output is the one compared)" % args.warmup)

    device, dtype = sp_bench.init_ranks(args.device)
    cuda = device.type == "cuda"
    world = dist.get_world_size()

    def timed_steps(step):
        """(median of the slowest rank's ms per step, the output of a warm-up step)."""
        out = step()
        return sp_bench.timed(step, device, args.warmup - 1, args.steps), out
    if args.sdpa is None:
        args.sdpa = "cudnn" if cuda else "auto"

    import psa
    import psa.diffusers as pd
    import psa.distributed as psd

    spec = db.MODELS[args.model]
    config = dict(db.TINY) if args.tiny else dict(spec["config"])
    latent, text = (db.TINY_LATENT, db.TINY_TEXT) if args.tiny else (spec["latent"],
                                                                     spec["text"])
    full_layers = config["num_layers"]
    if args.layers:
        config["num_layers"] = args.layers
    model = db.build_model(torch, config, device.type, dtype, args.seed)
    x = db.make_inputs(torch, latent, text, device.type, dtype, args.seed + 1)
    step = db.make_step(model, x, "batch")
    psa_model = spec["psa_model"]
    env = db.environment(torch, device.type, args.commit)
    env.update(world=world, backend=dist.get_backend(), layers=config["num_layers"],
               full_layers=full_layers)
    if cuda:
        env["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    log("Wan %s: %d of %d layers, latent %s, %d ranks" % (
        "tiny" if args.tiny else args.model, config["num_layers"], full_layers, latent, world))
    rows, refs = [], {}

    def record(cfg, mode, ms, out, parallel_cfg=None, extra=None):
        row = dict(config=cfg, mode=mode, step_ms=ms)
        if mode == "1 GPU":
            refs[cfg] = (out, ms)
        else:
            ref, one_ms = refs[cfg]
            err = sp_bench.worst_over_ranks(sp_bench.rel_l2(out, ref), device)
            row.update(rel_l2_vs_one_gpu=err, speedup=one_ms / ms,
                       efficiency=one_ms / (world * ms))
        row.update(extra or {})
        rows.append(row)
        log("  %-12s %-10s %10.1f ms%s" % (cfg, mode, ms, "" if mode == "1 GPU" else
                                         "  %.2fx, rel-L2 vs 1 GPU %.2e" % (
                                             row["speedup"], row["rel_l2_vs_one_gpu"])))

    with torch.no_grad():
        # 1 GPU: every rank the whole step.
        for cfg in configs:
            pd.disable_psa(model)
            psa.clear_cache()
            if cfg == "dense":
                with db.sdpa_context(args.sdpa):
                    ms, out = timed_steps(step)
                record(cfg, "1 GPU", ms, out)
                continue
            preset, overrides = db.psa_settings(cfg)
            pd.enable_psa(model, model=psa_model, preset=preset, step_source="manual",
                          **overrides)
            pd.set_step(model, int(pd.stats(model)[0]["warmup_steps"]))
            ms, out = timed_steps(step)
            record(cfg, "1 GPU", ms, out)
        pd.disable_psa(model)
        # PSA, sequence-parallel (psa.distributed).
        for cfg in configs:
            if cfg == "dense":
                continue
            preset, overrides = db.psa_settings(cfg)
            for mode in modes:
                degrees = (dict(ulysses_degree=world, ring_degree=1) if mode == "ulysses"
                           else dict(ulysses_degree=1, ring_degree=world))
                psa.clear_cache()
                psd.enable_sequence_parallel(model, model=psa_model, preset=preset,
                                             step_source="manual", **degrees, **overrides)
                pd.set_step(model, int(pd.stats(model)[0]["warmup_steps"]))
                ms, out = timed_steps(step)
                record(cfg, "%s %d" % (mode, world), ms, out)
                pd.disable_psa(model)
        # Dense, sequence-parallel: diffusers' context parallelism (once: it cannot be undone;
        # diffusers 0.42 builds its device mesh on an accelerator only).
        if "dense" in configs and "ulysses" in modes and not cuda:
            log("  dense ulysses: skipped (diffusers' context parallelism needs GPUs)")
        elif "dense" in configs and "ulysses" in modes:
            from diffusers import ContextParallelConfig

            model.set_attention_backend("_native_cudnn" if cuda else "native")
            model.enable_parallelism(config=ContextParallelConfig(ulysses_degree=world))
            ms, out = timed_steps(step)
            record("dense", "ulysses %d" % world, ms, out,
                   extra=dict(how="diffusers enable_parallelism, backend %s"
                              % ("_native_cudnn" if cuda else "native")))
    if dist.get_rank() == 0:
        print("| config | mode | step ms | speed-up vs 1 GPU | efficiency | rel-L2 vs 1 GPU |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            par = r["mode"] != "1 GPU"
            print("| %s | %s | %.1f | %s | %s | %s |" % (
                r["config"], r["mode"], r["step_ms"], "%.2fx" % r["speedup"] if par else "-",
                "%.2f" % r["efficiency"] if par else "-",
                "%.2e" % r["rel_l2_vs_one_gpu"] if par else "-"))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(environment=env, rows=rows), f, indent=1)
    # Every rank tears down together: a rank that destroyed its group while rank 0 was still
    # writing the report aborted now and then on two CPU ranks (gloo: "terminate called
    # without an active exception", 2 of 32 runs; 0 of 44 with this barrier).
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
