# bindings/python/tests/dist_diffusers_worker.py -- one rank of
# test_distributed_diffusers.py: joins a gloo process group (file:// rendezvous), builds the
# same tiny diffusers WanTransformer3DModel on every rank, runs it with PSA on one process
# (psa.diffusers.enable_psa) and sequence-parallel (psa.distributed.enable_sequence_parallel)
# and records the outputs' difference and every libpsa forward's level counts (from its
# level map) for both; writes {case: result} as JSON to <outdir>/rank<r>.json.
# Usage: python dist_diffusers_worker.py RANK WORLD INIT_FILE OUTDIR
"""Worker process of the psa.distributed diffusers tests (not a test module)."""

import datetime
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.distributed as dist
from diffusers import CogVideoXTransformer3DModel, WanTransformer3DModel
from diffusers.models.embeddings import get_3d_rotary_pos_embed

import psa
import psa.diffusers as psa_diffusers
import psa.distributed as psd
from psa._mask import level_map

# name: (world, parallel arguments, latent (frames, height, width), dtype, per-token timestep)
# ("i2v" in the name: an I2V transformer, image context in the cross-attention)
CASES = {
    "wan_ulysses2": (2, dict(ulysses_degree=2), (4, 32, 32), torch.float32, False),
    "wan_ring2_uneven": (2, dict(ring_degree=2), (3, 32, 40), torch.float32, False),
    "wan_ulysses2_token_timestep": (2, dict(ulysses_degree=2), (4, 32, 32), torch.float32,
                                    True),
    "wan_ulysses2_bf16": (2, dict(ulysses_degree=2, ulysses_chunks=2), (4, 32, 32),
                          torch.bfloat16, False),
    "wan_i2v_ring2": (2, dict(ring_degree=2), (4, 32, 32), torch.float32, False),
    # CogVideoX: 226 text tokens first, RoPE; psa_balanced keeps the model order (text
    # first), "gilbert": use_rearrange on (the Gilbert order moves the text last)
    "cog_ulysses2": (2, dict(ulysses_degree=2), (3, 32, 32), torch.float32, False),
    "cog_ring2": (2, dict(ring_degree=2), (3, 32, 32), torch.float32, False),
    "cog_ring2_gilbert": (2, dict(ring_degree=2, ring_impl="p2p"), (3, 32, 32), torch.float32,
                          False),
    # 4 ranks: USP 2 x 2 (Wan and CogVideoX), ring 4 (Wan)
    "wan_usp2x2": (4, dict(ulysses_degree=2, ring_degree=2), (4, 32, 32), torch.float32,
                   False),
    "wan_ring4": (4, dict(ring_degree=4, ring_impl="p2p"), (4, 32, 32), torch.float32, False),
    "cog_usp2x2_gilbert": (4, dict(ulysses_degree=2, ring_degree=2), (3, 32, 32), torch.float32,
                   False),
}
COG_TEXT = 226  # CogVideoX-5B's text tokens
TIMESTEPS = (900.0, 700.0)  # warm-up 1: the first forward runs dense, the second sparse
LEVELS = (1, 2, 4, 8, 0)
CALLS = []  # per libpsa forward: counts of block pairs per level (LEVELS order)


def record_levels():
    """Counts the levels of every forward: psa_attention_forward, and the level map of the
    PSA p2p ring (psa_compute_level_map, which counts as the forward of its context)."""
    def recording(original):
        def forward(handle, *args):
            result = original(handle, *args)
            levels = np.asarray(level_map(handle)).ravel()
            CALLS.append([int((levels == lv).sum()) for lv in LEVELS])
            return result
        return forward

    psa.capi.psa_attention_forward = recording(psa.capi.psa_attention_forward)
    psa.capi.psa_compute_level_map = recording(psa.capi.psa_compute_level_map)


def build(dtype, i2v):
    torch.manual_seed(1234)
    extra = dict(image_dim=16, added_kv_proj_dim=128) if i2v else {}
    model = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=4,
                                  attention_head_dim=32, in_channels=4, out_channels=4,
                                  text_dim=32, freq_dim=32, ffn_dim=64, num_layers=2,
                                  rope_max_seq_len=64, **extra).eval()
    return model.to(dtype)


def build_cog(dtype):
    torch.manual_seed(4321)
    model = CogVideoXTransformer3DModel(
        num_attention_heads=4, attention_head_dim=32, in_channels=4, out_channels=4,
        time_embed_dim=32, text_embed_dim=32, num_layers=2, sample_width=32, sample_height=32,
        sample_frames=9, patch_size=2, max_text_seq_length=COG_TEXT,
        use_rotary_positional_embeddings=True).eval()
    return model.to(dtype)


