# bindings/python/tests/dist_xdit_worker.py -- one rank of test_xdit.py: sets up xfuser's
# parallel groups over gloo (xfuser's init_distributed_environment, initialize_model_parallel,
# xFuserArgs.create_config, initialize_runtime_state) with ULYSSES x RING ranks, builds a
# tiny xfuser Wan transformer (xFuserWanTransformer3DWrapper) and the same weights as a plain
# diffusers WanTransformer3DModel, runs the plain one with psa.diffusers on this process
# and xfuser's with psa.xdit.enable_psa, and records the outputs' difference; writes
# {case: result} as JSON to <outdir>/rank<r>.json.
# Usage: python dist_xdit_worker.py RANK WORLD INIT_FILE OUTDIR ULYSSES RING [CFG]
"""Worker process of the psa.xdit tests (not a test module)."""

import importlib
import json
import os
import sys
import traceback
import types

import torch


def cpu_xfuser():
    """xfuser 0.7 takes the device from torch's build (torch.version.cuda, not the
    hardware) and turns sequence parallelism on only when a GPU is present (its yunchang
    check). On a CPU-only machine: tell it there is no CUDA and let it build its Ulysses /
    ring groups over gloo (yunchang's group setup is plain torch.distributed)."""
    import xfuser.envs as envs

    if torch.cuda.is_available():
        return
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


CONFIG = dict(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=32, in_channels=4,
              out_channels=4, text_dim=32, freq_dim=32, ffn_dim=64, num_layers=2,
              rope_max_seq_len=64)
# name: (latent frames/height/width, per-token timestep)
CASES = {"wan_psa_topk": ((4, 32, 32), False), "wan_uneven_token_timestep": ((3, 32, 40), True)}
# CFG degree 2: each CFG rank's half ("split"), the whole batch on every rank ("whole"), and
# a batch of 1 under "whole" and CFG ranks with different latents (errors on every rank)
CFG_CASES = {"cfg_split_psa_topk": ((4, 32, 32), False),
             "cfg_split_token_timestep": ((3, 32, 40), True),
             "cfg_whole_psa_topk": ((4, 32, 32), False),
             "cfg_whole_odd_batch": ((4, 32, 32), False),
             "cfg_split_shape_mismatch": ((4, 32, 32), False)}
TIMESTEPS = (900.0, 700.0)  # warm-up 1: a dense forward, then a sparse one


