#!/usr/bin/env python3
# examples/python/sp_xdit_torchrun.py -- PSA inside xDiT (the xfuser package): xfuser sets up
# its sequence-parallel groups (ulysses_degree x ring_degree), builds its Wan transformer
# (xFuserWanTransformer3DWrapper: a small random one from a config, no download; or
# --pretrained DIR) and psa.xdit.enable_psa runs its self-attention through libpsa under
# those degrees. Every rank compares its output with a plain diffusers WanTransformer3DModel
# of the same weights under psa.diffusers on one process; rank 0 prints the error and the
# times. With --cfg 2 (xDiT's CFG parallelism) the one-process reference is the whole
# [uncond, cond] batch of 2 and each CFG rank runs its half (CFG rank 0 uncond, 1 cond), as
# xDiT's pipelines do. Needs `pip install libpsa[xdit]` (xfuser 0.7.0, yunchang 0.6.4).
#
#   torchrun --nproc-per-node 2 examples/python/sp_xdit_torchrun.py --ulysses 2
#   torchrun --nproc-per-node 2 examples/python/sp_xdit_torchrun.py --ring 2
#   torchrun --nproc-per-node 4 examples/python/sp_xdit_torchrun.py --ulysses 2 --ring 2
#   torchrun --nproc-per-node 2 examples/python/sp_xdit_torchrun.py --cfg 2
#   torchrun --nproc-per-node 4 examples/python/sp_xdit_torchrun.py --cfg 2 --ulysses 2
#
# --cfg 2: xDiT's CFG parallelism (use_cfg_parallel). The step's [uncond, cond] batch (one
# latent, two text contexts) is split over the two CFG ranks, uncond on CFG rank 0; each
# rank's output is compared with its half of the one-process forward of the whole batch.
#
# NCCL and bf16 on GPUs (one GPU per rank, LOCAL_RANK), gloo and fp32 on CPUs (--device cpu).
"""PSA in xDiT's sequence parallelism under torchrun, checked against one process."""

import argparse
import importlib
import os
import time
import types

import torch


def cpu_xfuser():
    """xfuser 0.7 takes the device from torch's build (torch.version.cuda), not from the
    hardware, and turns sequence parallelism on only with a GPU. On a CPU-only machine this
    tells it there is no CUDA and lets it build its Ulysses / ring groups over gloo."""
    import xfuser.envs as envs

    envs._is_cuda = lambda: False
    envs.PACKAGES_CHECKER.packages_info["has_long_ctx_attn"] = True
    for name in ("xfuser.config.config", "xfuser.core.distributed.parallel_state",
                 "xfuser.core.distributed.group_coordinator",
                 "xfuser.model_executor.layers.attention_processor",
                 "xfuser.model_executor.models.transformers.transformer_wan"):
        importlib.import_module(name).HAS_LONG_CTX_ATTN = True
    # xfuser refuses SDPA (the one CPU backend) with ring_degree > 1 because its own ring
    # merges LSEs; under psa.xdit libpsa runs self-attention and xfuser's ring never runs
    from xfuser.core.distributed import runtime_state

    runtime_state.RuntimeState._check_if_backend_compatible_with_current_configuration = (
        lambda self, backend: None)


