# bindings/python/tests/test_distributed_robust.py -- psa.distributed when a rank's input is
# bad, on the CPU with gloo, 2 processes (dist_robust_worker.py): a v of another dtype,
# device or shape on one rank (also after a good call of the same shapes), a k of another
# length, a gathered piece of the wrong length or shape (eager and compiled), a bad dim,
# 3-D q, bad head_offset/step: every rank raises SequenceParallelError within seconds (the
# rank at fault: its own error, a ValueError/TypeError for a bad argument value), instead
# of gloo aborting the process, a rank waiting in a transfer, or a zero-filled gather. Bad
# constructor and shard arguments raise ValueError/TypeError naming the argument; without a
# grid the agreed local lengths give the single-process result. Also shard_bounds'
# argument checks (no process group). Skips without torch (gloo).
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dist_launch import gloo_available, run_ranks  # noqa: E402


needs_gloo = pytest.mark.skipif(not gloo_available("psa.distributed"), reason="needs torch with gloo")
_RESULTS = {}

# case: (the rank at fault or None for every rank, words of its error, its error class)
FAILING = {
    "v_dtype_one_rank": (1, "v has dtype torch.float16 but q has torch.float32",
                         "TypeError"),
    "v_meta_one_rank": (1, "v: device meta is not supported", "ValueError"),
    "v_shape_after_good_call": (1, "shapes differ", "SequenceParallelError"),
    "k_length_one_rank": (1, "q/k: 128/100 local tokens", "SequenceParallelError"),
    "gather_short_piece": (1, "x: 100 tokens along dim 1; rank 1's piece of the 256-token "
                              "sequence holds 128", "SequenceParallelError"),
    "compiled_gather_short_piece": (1, "rank 1's piece of the 256-token sequence holds 128",
                                    "SequenceParallelError"),
    "gather_other_dims_differ": (None, "disagree", "SequenceParallelError"),
    "gather_bad_dim_one_rank": (1, "dim = 7: x has 4 dimensions", "ValueError"),
    "q_3d": (None, "expected 4-D [B, L, H, D] tensors", "ValueError"),
    "head_offset_str": (1, "head_offset = '1': expected an int >= 0", "ValueError"),
    "step_negative": (None, "step = -1: expected None (sparse) or an int >= 0", "ValueError"),
}


def _per_rank(name):
    if "results" not in _RESULTS:
        _RESULTS["results"] = run_ranks("dist_robust_worker.py", 2, "psa_dist_robust_",
                                        timeout=90)
    per_rank = _RESULTS["results"].get(name)
    assert per_rank is not None and len(per_rank) == 2, (name, per_rank)
    return per_rank


@needs_gloo
@pytest.mark.parametrize("name", sorted(FAILING))
def test_bad_input_on_a_rank_raises_on_every_rank(name):
    culprit, words, error_class = FAILING[name]
    per_rank = _per_rank(name)
    for r, res in enumerate(per_rank):
        assert "error" in res, "rank %d did not fail: %r" % (r, res)
        assert "SequenceParallelError" in res["classes"], (r, res["error"])
        assert res["seconds"] < 15, "rank %d took %g s to fail" % (r, res["seconds"])
        if culprit is None or r == culprit:
            assert words in res["error"], (r, res["error"])
            assert error_class in res["classes"], (r, res["classes"])
        else:
            assert "rank(s) [%d] rejected their input" % culprit in res["error"], res["error"]


@needs_gloo
def test_bad_arguments_are_named():
    for r, res in enumerate(_per_rank("arguments")):
        assert "error" not in res, (r, res.get("traceback"))
        for what, error in res["found"].items():
            classes, _, message = error.partition(": ")
            assert "ValueError" in classes or "TypeError" in classes, (what, error)
            assert "SequenceParallelError" in classes, (what, error)
            name = ("dim" if what.startswith("shard") else
                    [key for key in ("text_length", "timeout", "group", "text_first",
                                     "permute", "ring_impl", "grid") if key in what][0])
            assert message.startswith(name + " = "), (what, error)


@needs_gloo
def test_agree_first_checks_each_signature_once():
    # Three forwards of one signature: one agreement; a new dtype: a second; two gathers of
    # one piece signature: a third. No collective check in the steady state.
    for r, res in enumerate(_per_rank("agree_first_checks_each_signature_once")):
        assert "error" not in res, (r, res.get("traceback"))
        assert res["after_three"] == 1 and res["total"] == 3 and res["same"], (r, res)


@needs_gloo
def test_without_a_grid_the_agreed_lengths_give_the_single_process_result():
    for r, res in enumerate(_per_rank("no_grid_ulysses_and_ring")):
        assert "error" not in res, (r, res.get("traceback"))
        assert res["rel_l2"] <= 1e-5 and res["rel_l2_ring"] <= 1e-5, (r, res)


@needs_gloo
@pytest.mark.parametrize("args,words", [
    ((1024, 0, 1, 128), "ulysses_degree = 0"),
    ((1024, 2, 0, 128), "ring_degree = 0"),
    ((1024, 1, 2, 0), "block_m = 0"),
    ((-1, 1, 1, 128), "seq_len = -1"),
    ((1024.0, 1, 1, 128), "seq_len = 1024.0"),
    ((1024, True, 1, 128), "ulysses_degree = True"),
    ((1024, "2", 1, 128), "ulysses_degree = '2'"),
])
def test_shard_bounds_arguments_are_named(args, words):
    import psa.distributed as psd

    with pytest.raises(ValueError, match=words):
        psd.shard_bounds(*args)
