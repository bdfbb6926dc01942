#!/usr/bin/env python3
"""benchmarks/sp_bench.py -- sequence-parallel attention on several GPUs (torchrun, NCCL): one GPU
against Ulysses and ring over the ranks, PSA (libpsa through psa.distributed.SequenceParallel)
and dense (cuDNN SDPA under the same parallelism), with the communication timed on its own.

    torchrun --nproc-per-node 2 benchmarks/sp_bench.py --json sp.json
    torchrun --nproc-per-node 2 benchmarks/sp_bench.py --device cpu --shapes tiny,tiny-text

Shapes (--shapes; bf16 on GPUs, fp32 on CPUs, batch 1, inputs drawn from N(0, 1) with the same
seed on every rank):
  wan14      Wan2.1-14B 720p: 40 heads x 128, grid 21 x 45 x 80 = 75,600 tokens (no text).
  cogvideox  CogVideoX-5B: 48 heads x 64, grid 13 x 30 x 45 + 226 text tokens (text first).
  wan13      Wan2.1-1.3B 480p: 12 heads x 128, grid 21 x 30 x 52.
  tiny, tiny-text: small CPU-sized problems (the CPU check of this script).
PSA configuration ("pyramid"): the table configuration of BENCHMARKS.md (cli/standard_shapes.h,
make_pyramid_config): the model's psa_balanced preset with topk quotas 1: 0.10, 2: 0.15, 4: 0.15,
8: 0.35, blocks 128 x 64, tile 32, no similarity cap, sample divisor 4, no warm-up -- density
about 0.15 whatever the inputs.

Modes (world W ranks): "1 GPU" (every rank runs the whole problem on its own GPU; the times are
the slowest rank's), "ulysses W" (all_to_all from sequence shards to head groups and back; PSA
in --chunks head chunks, the exchanges overlapping libpsa's work) and
"ring W" (PSA, --ring-impls: psa.distributed's p2p ring -- K all-gathered for the level map, K/V
shards passed round the ring, partial results merged by their log-sum-exps -- and its allgather
ring -- K and V all-gathered, one forward of the rank's query shard; dense: shards passed with
cuDNN SDPA returning its log-sum-exp, merged by psa.merge_attention).

Checks (every rank): the rank's output rows against the same rows of the one-GPU forward (relative
L2; must be within --budget), and for PSA the block pairs per level (1, 2, 4, 8, skipped), summed
over the ranks, against the one-GPU level map (must be equal): Ulysses counts the level map of
each rank's forward, the ring the level map each rank builds for its query shard.

Times: CUDA events around each call, after a device synchronisation and a barrier, the slowest
rank's time per call, median of --iters calls after --warmup. "comm" is the communication of
the mode alone (the same collectives on tensors of the same sizes, timed the same way): Ulysses
4 all_to_alls (q, k, v there, the output back), ring (PSA) the K all-gather plus W-1 K/V shard
passes (allgather: K and V all-gathered), ring (dense) the W-1 passes; in the p2p rings the
passes overlap the shard attentions, so the total is less than comm + compute. Efficiency = one-GPU time / (W x parallel time).

Output: a Markdown table on rank 0 (stdout) and, with --json FILE, the whole record (date, GPUs,
driver, torch / CUDA / cuDNN / NCCL / libpsa versions, git commit, rows). Exit status 1 when a
check fails.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist

import psa
import psa.distributed as psd
from psa._mask import level_map

SHAPES = {
    "wan14": dict(label="Wan2.1-14B 720p", model="Wan2.1_14b", heads=40, head_dim=128,
                  grid=(21, 45, 80), text=0),
    "cogvideox": dict(label="CogVideoX-5B", model="CogVideo_5b", heads=48, head_dim=64,
                      grid=(13, 30, 45), text=226),
    "wan13": dict(label="Wan2.1-1.3B 480p", model="Wan2.1_1.3b", heads=12, head_dim=128,
                  grid=(21, 30, 52), text=0),
    "tiny": dict(label="tiny", model="Wan2.1_1.3b", heads=4, head_dim=64, grid=(4, 16, 16),
                 text=0),
    "tiny-text": dict(label="tiny + text", model="CogVideo_5b", heads=4, head_dim=64,
                      grid=(3, 16, 16), text=40),
}
LEVELS = (1, 2, 4, 8, 0)


def pyramid_config(model):
    """BENCHMARKS.md's pyramid configuration (cli/standard_shapes.h, make_pyramid_config)."""
    cfg = psa.Config.load(model, "psa_balanced")
    cfg.update({"mask_mode": "topk", "block_size.m": 128, "block_size.n": 64,
                "block_size.tile_n": 32, "attn_impl": "new_mask_type", "use_sim_mask": False,
                "sample_divisor": 4, "warmup_steps": 0, "mask_ratios.1": 0.10,
                "mask_ratios.2": 0.15, "mask_ratios.4": 0.15, "mask_ratios.8": 0.35,
                "mask_ratios.0": 1.0})
    cfg.validate()
    return cfg


