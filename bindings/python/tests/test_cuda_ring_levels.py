# bindings/python/tests/test_cuda_ring_levels.py -- the PSA ring halves on PyTorch CUDA tensors
# (skipped without PyTorch, a GPU or libpsa's CUDA backend), in one process: the level map of
# each query shard against the whole K (psa.Context.compute_level_map), the attention of that
# shard against every K/V shard (shard_attention) and psa.merge_attention on the device equal
# psa.attention on the whole sequence within bf16 rounding (Gilbert order permuted outside
# with psa.sequence_order; text tokens, GQA); the CUDA map agrees with the CPU backend's on
# the same values up to rounding of near-tied scores (exact equality on exact logits:
# tests/cuda/ring_cuda_test.cpp).
import numpy as np
import pytest

import psa
from conftest import video_heads

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if not psa.cuda_available():
    pytest.skip("libpsa was built without its CUDA backend", allow_module_level=True)


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm()).item()


@pytest.mark.parametrize("shards", [2, 4])
@pytest.mark.parametrize("model,text", [("Wan2.1_1.3b", 0), ("CogVideo1.5_5b", 40)])
def test_cuda_ring_of_shards_equals_the_whole_attention(model, text, shards):
    rng = np.random.default_rng()
    grid = (4, 8, 24)

    def dev(x):
        return torch.from_numpy(x).to(device="cuda", dtype=torch.bfloat16)

    q = dev(video_heads(rng, 1, 4, grid, text, 64))
    k = dev(video_heads(rng, 1, 2, grid, text, 64))  # GQA
    v = dev(video_heads(rng, 1, 2, grid, text, 64))
    with torch.inference_mode():
        ref = psa.attention(q, k, v, model=model, grid=grid, text_length=text)
        order, begin, _ = psa.sequence_order(grid, text_length=text, model=model)
        idx = torch.as_tensor(np.asarray(order), device="cuda")
        qp, kp, vp = (x[:, :, idx].contiguous() for x in (q, k, v))
        cfg = psa.Config.load(model)
        cfg["use_rearrange"] = False
        bm, bn = int(cfg["block_size.m"]), int(cfg["block_size.n"])
        L = qp.shape[2]
        mq, nk = -(-L // bm), -(-L // bn)
        per = -(-mq // shards)
        kcut = [nk * s // shards for s in range(shards + 1)]
        with psa.Context(cfg, backend="cuda") as gpu, psa.Context(cfg, backend="cpu") as cpu:
            position = ("first" if begin == 0 else "last") if text else "none"
            for ctx in (gpu, cpu):
                ctx.set_video_grid(*grid, text, position)
                ctx.set_step(int(cfg["warmup_steps"]))  # past warm-up: sparse
            for r in range(shards):
                b0, b1 = r * per, min(mq, (r + 1) * per)
                if b0 >= b1:
                    continue
                t0, t1 = b0 * bm, min(L, b1 * bm)
                qs = qp[:, :, t0:t1].contiguous()
                levels = gpu.compute_level_map(qs, kp)
                assert levels.device.type == "cuda" and levels.dtype == torch.int8
                assert tuple(levels.shape) == (1, 4, b1 - b0, nk)
                # The CPU backend on the same bf16 values builds nearly the same map (scores
                # differ by rounding only).
                cpu_levels = cpu.compute_level_map(qs.float().cpu(), kp.float().cpu())
                differ = (levels.cpu() != torch.as_tensor(np.asarray(cpu_levels))).sum().item()
                assert differ <= 0.01 * levels.numel(), differ
                outs, lses = [], []
                for s in range(shards):
                    a, e = kcut[s] * bn, min(L, kcut[s + 1] * bn)
                    o, lse = gpu.shard_attention(qs, kp[:, :, a:e].contiguous(),
                                                 vp[:, :, a:e].contiguous(), levels, kcut[s])
                    assert o.device.type == "cuda" and lse.dtype == torch.float32
                    outs.append(o)
                    lses.append(lse)
                merged = psa.merge_attention(outs, lses, return_lse=False)
                want = ref[:, :, idx[t0:t1]]
                assert rel_l2(merged, want) <= 1e-2, (r, rel_l2(merged, want))
