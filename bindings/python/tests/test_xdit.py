# bindings/python/tests/test_xdit.py -- psa.xdit with the real xfuser package (tested: xfuser
# 0.7.0, yunchang 0.6.4), CPU, gloo (dist_xdit_worker.py): xfuser sets up its sequence-
# parallel groups with ulysses_degree x ring_degree = 2 x 1, 1 x 2 and 2 x 2, its tiny Wan
# transformer (xFuserWanTransformer3DWrapper) runs with psa.xdit.enable_psa, and every rank's
# output (a dense warm-up forward, then a sparse psa_topk forward; an even latent and an
# uneven one with a per-token timestep) equals a plain diffusers WanTransformer3DModel with
# the same weights under psa.diffusers on one process (fp32: <= 1e-5 relative L2);
# disable_psa restores xfuser's processors and sequence split. Skips without xfuser (it is
# an optional extra: pip install libpsa[xdit]) or torch (gloo).
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dist_launch import gloo_available, run_ranks  # noqa: E402


needs_xfuser = pytest.mark.skipif(not gloo_available("diffusers", "xfuser", "yunchang"),
                                  reason="needs xfuser, yunchang, diffusers and torch (gloo)")
CASES = ["wan_psa_topk", "wan_uneven_token_timestep"]
_RESULTS = {}


def _results(U, R):
    if (U, R) not in _RESULTS:
        _RESULTS[(U, R)] = run_ranks("dist_xdit_worker.py", U * R, "psa_xdit_",
                                     timeout=480, args=[str(U), str(R)])
    return _RESULTS[(U, R)]


def _per_rank(U, R, name):
    results = _results(U, R)
    assert all(d == [U, R, 1] for d in results["degrees"]), results["degrees"]
    per_rank = results[name]
    assert len(per_rank) == U * R
    for r, res in enumerate(per_rank):
        assert "error" not in res, "rank %d: %s\n%s" % (r, res["error"], res.get("traceback"))
    return per_rank


@needs_xfuser
@pytest.mark.parametrize("U,R", [(2, 1), (1, 2), (2, 2)])
@pytest.mark.parametrize("name", CASES)
def test_xdit_wan_equals_single_process_psa(U, R, name):
    for r, res in enumerate(_per_rank(U, R, name)):
        assert all(e <= 1e-5 for e in res["rel_l2"]), "rank %d: %r" % (r, res["rel_l2"])
        assert res["dense_calls"] == 2 and res["sparse_calls"] == 2, res
        assert res["restored"], res


@needs_xfuser
def test_xdit_cogvideox_is_refused_with_the_sequence_parallel_alternative():
    for r, text in enumerate(_results(2, 1)["cogvideox"]):
        assert text.startswith("TypeError: xFuserCogVideoXTransformer3DWrapper is not"), text
        assert "enable_sequence_parallel" in text, "rank %d: %s" % (r, text)


def test_enable_psa_without_xfuser_groups_says_so():
    pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    if not gloo_available("diffusers", "xfuser", "yunchang"):
        import psa.xdit

        with pytest.raises(ImportError, match="xfuser"):
            psa.xdit.enable_psa(object())
        return
    import psa.xdit
    from xfuser.core.distributed import parallel_state

    if parallel_state.model_parallel_is_initialized():
        pytest.skip("xfuser's groups are set up in this process")
    with pytest.raises(RuntimeError, match="initialize_model_parallel"):
        psa.xdit.enable_psa(object())


# CFG parallelism (xfuser's classifier_free_guidance_degree 2, use_cfg_parallel): each CFG
# rank's output equals its half of the one-process forward of the whole [uncond, cond] batch
# (the two items differ in their text context, so a missing batch offset would show);
# cfg_batch="whole" returns the whole batch's output on every rank; a batch of 1 under
# "whole", or CFG ranks given different latents, raise CfgParallelError on every rank.
CFG_CASES = ["cfg_split_psa_topk", "cfg_split_token_timestep", "cfg_whole_psa_topk"]


def _per_rank_cfg(U, R, name, expect_error=False):
    key = (U, R, 2)
    if key not in _RESULTS:
        _RESULTS[key] = run_ranks("dist_xdit_worker.py", U * R * 2, "psa_xdit_cfg_",
                                  timeout=480, args=[str(U), str(R), "2"])
    results = _RESULTS[key]
    assert all(d == [U, R, 2] for d in results["degrees"]), results["degrees"]
    assert sorted(results["cfg_rank"]) == sorted([0, 1] * (U * R)), results["cfg_rank"]
    per_rank = results[name]
    assert len(per_rank) == U * R * 2
    if not expect_error:
        for r, res in enumerate(per_rank):
            assert "error" not in res, "rank %d: %s\n%s" % (r, res["error"],
                                                            res.get("traceback"))
    return per_rank


@needs_xfuser
@pytest.mark.parametrize("U,R", [(1, 1), (2, 1)])
@pytest.mark.parametrize("name", CFG_CASES)
def test_xdit_cfg_parallel_equals_single_process_batch(U, R, name):
    for r, res in enumerate(_per_rank_cfg(U, R, name)):
        assert all(e <= 1e-5 for e in res["rel_l2"]), "rank %d: %r" % (r, res["rel_l2"])
        assert res["dense_calls"] == 2 and res["sparse_calls"] == 2, res
        assert res["restored"], res


@needs_xfuser
@pytest.mark.parametrize("U,R", [(1, 1), (2, 1)])
def test_xdit_cfg_whole_odd_batch_raises_on_every_rank(U, R):
    for r, res in enumerate(_per_rank_cfg(U, R, "cfg_whole_odd_batch", expect_error=True)):
        assert "CfgParallelError" in res.get("error", ""), "rank %d: %r" % (r, res)
        assert "batch 1" in res["error"] and "cfg_batch" in res["error"], res["error"]


@needs_xfuser
@pytest.mark.parametrize("U,R", [(1, 1), (2, 1)])
def test_xdit_cfg_ranks_with_different_shapes_fail_on_every_rank(U, R):
    for r, res in enumerate(_per_rank_cfg(U, R, "cfg_split_shape_mismatch",
                                          expect_error=True)):
        assert res.get("error", "").startswith("CfgParallelError: psa.xdit: the CFG ranks "
                                               "disagree"), "rank %d: %r" % (r, res)