# ---- the forwards ----------------------------------------------------------------------------
def sdpa(q, k, v, lse=False):
    """Dense attention of [B, L, H, D] ("blhd") tensors through SDPA's [B, H, L, D] views: cuDNN
    on CUDA; with lse=True also the float32 [B, H, L] log-sum-exp."""
    qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))
    if not lse:
        if q.is_cuda:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(qh, kh, vh).transpose(1, 2)
        return torch.nn.functional.scaled_dot_product_attention(qh, kh, vh).transpose(1, 2)
    if q.is_cuda:
        res = torch.ops.aten._scaled_dot_product_cudnn_attention(qh, kh, vh, None, True)
    else:
        res = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(qh, kh, vh)
    out, l = res[0], res[1]
    return out, l.reshape(out.shape[0], out.shape[1], out.shape[2]).float().contiguous()


def shard_lengths(sp):
    """Every rank's number of tokens (one of the two degrees is 1 here: its pieces or its
    ring shards)."""
    return [b - a for a, b in sp.bounds()]


def dense_ulysses(sp, q, k, v):
    """Dense Ulysses: sequence pieces -> head groups (all_to_all), SDPA, back."""
    lengths = shard_lengths(sp)
    U, g = sp.ulysses_degree, sp._ulysses_group
    q, k, v = psd._seq_to_heads_all((q, k, v), lengths, U, g)
    return psd._heads_to_seq(sdpa(q, k, v), lengths, U, g)


def dense_ring(sp, q, k, v):
    """Dense ring: the K/V shards passed round the ring (the next transfer overlapping the
    current shard's SDPA), partial results merged through their log-sum-exps."""
    lengths = shard_lengths(sp)
    R, me = sp.ring_degree, sp.ring_index
    cap = max(lengths)
    kv = torch.stack([psd._pad_seq(k, cap), psd._pad_seq(v, cap)])
    outs, lses = [], []
    for s in range(R):
        n = lengths[(me - s) % R]
        pending = sp._pass_kv(kv) if s + 1 < R else None
        if n:
            o, l = sdpa(q, kv[0, :, :n], kv[1, :, :n], lse=True)
            outs.append(o.transpose(1, 2).contiguous())
            lses.append(l)
        if pending is not None:
            for req in pending[1]:
                req.wait()
            kv = pending[0]
    return psa.merge_attention(outs, lses, layout="blhd", return_lse=False)


def comm_ulysses(sp, q, k, v, out_in_place):
    """The exchanges of a Ulysses forward: q, k, v there; the output back, from the buffer
    libpsa writes into (out_in_place) or copied into one (SDPA)."""
    lengths = shard_lengths(sp)
    U, g = sp.ulysses_degree, sp._ulysses_group
    heads = psd._seq_to_heads_all((q, k, v), lengths, U, g)
    send = psd._heads_buffer(heads[0], lengths, U) if out_in_place else None
    return psd._heads_to_seq(heads[0], lengths, U, g, send=send)


def comm_ring(sp, k, v, gather_k):
    lengths = shard_lengths(sp)
    if gather_k:
        psd._gather_pieces(k, 1, lengths, sp._ring_group)
    cap = max(lengths)
    kv = torch.stack([psd._pad_seq(k, cap), psd._pad_seq(v, cap)])
    for _ in range(sp.ring_degree - 1):
        incoming, reqs = sp._pass_kv(kv)
        for req in reqs:
            req.wait()
        kv = incoming
    return kv


