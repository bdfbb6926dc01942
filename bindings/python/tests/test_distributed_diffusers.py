# bindings/python/tests/test_distributed_diffusers.py -- enable_sequence_parallel on tiny
# real diffusers WanTransformer3DModel and CogVideoXTransformer3DModel, CPU, gloo, 2 and 4
# processes (dist_diffusers_worker.py): Wan with Ulysses 2 and ring 2 (uneven shards), a
# per-token timestep (Wan2.2 TI2V style), an I2V transformer (image context), a bf16 model
# fed the bf16 roundings of fp32 inputs, USP 2 x 2 and ring 4; CogVideoX (226 text tokens
# first, RoPE) with Ulysses 2, ring 2 in model order and in Gilbert order (text last), and
# USP 2 x 2 in Gilbert order (one rank holds text tokens only). Every
# rank's output (a dense warm-up forward, then a sparse psa_topk forward) equals the
# single-process PSA transformer (fp32: <= 1e-5 relative L2; bf16: within bf16 rounding),
# and the level counts of every libpsa forward, summed over the ranks, equal the
# single-process ones. Skips per test without torch (gloo) or diffusers.
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dist_launch import gloo_available, run_ranks  # noqa: E402


needs_stack = pytest.mark.skipif(not gloo_available("diffusers", "psa.diffusers"),
                                 reason="needs torch with gloo and diffusers")
CASES = {2: ["wan_ulysses2", "wan_ring2_uneven", "wan_ulysses2_token_timestep",
             "wan_ulysses2_bf16", "wan_i2v_ring2", "cog_ulysses2", "cog_ring2",
             "cog_ring2_gilbert"],
         4: ["wan_usp2x2", "wan_ring4", "cog_usp2x2_gilbert"]}
ALL = [(w, n) for w, names in CASES.items() for n in names]
BF16_BOUND = 8e-3  # about two bf16 roundings (2^-8 each) of the output
_RESULTS = {}


def _launch(world):
    """Runs dist_diffusers_worker.py on `world` ranks once per test run; {case: [per rank]}."""
    if world not in _RESULTS:
        _RESULTS[world] = run_ranks("dist_diffusers_worker.py", world, "psa_dist_diffusers_",
                                    timeout=360)
    return _RESULTS[world]


def _per_rank(world, name):
    per_rank = _launch(world)[name]
    assert len(per_rank) == world
    for r, res in enumerate(per_rank):
        assert "error" not in res, "rank %d: %s\n%s" % (r, res["error"], res.get("traceback"))
    return per_rank


@needs_stack
@pytest.mark.parametrize("world,name", ALL)
def test_sequence_parallel_transformer_equals_single_process(world, name):
    bound = BF16_BOUND if name.endswith("bf16") else 1e-5
    for r, res in enumerate(_per_rank(world, name)):
        assert len(res["rel_l2"]) == 2
        assert all(e <= bound for e in res["rel_l2"]), "rank %d: rel L2 %r" % (r, res["rel_l2"])
        # warm-up 1: the first forward ran dense, the second sparse (2 blocks each)
        assert res["dense_calls"] == 2 and res["sparse_calls"] == 2, res


@needs_stack
@pytest.mark.parametrize("world,name", ALL)
def test_level_counts_of_the_shards_add_up_to_the_single_process_ones(world, name):
    """Every libpsa forward's block pairs per level (1, 2, 4, 8, skipped), summed over the
    ranks' shards (heads for Ulysses, query blocks for ring), equal the whole forward's:
    the same masks, so the same level fractions."""
    per_rank = _per_rank(world, name)
    reference = per_rank[0]["ref_calls"]
    assert all(res["ref_calls"] == reference for res in per_rank)  # same model everywhere
    assert len(reference) == 4  # 2 blocks x 2 forwards
    # A Ulysses rank runs its heads in chunks (ulysses_chunks): consecutive libpsa calls of
    # one attention forward, each over its own heads; their counts add up.
    forwards = []
    for res in per_rank:
        chunks, rest = divmod(len(res["calls"]), len(reference))
        assert rest == 0 and chunks >= 1, (len(res["calls"]), len(reference))
        assert chunks == 1 or "ulysses" in name, (name, chunks)
        forwards.append([[sum(call[lv] for call in res["calls"][i * chunks:(i + 1) * chunks])
                          for lv in range(5)] for i in range(len(reference))])
    for i, whole in enumerate(reference):
        summed = [sum(calls[i][lv] for calls in forwards) for lv in range(5)]
        assert summed == whole, "forward %d: shards %r, whole %r" % (i, summed, whole)
        total = float(sum(whole))
        fractions = [c / total for c in whole]
        assert [c / float(sum(summed)) for c in summed] == fractions
    # the sparse forwards pruned blocks (the comparison is not between all-level-1 maps)
    assert all(whole[4] > 0 for whole in reference[2:])


@needs_stack
@pytest.mark.parametrize("world", sorted(CASES))
def test_wall_time_of_the_run(world):
    assert _launch(world)["_seconds"] < 60 * world, _RESULTS[world]["_seconds"]


@needs_stack
def test_bad_parallel_arguments_are_named_before_any_forward():
    import torch
    from diffusers import CogVideoXTransformer3DModel, WanTransformer3DModel

    import psa.diffusers as psa_diffusers
    import psa.distributed as psd

    wan = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2,
                                attention_head_dim=32, in_channels=4, out_channels=4,
                                text_dim=32, freq_dim=32, ffn_dim=64, num_layers=1,
                                rope_max_seq_len=64).eval()
    processors = [b.attn1.processor for b in wan.blocks]
    if not torch.distributed.is_initialized():
        with pytest.raises(psd.SequenceParallelError, match="init_process_group"):
            psd.enable_sequence_parallel(wan, ulysses_degree=2)
    with pytest.raises(TypeError, match="unknown key"):
        psa_diffusers.enable_psa(wan, parallel={"ulysses": 2})
    with pytest.raises(TypeError, match="expected a dict"):
        psa_diffusers.enable_psa(wan, parallel=2)
    assert not psa_diffusers.is_enabled(wan)
    assert [b.attn1.processor for b in wan.blocks] == processors
    cog = CogVideoXTransformer3DModel(
        num_attention_heads=2, attention_head_dim=32, in_channels=4, out_channels=4,
        time_embed_dim=32, text_embed_dim=32, num_layers=1, sample_width=32,
        sample_height=32, sample_frames=9, patch_size=2, max_text_seq_length=16).eval()
    cog_processors = [b.attn1.processor for b in cog.transformer_blocks]
    with pytest.raises(TypeError, match="unknown key"):
        psa_diffusers.enable_psa(cog, parallel={"ulysses": 2})
    if not torch.distributed.is_initialized():
        with pytest.raises(psd.SequenceParallelError, match="init_process_group"):
            psd.enable_sequence_parallel(cog, ulysses_degree=2)
    assert not psa_diffusers.is_enabled(cog)
    assert [b.attn1.processor for b in cog.transformer_blocks] == cog_processors
