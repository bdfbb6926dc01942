# bindings/python/tests/test_ring_levels.py -- psa.Context.compute_level_map and
# shard_attention on NumPy arrays (CPU backend): the level map of a query shard against the
# whole K, then the attention of that shard against K/V shards at the map's levels, merged
# by psa.merge_attention, equals psa.attention on the whole sequence (Gilbert order
# permuted outside with psa.sequence_order); bad arguments raise psa.Error naming them.
import numpy as np
import pytest

import psa
from conftest import video_heads


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@pytest.mark.parametrize("model,text", [("Wan2.1_1.3b", 0), ("CogVideo_5b", 40)])
def test_shards_merged_equal_the_whole_attention(model, text):
    rng = np.random.default_rng(15)
    grid = (4, 8, 24)
    q = video_heads(rng, 1, 4, grid, text, 64)
    k = video_heads(rng, 1, 2, grid, text, 64)  # GQA
    v = video_heads(rng, 1, 2, grid, text, 64)
    ref = psa.attention(q, k, v, model=model, grid=grid, text_length=text)
    order, begin, _ = psa.sequence_order(grid, text_length=text, model=model)
    qp, kp, vp = (np.ascontiguousarray(x[:, :, order]) for x in (q, k, v))
    cfg = psa.Config.load(model)
    cfg["use_rearrange"] = False
    bm, bn = int(cfg["block_size.m"]), int(cfg["block_size.n"])
    L = qp.shape[2]
    with psa.Context(cfg, backend="cpu") as ctx:
        position = ("first" if begin == 0 else "last") if text else "none"
        ctx.set_video_grid(*grid, text, position)
        ctx.set_step(int(cfg["warmup_steps"]))  # past warm-up: sparse
        q0 = 3 * bm  # a query shard: the blocks from the fourth on
        levels = ctx.compute_level_map(qp[:, :, q0:], kp)
        nk = -(-L // bn)
        assert levels.shape == (1, 4, -(-(L - q0) // bm), nk)
        assert (levels == 0).any() and (levels == 1).any()  # a sparse map
        outs, lses = [], []
        for b0, b1 in ((0, 2), (2, 5), (5, nk)):
            t0, t1 = b0 * bn, min(L, b1 * bn)
            o, lse = ctx.shard_attention(qp[:, :, q0:], kp[:, :, t0:t1], vp[:, :, t0:t1],
                                         levels, b0)
            outs.append(o)
            lses.append(lse)
        merged = psa.merge_attention(outs, lses, return_lse=False)
        assert rel_l2(merged, ref[:, :, order[q0:]]) <= 1e-5
        with pytest.raises(psa.Error, match="key_block_begin = %d" % (nk - 1)):
            ctx.shard_attention(qp, kp[:, :, :2 * bn], vp[:, :, :2 * bn], levels, nk - 1)


def test_rearranging_context_and_causal_are_refused():
    rng = np.random.default_rng(16)
    grid = (4, 8, 8)
    q = video_heads(rng, 1, 2, grid, 0, 32)
    with psa.Context(psa.Config.load("Wan2.1_1.3b"), backend="cpu") as ctx:
        ctx.set_video_grid(*grid)
        with pytest.raises(psa.Error, match="use_rearrange = 1"):
            ctx.compute_level_map(q, q)
    cfg = psa.Config.load("Wan2.1_1.3b")
    cfg["use_rearrange"] = False
    cfg["causal"] = True
    with psa.Context(cfg, backend="cpu") as ctx:
        with pytest.raises(psa.Error, match="causal = 1"):
            ctx.compute_level_map(q, q)