# ---- measuring -------------------------------------------------------------------------------
def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, warmup, iters):
    """Median over `iters` calls of the slowest rank's time (ms) of one call."""
    for _ in range(warmup):
        fn()
    per_call = []
    for _ in range(iters):
        sync(device)
        dist.barrier()
        sync(device)
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - t0) * 1e3
        per_call.append(ms)
    return statistics.median(over_ranks(per_call, torch.float64, dist.ReduceOp.MAX, device))


def rel_l2(a, b):
    a, b = a.float(), b.float()
    den = float(b.norm())
    return float((a - b).norm()) / den if den else float((a - b).norm())


def over_ranks(values, dtype, op, device):
    """The element-wise all_reduce (op) of a list over the ranks (on the GPU under NCCL)."""
    t = torch.tensor(values, dtype=dtype,
                     device=device if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(t, op=op)
    return t.tolist()


def worst_over_ranks(x, device):
    return over_ranks([x], torch.float64, dist.ReduceOp.MAX, device)[0]


def summed_over_ranks(counts, device):
    return over_ranks(counts, torch.int64, dist.ReduceOp.SUM, device)


class LevelRecorder:
    """Block pairs per level, summed over the libpsa forwards of this process
    (psa_attention_forward on a context: its level map) while installed (a chunked Ulysses
    rank runs one forward per head chunk)."""

    def __init__(self):
        self.last = None
        self._original = psa.capi.psa_attention_forward

    def __enter__(self):
        original = self._original

        def forward(handle, *args):
            result = original(handle, *args)
            levels = level_map(handle)
            counts = [int((levels == lv).sum()) for lv in LEVELS]
            self.last = counts if self.last is None else [
                a + b for a, b in zip(self.last, counts)]
            return result

        psa.capi.psa_attention_forward = forward
        return self

    def __exit__(self, *exc):
        psa.capi.psa_attention_forward = self._original


def counts_of(levels):
    return [int((levels == lv).sum()) for lv in LEVELS]


def fractions(counts):
    total = sum(counts)
    return {str(lv): c / total for lv, c in zip(LEVELS, counts)} if total else {}


def density(counts):
    total = sum(counts)
    return sum(c / lv for lv, c in zip(LEVELS, counts) if lv) / total if total else 0.0


# ---- one shape -------------------------------------------------------------------------------
def bench_shape(key, args, device, dtype, world, rank):
    s = SHAPES[key]
    grid, text = s["grid"], s["text"]
    L = grid[0] * grid[1] * grid[2] + text
    H, D = s["heads"], s["head_dim"]
    cfg = pyramid_config(s["model"])
    text_kw = dict(text_length=text) if text else {}
    gen = torch.Generator(device=device).manual_seed(args.seed)
    q, k, v = (torch.randn(1, L, H, D, generator=gen, device=device, dtype=dtype)
               for _ in range(3))
    log("== %s: %d heads x %d tokens x d%d, %s" % (s["label"], H, L, D, str(dtype)))

    def psa_one():
        return psa.attention(q, k, v, config=cfg, grid=grid, layout="blhd", **text_kw)

    with LevelRecorder() as rec:
        ref = psa_one()
        sync(device)
    ref_counts = rec.last
    dense_ref = sdpa(q, k, v)
    rows = []

    def row(method, mode, ms, comm=None, err=None, counts=None, extra=None):
        r = dict(shape=key, label=s["label"], heads=H, head_dim=D, tokens=L, method=method,
                 mode=mode, ms=ms, comm_ms=comm, rel_l2_vs_one_gpu=err)
        if counts is not None:
            r.update(level_counts=counts, level_fractions=fractions(counts),
                     density=density(counts), levels_equal=counts == ref_counts)
        r.update(extra or {})
        rows.append(r)
        log("   %-5s %-10s %9.3f ms%s%s%s" % (
            method, mode, ms, "" if comm is None else "  comm %.3f ms" % comm,
            "" if err is None else "  rel-L2 vs 1 GPU %.2e" % err,
            "" if counts is None else "  levels %s (%s)" % (
                counts, "equal" if counts == ref_counts else "DIFFER")))
        return r

    t = lambda fn: timed(fn, device, args.warmup, args.iters)  # noqa: E731
    one_psa = row("psa", "1 GPU", t(psa_one), counts=ref_counts)
    one_dense = row("dense", "1 GPU", t(lambda: sdpa(q, k, v)))

    runs = [("ulysses", c) for c in args.chunks] if "ulysses" in args.modes else []
    runs += [("ring", impl) for impl in args.ring_impls] if "ring" in args.modes else []
    for mode, variant in runs:
        first = variant == (args.chunks if mode == "ulysses" else args.ring_impls)[0]
        if mode == "ulysses":
            sp = psd.SequenceParallel(grid=grid, config=cfg, ulysses_degree=world, ring_degree=1,
                                      ulysses_chunks=variant, **text_kw)
        else:
            sp = psd.SequenceParallel(grid=grid, config=cfg, ulysses_degree=1, ring_degree=world,
                                      ring_impl=variant, **text_kw)
        name = "%s %d" % (mode, world)
        if mode == "ulysses" and len(args.chunks) > 1:
            name += ", %d chunk%s" % (variant, "s" if variant != 1 else "")
        if mode == "ring" and len(args.ring_impls) > 1:
            name += ", %s" % variant
        ql, kl, vl = (sp.shard(x, dim=1) for x in (q, k, v))
        ref_l, dense_l = sp.shard(ref, dim=1), sp.shard(dense_ref, dim=1)
        # PSA: check (rows and levels), then time.
        with LevelRecorder() as rec:
            out = sp.attention(ql, kl, vl)
            sync(device)
        p2p = mode == "ring" and sp.ring_impl == "p2p"
        mine = counts_of(sp.last_levels) if p2p else rec.last
        counts = summed_over_ranks(mine, device)
        err = worst_over_ranks(rel_l2(out, ref_l), device)
        ms = t(lambda: sp.attention(ql, kl, vl))
        if mode == "ulysses":
            comm = t(lambda: comm_ulysses(sp, ql, kl, vl, True))
        elif p2p:
            comm = t(lambda: comm_ring(sp, kl, vl, gather_k=True))
        else:
            comm = t(lambda: [psd._gather_pieces(x, 1, shard_lengths(sp), sp._ring_group)
                              for x in (kl, vl)])
        row("psa", name, ms, comm, err, counts,
            dict(efficiency=one_psa["ms"] / (world * ms), ring_impl=sp.ring_impl,
                 ulysses_chunks=sp.last_chunks if mode == "ulysses" else None))
        if not first:
            continue  # dense once per mode (Ulysses: one exchange each way; ring: shards passed)
        name = "%s %d" % (mode, world)
        # Dense (cuDNN SDPA) under the same split.
        dense_fn = (lambda: dense_ulysses(sp, ql, kl, vl)) if mode == "ulysses" else (
            lambda: dense_ring(sp, ql, kl, vl))
        err = worst_over_ranks(rel_l2(dense_fn(), dense_l), device)
        ms = t(dense_fn)
        comm = t(lambda: comm_ulysses(sp, ql, kl, vl, False) if mode == "ulysses"
                 else comm_ring(sp, kl, vl, gather_k=False))
        row("dense", name, ms, comm, err, extra=dict(efficiency=one_dense["ms"] / (world * ms)))
        del sp, ql, kl, vl, ref_l, dense_l, out
    return rows


def init_ranks(device_arg):
    """init_process_group for this torchrun rank: NCCL with one GPU per rank (LOCAL_RANK) and
    bf16 where CUDA is asked for or found ("auto"), else gloo and fp32. Returns (device,
    dtype)."""
    cuda = device_arg == "cuda" or (device_arg == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        device = torch.device("cuda", torch.cuda.current_device())
        dist.init_process_group("nccl", device_id=device)
        return device, torch.bfloat16
    dist.init_process_group("gloo")
    return torch.device("cpu"), torch.float32


def log(msg):
    if dist.get_rank() == 0:
        print(msg, file=sys.stderr, flush=True)


def environment(device, world, commit):
    env = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               world=world, host=platform.node(), torch=torch.__version__,
               libpsa=psa.__version__, backend=dist.get_backend())
    if commit is None:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                                    check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = "unknown"
    env["commit"] = commit
    if device.type == "cuda":
        env.update(gpus=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
                   cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                   nccl=".".join(str(x) for x in torch.cuda.nccl.version()))
        try:
            env["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, check=True).stdout.split()[0]
        except (OSError, subprocess.CalledProcessError, IndexError):
            env["driver"] = "unknown"
    return env


def table(rows, budget):
    out = ["| shape | method | mode | ms | comm ms | speed-up vs 1 GPU | efficiency | density | "
           "rel-L2 vs 1 GPU | levels equal |", "|---" * 10 + "|"]
    one = {(r["shape"], r["method"]): r["ms"] for r in rows if r["mode"] == "1 GPU"}
    for r in rows:
        base = one[(r["shape"], r["method"])]
        par = r["mode"] != "1 GPU"
        out.append("| %s | %s | %s | %.3f | %s | %s | %s | %s | %s | %s |" % (
            r["label"], "PSA pyramid" if r["method"] == "psa" else "dense (cuDNN SDPA)",
            r["mode"], r["ms"], "%.3f" % r["comm_ms"] if r["comm_ms"] is not None else "-",
            "%.2fx" % (base / r["ms"]) if par else "1.00x",
            "%.2f" % r["efficiency"] if par else "-",
            "%.3f" % r["density"] if "density" in r else "1.000",
            "%.2e" % r["rel_l2_vs_one_gpu"] if r["rel_l2_vs_one_gpu"] is not None else "-",
            ("yes" if r["levels_equal"] else "NO") if "levels_equal" in r else "-"))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="wan14,cogvideox",
                    help="comma separated: %s" % ", ".join(SHAPES))
    ap.add_argument("--modes", default="ulysses,ring", help="ulysses, ring or both")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--chunks", default="2",
                    help="ulysses_chunks of the PSA Ulysses rows, comma separated (e.g. 1,2,4)")
    ap.add_argument("--ring-impls", default="p2p,allgather",
                    help="ring_impl of the PSA ring rows, comma separated (p2p, allgather)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=float, default=None,
                    help="largest rel-L2 vs one GPU (default: 1e-2 bf16, 1e-5 fp32)")
    ap.add_argument("--json", default=None, metavar="FILE")
    ap.add_argument("--commit", default=None)
    args = ap.parse_args()
    args.modes = [m for m in args.modes.split(",") if m]
    try:
        args.chunks = [int(c) for c in args.chunks.split(",") if c]
    except ValueError:
        ap.error("--chunks: %r: expected ints >= 1, comma separated" % args.chunks)
    if not args.chunks or min(args.chunks) < 1:
        ap.error("--chunks: %r: expected ints >= 1, comma separated" % args.chunks)
    args.ring_impls = [x for x in args.ring_impls.split(",") if x]
    if not args.ring_impls or any(x not in ("p2p", "allgather") for x in args.ring_impls):
        ap.error("--ring-impls: %r: expected p2p and/or allgather" % ",".join(args.ring_impls))
    shapes = [x for x in args.shapes.split(",") if x]
    for x in shapes:
        if x not in SHAPES:
            ap.error("--shapes: %r is not one of %s" % (x, ", ".join(SHAPES)))
    for m in args.modes:
        if m not in ("ulysses", "ring"):
            ap.error("--modes: %r is not ulysses or ring" % m)

    device, dtype = init_ranks(args.device)
    cuda = device.type == "cuda"
    rank, world = dist.get_rank(), dist.get_world_size()
    budget = args.budget if args.budget is not None else (1e-2 if cuda else 1e-5)
    env = environment(device, world, args.commit)
    rows = []
    for key in shapes:
        rows.extend(bench_shape(key, args, device, dtype, world, rank))
        if device.type == "cuda":
            torch.cuda.empty_cache()
    bad = [r for r in rows if (r["rel_l2_vs_one_gpu"] or 0.0) > budget
           or r.get("levels_equal") is False]
    if rank == 0:
        print("sequence parallel, %d ranks (%s), %s; commit %s" % (
            world, env["backend"], ", ".join(env.get("gpus", ["cpu"])), env["commit"]))
        print(table(rows, budget))
        print("checks: %s (rel-L2 budget %.0e, level counts equal)" % (
            "PASS" if not bad else "FAIL: %d row(s)" % len(bad), budget))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(environment=env, budget=budget, rows=rows), f, indent=1)
    # Every rank tears down together, as in sp_step_bench.py (there a rank that destroyed its
    # group while rank 0 was still writing the report aborted now and then on two CPU ranks).
    dist.barrier()
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
