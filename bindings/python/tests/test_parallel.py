# bindings/python/tests/test_parallel.py -- the sequence-parallel building blocks in Python:
# psa.attention(head_offset=, batch_offset=) on a shard equals those rows of the whole forward
# bit for bit; psa.merge_attention equals a NumPy float64 reference and rebuilds attention
# from key shards (NumPy; torch CPU and CUDA when present); psa.sequence_order is the order
# the preset computes in. CUDA checks skip without a GPU.
import numpy as np
import pytest

import psa
from conftest import video_heads


def _video_qkv(rng, b, h, grid, d, hkv=None, text=0):
    hkv = hkv or h
    return (video_heads(rng, b, h, grid, text, d), video_heads(rng, b, hkv, grid, text, d),
            video_heads(rng, b, hkv, grid, text, d))


def _qkv(rng, b, h, l, d, hkv=None):
    hkv = hkv or h
    return (rng.standard_normal((b, h, l, d)).astype(np.float32),
            rng.standard_normal((b, hkv, l, d)).astype(np.float32),
            rng.standard_normal((b, hkv, l, d)).astype(np.float32))


def test_head_offset_shard_equals_whole_forward_bit_for_bit():
    rng = np.random.default_rng(15)
    q, k, v = _video_qkv(rng, 1, 8, (4, 8, 32), 64)
    whole = psa.attention(q, k, v, model="Wan2.1_1.3b", grid=(4, 8, 32))
    part = psa.attention(q[:, 4:8], k[:, 4:8], v[:, 4:8], model="Wan2.1_1.3b", grid=(4, 8, 32),
                         head_offset=4)
    np.testing.assert_array_equal(part, whole[:, 4:8])
    local = psa.attention(q[:, 4:8], k[:, 4:8], v[:, 4:8], model="Wan2.1_1.3b", grid=(4, 8, 32))
    assert not np.array_equal(local, whole[:, 4:8])  # heads 0..3's samples


def test_head_offset_with_gqa_and_batch_offset():
    rng = np.random.default_rng(16)
    q, k, v = _video_qkv(rng, 2, 4, (4, 8, 32), 64, hkv=2)
    whole = psa.attention(q, k, v, model="Wan2.1_1.3b", grid=(4, 8, 32))
    part = psa.attention(q[1:, 2:], k[1:, 1:], v[1:, 1:], model="Wan2.1_1.3b", grid=(4, 8, 32),
                         head_offset=2, batch_offset=1)
    np.testing.assert_array_equal(part, whole[1:, 2:])


def test_offsets_are_config_keys_and_checked():
    cfg = psa.Config.load("Wan2.1_1.3b")
    cfg["head_offset"] = 3
    assert cfg["head_offset"] == 3 and cfg["batch_offset"] == 0
    with pytest.raises(ValueError, match="head_offset"):
        psa.attention(*_qkv(np.random.default_rng(0), 1, 1, 64, 64), head_offset=-1)


def _merge_reference(outs, lses):
    lse = np.stack([x.astype(np.float64) for x in lses])
    m = lse.max(axis=0)
    finite = np.isfinite(m)
    m_safe = np.where(finite, m, 0.0)
    s = np.exp(lse - m_safe).sum(axis=0)
    total = np.where(finite, m_safe + np.log(np.where(finite, s, 1.0)), -np.inf)
    w = np.where(finite, np.exp(lse - np.where(finite, total, 0.0)), 0.0)
    out = sum(w[i][..., None] * outs[i].astype(np.float64) for i in range(len(outs)))
    return out, total


def test_merge_equals_float64_reference():
    rng = np.random.default_rng(17)
    outs = [rng.standard_normal((2, 3, 41, 64)).astype(np.float32) for _ in range(4)]
    lses = [(3 * rng.standard_normal((2, 3, 41))).astype(np.float32) for _ in range(4)]
    lses[1][0, 0, :5] = -np.inf
    for x in lses:
        x[1, 2, 7] = -np.inf
    out, lse = psa.merge_attention(outs, lses)
    ref, ref_lse = _merge_reference(outs, lses)
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-6)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-6, atol=1e-6)
    assert np.isneginf(lse[1, 2, 7]) and not out[1, 2, 7].any()