def cog_inputs(shape, dtype, t, head_dim=32, p=2):
    """CogVideoX's forward arguments: latent [B, F, C, H, W], 226 text tokens, the RoPE
    tables the pipeline computes (diffusers' get_3d_rotary_pos_embed)."""
    g = torch.Generator().manual_seed(77)
    frames, height, width = shape
    rope = get_3d_rotary_pos_embed(embed_dim=head_dim, crops_coords=((0, 0), (height // p,
                                                                             width // p)),
                                   grid_size=(height // p, width // p), temporal_size=frames)
    return dict(hidden_states=torch.randn(1, frames, 4, height, width, generator=g).to(dtype),
                encoder_hidden_states=torch.randn(1, COG_TEXT, 32, generator=g).to(dtype),
                timestep=torch.full((1,), t), image_rotary_emb=rope, return_dict=False)


def inputs(shape, dtype, token_timestep, t, i2v, p=(1, 2, 2)):
    g = torch.Generator().manual_seed(99)
    frames, height, width = shape
    tokens = (frames // p[0]) * (height // p[1]) * (width // p[2])
    timestep = (torch.full((1, tokens), t) - torch.arange(tokens) % 7 if token_timestep
                else torch.full((1,), t))
    # fp32 draws, cast (bf16 case: the inputs are the bf16 roundings of the fp32 ones)
    kw = dict(hidden_states=torch.randn(1, 4, frames, height, width, generator=g).to(dtype),
              timestep=timestep,
              encoder_hidden_states=torch.randn(1, 512 if i2v else 8, 32,
                                                generator=g).to(dtype),
              return_dict=False)
    if i2v:
        kw["encoder_hidden_states_image"] = torch.randn(1, 5, 16, generator=g).to(dtype)
    return kw


def run(model, shape, dtype, token_timestep, i2v):
    outs, first = [], len(CALLS)
    cog = isinstance(model, CogVideoXTransformer3DModel)
    with torch.no_grad():
        for t in TIMESTEPS:
            kw = (cog_inputs(shape, dtype, t) if cog else
                  inputs(shape, dtype, token_timestep, t, i2v))
            outs.append(model(**kw)[0].float())
    return outs, CALLS[first:]


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def run_case(name):
    _, parallel, shape, dtype, token_timestep = CASES[name]
    i2v = "i2v" in name
    cog = name.startswith("cog")
    model = build_cog(dtype) if cog else build(dtype, i2v)
    preset = (dict(model="CogVideo_5b", preset="psa_balanced") if cog else
              dict(model="Wan2.1_1.3b", preset="psa_topk"))
    if "gilbert" in name:
        preset["use_rearrange"] = True
    psa_diffusers.enable_psa(model, warmup_steps=1, **preset)
    ref, ref_calls = run(model, shape, dtype, token_timestep, i2v)
    psa_diffusers.disable_psa(model)
    psd.enable_sequence_parallel(model, warmup_steps=1, timeout=30, **preset, **parallel)
    t0 = time.time()
    out, calls = run(model, shape, dtype, token_timestep, i2v)
    seconds = time.time() - t0
    st = psa_diffusers.stats(model)[0]
    psa_diffusers.disable_psa(model)
    return {"rel_l2": [rel_l2(o, r) for o, r in zip(out, ref)],
            "exact": all(bool(torch.equal(o, r)) for o, r in zip(out, ref)),
            "ref_calls": ref_calls, "calls": calls, "parallel_seconds": seconds,
            "dense_calls": st["dense_calls"], "sparse_calls": st["sparse_calls"]}


def main():
    rank, world, init_file, outdir = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                      sys.argv[4])
    only = set(sys.argv[5].split(",")) if len(sys.argv) > 5 else None
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    record_levels()
    results = {}
    for name, (w, _, _, _, _) in CASES.items():
        if w != world or (only is not None and name not in only):
            continue
        t0 = time.time()
        try:
            result = run_case(name)
        except Exception as e:  # recorded; the test reports it
            result = {"error": "%s: %s" % (type(e).__name__, e),
                      "traceback": traceback.format_exc()}
        result["seconds"] = time.time() - t0
        results[name] = result
        with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
            json.dump(results, f)  # before the barrier: a hang still leaves the results
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=120))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