def inputs(shape, token_timestep, t, batch=1):
    """One latent; batch 2: [uncond, cond], the same latent and timestep with two text
    contexts (what a CFG step feeds the transformer)."""
    g = torch.Generator().manual_seed(99)
    frames, height, width = shape
    tokens = frames * (height // 2) * (width // 2)
    timestep = (torch.full((1, tokens), t) - torch.arange(tokens) % 7 if token_timestep
                else torch.full((1,), t))
    latent = torch.randn(1, 4, frames, height, width, generator=g)
    return dict(hidden_states=latent.expand(batch, -1, -1, -1, -1).contiguous(),
                timestep=timestep.expand(batch, *timestep.shape[1:]).contiguous(),
                encoder_hidden_states=torch.randn(batch, 8, 32, generator=g),
                return_dict=False)


def half(kw, rank):
    """CFG rank `rank`'s half of a batch-of-2 input (xDiT's pipelines: uncond on rank 0)."""
    return {k: (v[rank:rank + 1] if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}


def rel_l2(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def main():
    rank, world, init_file, outdir = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                      sys.argv[4])
    U, R = int(sys.argv[5]), int(sys.argv[6])
    CFG = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    torch.set_num_threads(1)
    cpu_xfuser()
    from diffusers import WanTransformer3DModel
    from xfuser.config import xFuserArgs
    from xfuser.core.distributed import (init_distributed_environment,
                                         initialize_model_parallel, initialize_runtime_state)
    from xfuser.model_executor.models.transformers.transformer_wan import (
        xFuserWanTransformer3DWrapper)

    import psa.diffusers as psa_diffusers
    import psa.xdit

    init_distributed_environment(world_size=world, rank=rank,
                                 distributed_init_method="file://" + init_file, backend="gloo")
    initialize_model_parallel(classifier_free_guidance_degree=CFG,
                              sequence_parallel_degree=U * R, ulysses_degree=U, ring_degree=R,
                              backend="gloo")
    engine_config, _ = xFuserArgs(model="tiny-wan", ulysses_degree=U, ring_degree=R,
                                  use_cfg_parallel=CFG == 2, attention_backend="SDPA",
                                  cross_attention_backend="SDPA").create_config()
    torch.manual_seed(1234)
    xdit_model = xFuserWanTransformer3DWrapper(**CONFIG).eval()
    plain = WanTransformer3DModel(**CONFIG).eval()
    plain.load_state_dict(xdit_model.state_dict())
    initialize_runtime_state(types.SimpleNamespace(transformer=xdit_model), engine_config)
    cfg_degree, cfg_rank, _ = psa.xdit.cfg_degree()
    results = {"degrees": list(psa.xdit.parallel_degrees()[:2]) + [cfg_degree],
               "cfg_rank": cfg_rank}
    preset = dict(model="Wan2.1_1.3b", preset="psa_topk", warmup_steps=1)
    cases = CASES if CFG == 1 else CFG_CASES
    for name, (shape, token_timestep) in cases.items():
        mode = "whole" if name.startswith("cfg_whole") else "split"
        try:
            psa_diffusers.enable_psa(plain, **preset)
            psa.xdit.enable_psa(xdit_model, timeout=30, cfg_batch=mode, **preset)
            errors = []
            with torch.no_grad():
                for t in TIMESTEPS:
                    if CFG == 1:
                        ref = plain(**inputs(shape, token_timestep, t))[0]
                        out = xdit_model(**inputs(shape, token_timestep, t))[0]
                    elif name == "cfg_split_shape_mismatch":  # CFG rank 1: another latent
                        wrong = (4, 32, 32 + 8 * cfg_rank)
                        out = xdit_model(**inputs(wrong, token_timestep, t))[0]
                        raise AssertionError("CFG ranks with different shapes ran")
                    elif name == "cfg_whole_odd_batch":  # must raise on every rank
                        out = xdit_model(**inputs(shape, token_timestep, t))[0]
                        raise AssertionError("batch 1 under cfg_batch='whole' ran")
                    else:  # the single-process forward of the whole [uncond, cond] batch
                        whole = inputs(shape, token_timestep, t, batch=2)
                        ref = plain(**whole)[0]
                        if mode == "split":
                            ref = ref[cfg_rank:cfg_rank + 1]
                            out = xdit_model(**half(whole, cfg_rank))[0]
                        else:
                            out = xdit_model(**whole)[0]
                        # the halves differ: the batch offset matters for the check
                        assert ref.shape == out.shape, (ref.shape, out.shape)
                    errors.append(rel_l2(out, ref))
            st = psa_diffusers.stats(xdit_model)[0]
            psa.xdit.disable_psa(xdit_model)
            psa_diffusers.disable_psa(plain)
            restored = ("_chunk_and_pad_sequence" not in xdit_model.__dict__
                        and type(xdit_model.blocks[0].attn1.processor).__name__
                        == "xFuserWanAttnProcessor")
            result = {"rel_l2": errors, "dense_calls": st["dense_calls"],
                      "sparse_calls": st["sparse_calls"], "restored": restored}
        except Exception as e:  # recorded; the test reports it
            psa.xdit.disable_psa(xdit_model)
            psa_diffusers.disable_psa(plain)
            result = {"error": "%s: %s" % (type(e).__name__, e),
                      "traceback": traceback.format_exc()}
        results[name] = result
    # xfuser's CogVideoX (its pipeline cuts the latent by height): refused with a pointer
    try:
        from diffusers import CogVideoXTransformer3DModel
        from xfuser.model_executor.models.transformers.cogvideox_transformer_3d import (
            xFuserCogVideoXTransformer3DWrapper)

        cog = CogVideoXTransformer3DModel(num_attention_heads=2, attention_head_dim=16,
                                          in_channels=4, out_channels=4, num_layers=1,
                                          text_embed_dim=32, time_embed_dim=32)
        psa.xdit.enable_psa(xFuserCogVideoXTransformer3DWrapper(cog), model="CogVideo_5b")
        results["cogvideox"] = "accepted"
    except Exception as e:
        results["cogvideox"] = "%s: %s" % (type(e).__name__, e)
    with open(os.path.join(outdir, "rank%d.json" % rank), "w") as f:
        json.dump(results, f)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