def test_merge_of_key_shards_is_the_whole_attention_blhd():
    rng = np.random.default_rng(18)
    q, k, v = (x.transpose(0, 2, 1, 3).copy() for x in _qkv(rng, 1, 2, 300, 64))
    dense = {"type": "dense"}
    whole, whole_lse = psa.attention(q, k, v, config=dense, layout="blhd", return_lse=True)
    parts = [psa.attention(q, k[:, a:b], v[:, a:b], config=dense, layout="blhd",
                           return_lse=True) for a, b in ((0, 70), (70, 200), (200, 300))]
    out, lse = psa.merge_attention([p[0] for p in parts], [p[1] for p in parts], layout="blhd")
    np.testing.assert_allclose(out, whole, atol=2e-6)
    np.testing.assert_allclose(lse, whole_lse, atol=2e-5)
    # in place, no lse
    first = parts[0][0]
    res = psa.merge_attention([p[0] for p in parts], [p[1] for p in parts], layout="blhd",
                              out=first, return_lse=False)
    assert res is first
    np.testing.assert_array_equal(first, out)


def test_merge_bad_arguments():
    a = np.zeros((1, 1, 4, 8), np.float32)
    with pytest.raises(ValueError, match="lses"):
        psa.merge_attention([a, a], [np.zeros((1, 1, 4), np.float32)])
    with pytest.raises(ValueError, match="lses\\[0\\]"):
        psa.merge_attention([a], [np.zeros((1, 1, 5), np.float32)])
    with pytest.raises(ValueError, match="outs"):
        psa.merge_attention([], [])


def test_sequence_order_is_the_preset_order():
    order, begin, end = psa.sequence_order((4, 8, 32), model="Wan2.1_1.3b")
    assert sorted(order.tolist()) == list(range(4 * 8 * 32)) and (begin, end) == (0, 0)
    assert not np.array_equal(order, np.arange(order.size))  # Gilbert
    order, begin, end = psa.sequence_order((4, 8, 32), text_length=10, model="CogVideo1.5_5b")
    assert (begin, end) == (4 * 8 * 32, 4 * 8 * 32 + 10)  # text moved last
    assert set(order[begin:end].tolist()) == set(range(10))  # it was first
    order, _, _ = psa.sequence_order((4, 8, 32), model="Wan2.1_1.3b",
                                     config={"use_rearrange": False})
    np.testing.assert_array_equal(order, np.arange(order.size))


def test_permuted_sequence_without_rearrangement_gives_the_same_floats():
    rng = np.random.default_rng(19)
    grid, text = (4, 8, 24), 40
    q, k, v = _video_qkv(rng, 1, 2, grid, 64, text=text)
    whole = psa.attention(q, k, v, model="CogVideo1.5_5b", grid=grid, text_length=text)
    order, begin, _ = psa.sequence_order(grid, text_length=text, model="CogVideo1.5_5b")
    qp, kp, vp = (x[:, :, order] for x in (q, k, v))
    out = psa.attention(qp, kp, vp, model="CogVideo1.5_5b", grid=grid, text_length=text,
                        text_first=begin == 0, config={"use_rearrange": False})
    np.testing.assert_array_equal(out, whole[:, :, order])


def _torch():
    return pytest.importorskip("torch")


def test_merge_torch_cpu():
    torch = _torch()
    g = torch.Generator().manual_seed(0)
    outs = [torch.randn(1, 2, 33, 64, generator=g) for _ in range(3)]
    lses = [torch.randn(1, 2, 33, generator=g) for _ in range(3)]
    out, lse = psa.merge_attention(outs, lses)
    assert isinstance(out, torch.Tensor) and isinstance(lse, torch.Tensor)
    ref, ref_lse = _merge_reference([o.numpy() for o in outs], [x.numpy() for x in lses])
    np.testing.assert_allclose(out.numpy(), ref, atol=2e-6)
    np.testing.assert_allclose(lse.numpy(), ref_lse, atol=1e-6)


