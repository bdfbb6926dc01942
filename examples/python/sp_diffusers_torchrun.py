#!/usr/bin/env python3
# examples/python/sp_diffusers_torchrun.py -- a diffusers transformer (Wan or CogVideoX) with
# PSA self-attention run sequence-parallel by psa.distributed.enable_sequence_parallel,
# launched with torchrun: every rank builds the same transformer (a small random one from a
# config, no download; or --pretrained DIR), runs it on the same inputs on one process
# (psa.diffusers.enable_psa) and sequence-parallel, optionally under torch.compile, and
# checks that the outputs agree; rank 0 prints the error and the times.
#
#   torchrun --nproc-per-node 2 examples/python/sp_diffusers_torchrun.py --model wan --ulysses 2
#   torchrun --nproc-per-node 2 examples/python/sp_diffusers_torchrun.py --model cogvideox --ring 2
#   torchrun --nproc-per-node 4 examples/python/sp_diffusers_torchrun.py --ulysses 2 --ring 2 --compile
#
# NCCL and bf16 on GPUs (one GPU per rank, LOCAL_RANK), gloo and fp32 on CPUs (--device cpu).
"""Sequence-parallel PSA inside a diffusers transformer under torchrun."""

import argparse
import os
import time

import torch
import torch.distributed as dist
from diffusers import CogVideoXTransformer3DModel, WanTransformer3DModel
from diffusers.models.embeddings import get_3d_rotary_pos_embed

import psa.diffusers
import psa.distributed as psd


def build(kind, pretrained, heads):
    if pretrained:
        cls = WanTransformer3DModel if kind == "wan" else CogVideoXTransformer3DModel
        return cls.from_pretrained(pretrained, subfolder="transformer")
    torch.manual_seed(0)  # the same weights on every rank
    if kind == "wan":
        return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=heads,
                                     attention_head_dim=64, in_channels=16, out_channels=16,
                                     text_dim=64, freq_dim=64, ffn_dim=256, num_layers=2,
                                     rope_max_seq_len=256)
    return CogVideoXTransformer3DModel(num_attention_heads=heads, attention_head_dim=64,
                                       in_channels=16, out_channels=16, time_embed_dim=64,
                                       text_embed_dim=64, num_layers=2, sample_width=64,
                                       sample_height=64, sample_frames=49, patch_size=2,
                                       max_text_seq_length=226,
                                       use_rotary_positional_embeddings=True)


def inputs(kind, model, frames, height, width, device, dtype):
    g = torch.Generator().manual_seed(1)  # the same inputs on every rank
    cfg = model.config
    if kind == "wan":
        return dict(hidden_states=torch.randn(1, cfg.in_channels, frames, height, width,
                                              generator=g),
                    timestep=torch.tensor([700.0]),
                    encoder_hidden_states=torch.randn(1, 32, cfg.text_dim, generator=g))
    p = cfg.patch_size
    rope = get_3d_rotary_pos_embed(embed_dim=cfg.attention_head_dim,
                                   crops_coords=((0, 0), (height // p, width // p)),
                                   grid_size=(height // p, width // p), temporal_size=frames)
    return dict(hidden_states=torch.randn(1, frames, cfg.in_channels, height, width,
                                          generator=g),
                encoder_hidden_states=torch.randn(1, 226, cfg.text_embed_dim, generator=g),
                timestep=torch.tensor([700.0]), image_rotary_emb=rope)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", choices=("wan", "cogvideox"), default="wan")
    ap.add_argument("--pretrained", default=None, help="a diffusers model directory")
    ap.add_argument("--ulysses", type=int, default=None, help="ulysses degree (default: ranks / ring)")
    ap.add_argument("--ring", type=int, default=1, help="ring degree")
    ap.add_argument("--preset", default=None, help="libpsa preset (default: the model's)")
    ap.add_argument("--latent", default="4,32,32", help="latent frames,height,width")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--compile", action="store_true", help="torch.compile the transformer")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    args = ap.parse_args()

    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda") if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    model = build(args.model, args.pretrained, args.heads).eval().to(device, dtype)
    frames, height, width = (int(x) for x in args.latent.split(","))
    kw = inputs(args.model, model, frames, height, width, device, dtype)
    kw = {k: (tuple(x.to(device) for x in v) if isinstance(v, tuple) else
              v.to(device) if k == "timestep" else v.to(device, dtype))
          for k, v in kw.items()}
    common = dict(preset=args.preset, warmup_steps=0, step_source="manual")
    if args.model == "cogvideox":
        common["model"] = "CogVideo_5b"

    with torch.no_grad():
        psa.diffusers.enable_psa(model, **common)           # one process
        ref = model(**kw, return_dict=False)[0]
        psa.diffusers.disable_psa(model)
        psd.enable_sequence_parallel(model, ulysses_degree=args.ulysses, ring_degree=args.ring,
                                     **common)              # every rank
        out = model(**kw, return_dict=False)[0]             # warm: plans, agreement check
        # compiled after one eager forward: that forward builds the latent grid's
        # SequenceParallel (process groups); traced, attention and gathers are custom ops
        run = torch.compile(model, fullgraph=True) if args.compile else model
        out = run(**kw, return_dict=False)[0]               # warm: compile
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        out = run(**kw, return_dict=False)[0]
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        psa.diffusers.disable_psa(model)
    err = float((out.float() - ref.float()).norm() / ref.float().norm())
    errs = torch.tensor([err], device=device)
    dist.all_reduce(errs, op=dist.ReduceOp.MAX)
    ok = float(errs) <= (1e-5 if dtype == torch.float32 else 2e-2)
    if rank == 0:
        print("%s transformer, %d ranks (ulysses %s x ring %d)%s, latent %s, %s: %.1f ms per "
              "forward; rel L2 vs one process %.3g" % (
                  args.model, dist.get_world_size(), args.ulysses or
                  dist.get_world_size() // args.ring, args.ring,
                  ", compiled" if args.compile else "", args.latent,
                  "cuda/nccl bf16" if cuda else "cpu/gloo fp32", seconds * 1e3, float(errs)))
        print("PASS" if ok else "FAIL")
    dist.destroy_process_group()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