CONFIG = dict(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=64,
              in_channels=16, out_channels=16, text_dim=64, freq_dim=64, ffn_dim=256,
              num_layers=2, rope_max_seq_len=256)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ulysses", type=int, default=None,
                    help="ulysses degree (default: ranks / (ring x cfg))")
    ap.add_argument("--ring", type=int, default=1, help="ring degree")
    ap.add_argument("--cfg", type=int, choices=(1, 2), default=1,
                    help="CFG degree (2: uncond and cond on different ranks)")
    ap.add_argument("--pretrained", default=None, help="a diffusers Wan model directory")
    ap.add_argument("--model", default="Wan2.1_1.3b", help="libpsa model of the presets")
    ap.add_argument("--preset", default=None)
    ap.add_argument("--latent", default="4,32,32", help="latent frames,height,width")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    args = ap.parse_args()

    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if not cuda:
        cpu_xfuser()
    from diffusers import WanTransformer3DModel
    from xfuser.config import xFuserArgs
    from xfuser.core.distributed import (init_distributed_environment,
                                         initialize_model_parallel, initialize_runtime_state)
    from xfuser.model_executor.models.transformers.transformer_wan import (
        xFuserWanTransformer3DWrapper)

    import psa.diffusers
    import psa.xdit

    world = int(os.environ["WORLD_SIZE"])
    ring, cfg = args.ring, args.cfg
    ulysses = args.ulysses or world // (ring * cfg)
    if ring < 1 or ulysses < 1 or ulysses * ring * cfg != world:
        raise SystemExit("ulysses %d x ring %d x cfg %d must equal the %d ranks of torchrun"
                         % (ulysses, ring, cfg, world))
    backend = "nccl" if cuda else "gloo"
    init_distributed_environment(world_size=world, rank=int(os.environ["RANK"]),
                                 backend=backend)
    initialize_model_parallel(classifier_free_guidance_degree=cfg,
                              sequence_parallel_degree=ulysses * ring, ulysses_degree=ulysses,
                              ring_degree=ring, backend=backend)
    attention = {} if cuda else dict(attention_backend="SDPA", cross_attention_backend="SDPA")
    engine_config, _ = xFuserArgs(model=args.pretrained or "random-wan", ulysses_degree=ulysses,
                                  ring_degree=ring, use_cfg_parallel=cfg == 2,
                                  **attention).create_config()
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)  # the same weights on every rank
    if args.pretrained:
        model = xFuserWanTransformer3DWrapper.from_pretrained(args.pretrained,
                                                              subfolder="transformer")
        plain = WanTransformer3DModel.from_pretrained(args.pretrained, subfolder="transformer")
    else:
        model = xFuserWanTransformer3DWrapper(**CONFIG)
        plain = WanTransformer3DModel(**CONFIG)
        plain.load_state_dict(model.state_dict())
    model, plain = (m.eval().to(device, dtype) for m in (model, plain))
    initialize_runtime_state(types.SimpleNamespace(transformer=model), engine_config)

    frames, height, width = (int(x) for x in args.latent.split(","))
    g = torch.Generator().manual_seed(1)  # the same inputs on every rank
    batch = cfg  # --cfg 2: [uncond, cond], one latent with two text contexts
    latent = torch.randn(1, model.config.in_channels, frames, height, width, generator=g)
    whole = dict(hidden_states=latent.expand(batch, -1, -1, -1, -1).to(device, dtype),
                 timestep=torch.full((batch,), 700.0, device=device),
                 encoder_hidden_states=torch.randn(batch, 32, model.config.text_dim,
                                                   generator=g).to(device, dtype),
                 return_dict=False)
    cfg_rank = psa.xdit.cfg_degree()[1]  # this rank's item: xDiT's pipelines split the batch
    kw = {k: (v[cfg_rank:cfg_rank + 1] if isinstance(v, torch.Tensor) else v)
          for k, v in whole.items()}
    common = dict(model=args.model, preset=args.preset, warmup_steps=0, step_source="manual")
    with torch.no_grad():
        psa.diffusers.enable_psa(plain, **common)
        ref = plain(**whole)[0][cfg_rank:cfg_rank + 1]  # one process, whole batch
        psa.xdit.enable_psa(model, **common)      # xDiT's degrees and groups
        out = model(**kw)[0]                      # warm: plans, agreement check
        if cuda:
            torch.cuda.synchronize()
        torch.distributed.barrier()
        t0 = time.perf_counter()
        out = model(**kw)[0]
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        psa.xdit.disable_psa(model)
    err = float((out.float() - ref.float()).norm() / ref.float().norm())
    errs = torch.tensor([err], device=device)
    torch.distributed.all_reduce(errs, op=torch.distributed.ReduceOp.MAX)
    ok = float(errs) <= (1e-5 if dtype == torch.float32 else 2e-2)
    if torch.distributed.get_rank() == 0:
        print("xDiT Wan transformer with psa.xdit: %d ranks (cfg %d x ulysses %d x ring %d), "
              "latent %s, %s: %.1f ms per forward; rel L2 vs one process %.3g"
              % (world, cfg, ulysses, ring, args.latent,
                 "cuda/nccl bf16" if cuda else "cpu/gloo fp32", seconds * 1e3, float(errs)))
        print("PASS" if ok else "FAIL")
    torch.distributed.destroy_process_group()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