def _cuda_torch():
    torch = _torch()
    if not torch.cuda.is_available() or not psa.cuda_available():
        pytest.skip("needs a CUDA device and libpsa built with CUDA")
    return torch


def test_merge_cuda_equals_cpu_merge():
    torch = _cuda_torch()
    g = torch.Generator().manual_seed(1)
    for dtype in (torch.float32, torch.bfloat16):
        outs = [torch.randn(2, 3, 65, 128, generator=g).to(dtype) for _ in range(3)]
        lses = [4 * torch.randn(2, 3, 65, generator=g) for _ in range(3)]
        lses[0][0, 0, :3] = float("-inf")
        cpu, cpu_lse = psa.merge_attention(outs, lses)
        gpu, gpu_lse = psa.merge_attention([o.cuda() for o in outs], [x.cuda() for x in lses])
        torch.cuda.synchronize()
        tol = 1e-6 if dtype == torch.float32 else 8e-3
        torch.testing.assert_close(gpu.cpu().float(), cpu.float(), atol=tol, rtol=0)
        torch.testing.assert_close(gpu_lse.cpu(), cpu_lse, atol=1e-5, rtol=1e-6)


def test_head_offset_cuda_shard_equals_whole_forward():
    torch = _cuda_torch()
    g = torch.Generator().manual_seed(2)
    grid = (8, 16, 32)
    L = grid[0] * grid[1] * grid[2]
    q, k, v = (torch.randn(1, 8, L, 128, generator=g).to("cuda", torch.bfloat16)
               for _ in range(3))
    whole = psa.attention(q, k, v, model="Wan2.1_1.3b", grid=grid)
    part = psa.attention(q[:, 4:].contiguous(), k[:, 4:].contiguous(), v[:, 4:].contiguous(),
                         model="Wan2.1_1.3b", grid=grid, head_offset=4)
    torch.cuda.synchronize()
    assert torch.equal(part, whole[:, 4:])


def test_emulated_ranks_cuda_equal_single_gpu():
    """Ulysses and ring with ranks emulated in one process on the CUDA backend: each rank's
    heads (head_offset) and query shard (permuted order, whole K/V) against the single-GPU
    forward, within the bf16 budget."""
    torch = _cuda_torch()
    g = torch.Generator().manual_seed(3)
    grid, text = (8, 16, 24), 226
    L = grid[0] * grid[1] * grid[2] + text
    q, k, v = (torch.randn(1, 4, L, 128, generator=g).to("cuda", torch.bfloat16)
               for _ in range(3))
    model = "CogVideo1.5_5b"
    whole = psa.attention(q, k, v, model=model, grid=grid, text_length=text)
    order, begin, _ = psa.sequence_order(grid, text_length=text, model=model)
    idx = torch.from_numpy(order).cuda()
    qp, kp, vp = (x.index_select(2, idx) for x in (q, k, v))
    ref = whole.index_select(2, idx).float()
    cut = ((L + 127) // 128 + 1) // 2 * 128  # two ring shards of whole query blocks
    for h0 in (0, 2):  # two Ulysses ranks of 2 heads
        for a, b in ((0, cut), (cut, L)):  # two ring ranks
            out = psa.attention(qp[:, h0:h0 + 2, a:b].contiguous(),
                                kp[:, h0:h0 + 2].contiguous(), vp[:, h0:h0 + 2].contiguous(),
                                model=model, grid=grid, text_length=text,
                                text_first=begin == 0, head_offset=h0,
                                config={"use_rearrange": False})
            want = ref[:, h0:h0 + 2, a:b]
            err = (out.float() - want).norm() / want.norm()
            assert err < 1e-2, (h0, a, float(err))
