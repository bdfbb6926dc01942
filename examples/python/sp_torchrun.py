#!/usr/bin/env python3
# examples/python/sp_torchrun.py -- sequence-parallel PSA with psa.distributed, launched with
# torchrun: every rank builds the same q, k, v, shards them (Gilbert order, whole query
# blocks), runs Ulysses / ring / USP attention, gathers the output and compares it with the
# single-process psa.attention; rank 0 prints the error and the times.
#
#   torchrun --nproc-per-node 2 examples/python/sp_torchrun.py --ulysses 2
#   torchrun --nproc-per-node 2 examples/python/sp_torchrun.py --ring 2
#   torchrun --nproc-per-node 4 examples/python/sp_torchrun.py --ulysses 2 --ring 2
#   torchrun --nproc-per-node 2 examples/python/sp_torchrun.py --ulysses 2 --compile
#
# NCCL and bf16 on GPUs (one GPU per rank, LOCAL_RANK), gloo and fp32 on CPUs (--device cpu).
"""Sequence-parallel Pyramid Sparse Attention under torchrun, checked against one process."""

import argparse
import os
import time

import torch
import torch.distributed as dist

import psa
import psa.distributed as psd


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ulysses", type=int, default=None, help="ulysses degree (default: ranks / ring)")
    ap.add_argument("--ring", type=int, default=1, help="ring degree")
    ap.add_argument("--model", default="Wan2.1_1.3b")
    ap.add_argument("--preset", default=None)
    ap.add_argument("--grid", default="21,30,52", help="t,h,w latent grid (Wan 480p: 21,30,52)")
    ap.add_argument("--text", type=int, default=0, help="text tokens (CogVideoX: 226)")
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--ring-impl", choices=("auto", "p2p", "allgather"), default="auto",
                    help="ring: K/V shards passed (p2p) or K/V all-gathered (allgather)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--no-check", action="store_true", help="skip the single-process reference")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile(fullgraph=True) the sharded attention call")
    args = ap.parse_args()

    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda") if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    grid = tuple(int(x) for x in args.grid.split(","))
    L = grid[0] * grid[1] * grid[2] + args.text
    text = dict(text_length=args.text) if args.text else {}
    model = dict(model=args.model, preset=args.preset)

    gen = torch.Generator().manual_seed(0)  # the same tensors on every rank
    q, k, v = (torch.randn(1, L, args.heads, args.head_dim, generator=gen).to(device, dtype)
               for _ in range(3))
    sp = psd.SequenceParallel(grid=grid, ulysses_degree=args.ulysses, ring_degree=args.ring,
                              ring_impl=args.ring_impl,
                              **text, **model)
    ql, kl, vl = (sp.shard(x, dim=1) for x in (q, k, v))

    def sync():
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()

    attention = sp.attention
    if args.compile:  # one custom op node (psa::sp_attention), no graph break
        attention = torch.compile(lambda a, b, c: sp.attention(a, b, c), fullgraph=True)
    out_local = attention(ql, kl, vl)  # warm: plans, agreement check, compile
    sync()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        out_local = attention(ql, kl, vl)
    sync()
    t_sp = (time.perf_counter() - t0) / args.iters * 1e3
    out = sp.gather(out_local, dim=1)

    msg = "psa.distributed %s: %d ranks (ulysses %d x ring %d)%s, L = %d, H = %d, D = %d, %s" % (
        args.model, world, sp.ulysses_degree, sp.ring_degree,
        ", compiled" if args.compile else "", L, args.heads, args.head_dim,
        "cuda/nccl bf16" if cuda else "cpu/gloo fp32")
    line = "sequence parallel: %.2f ms per attention" % t_sp
    if not args.no_check:
        ref = psa.attention(q, k, v, grid=grid, layout="blhd", **text, **model)  # warm
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            ref = psa.attention(q, k, v, grid=grid, layout="blhd", **text, **model)
        if cuda:
            torch.cuda.synchronize()
        t_one = (time.perf_counter() - t0) / args.iters * 1e3
        err = float((out.float() - ref.float()).norm() / ref.float().norm())
        exact = bool(torch.equal(out, ref))
        line += "; one process: %.2f ms (speed-up %.2fx); rel L2 vs one process %.3g%s" % (
            t_one, t_one / t_sp, err, " (bit-identical)" if exact else "")
        errs = torch.tensor([err], device=device)
        dist.all_reduce(errs, op=dist.ReduceOp.MAX)
        ok = float(errs) <= (1e-5 if dtype == torch.float32 else 2e-2)
    else:
        ok = True
    if rank == 0:
        print(msg)
        print(line)
        print("PASS" if ok else "FAIL")
    dist.destroy_process_group()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
