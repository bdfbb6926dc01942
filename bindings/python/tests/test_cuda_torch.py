# bindings/python/tests/test_cuda_torch.py -- the one-call layer on PyTorch CUDA tensors
# (skipped without PyTorch, a GPU or libpsa's CUDA backend): psa.attention equals the context
# API bit for bit (bf16/f16, BNSD/BSND, GQA) and cuDNN/flash SDPA within bf16 rounding when
# dense; a repeated call allocates no device memory; psa.sparse_attention on the GPU equals
# the C psa_sparse_attention on device pointers bit for bit and the CPU backend within
# rounding; CUDA-graph capture; explicit streams; device mixes named.
import math

import pytest

import psa

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if not psa.cuda_available():
    pytest.skip("libpsa was built without its CUDA backend", allow_module_level=True)

GRID = (4, 16, 32)  # 2048 tokens
DEV = "cuda"


@pytest.fixture(autouse=True)
def fresh_cache():
    psa.clear_cache()
    yield
    psa.clear_cache()


def video_qkv(heads=4, kv_heads=2, dim=128, dtype=torch.bfloat16, grid=GRID, text=0, seed=None):
    """Video-like [B, H, L, D] tensors: smooth waves over the grid shared by q and k."""
    gen = torch.Generator(device=DEV).manual_seed(
        seed if seed is not None else int(torch.randint(1 << 30, ()).item()))
    t, h, w = grid
    pos = torch.stack(torch.meshgrid(torch.arange(t, device=DEV) / t,
                                     torch.arange(h, device=DEV) / h,
                                     torch.arange(w, device=DEV) / w, indexing="ij"),
                      -1).reshape(-1, 3)

    def wave(n):
        freq = (torch.rand(n, 3, dim, generator=gen, device=DEV) * 3 - 1.5) * 2 * math.pi
        phase = torch.rand(n, 1, dim, generator=gen, device=DEV) * 2 * math.pi
        x = torch.cos(torch.einsum("lc,hcd->hld", pos, freq) + phase) * math.sqrt(2)
        if text:
            x = torch.cat([torch.randn(n, text, dim, generator=gen, device=DEV), x], 1)
        return x

    kk = wave(kv_heads)
    q = kk.repeat_interleave(heads // kv_heads, 0) + 0.1 * torch.randn(
        heads, kk.shape[1], dim, generator=gen, device=DEV)
    v = wave(kv_heads)
    return tuple(x.unsqueeze(0).repeat(2, 1, 1, 1).to(dtype).contiguous() for x in (q, kk, v))


def rel_l2(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm()).item()


def to_layout(x, layout):
    return x.transpose(1, 2).contiguous() if layout == "blhd" else x


def sdpa(q, k, v, layout):
    if layout == "blhd":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return out.transpose(1, 2) if layout == "blhd" else out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["bhld", "blhd"])
def test_attention_equals_context_api_and_sdpa(dtype, layout):
    q, k, v = (to_layout(x, layout) for x in video_qkv(dtype=dtype))
    cfg = psa.Config.load("Wan2.1_1.3b", "psa_balanced")
    with torch.inference_mode():
        out = psa.attention(q, k, v, model="Wan2.1_1.3b", preset="psa_balanced", grid=GRID,
                            layout=layout)
        with psa.Context(cfg, backend="cuda") as ctx:
            ctx.set_video_grid(*GRID)
            ctx.set_step(int(cfg["warmup_steps"]))
            expected = ctx.forward(q, k, v, layout=layout)
            density = ctx.stats().density
        torch.cuda.synchronize()
        assert out.dtype == dtype and out.shape == q.shape and out.device == q.device
        assert torch.equal(out, expected)
        ref = sdpa(q, k, v, layout)
        dense = psa.attention(q, k, v, config={"type": "dense"}, layout=layout)
        assert rel_l2(dense, ref) < 1e-2
        assert 0 < density < 1 and rel_l2(out, ref) < 0.2


def test_second_call_allocates_no_device_memory():
    q, k, v = video_qkv()
    with torch.inference_mode():
        first = psa.attention(q, k, v, grid=GRID, return_lse=True)
        torch.cuda.synchronize()
        segments = torch.cuda.memory_stats()["segment.all.allocated"]
        free_before = torch.cuda.mem_get_info()[0]
        for _ in range(3):
            again = psa.attention(q, k, v, grid=GRID, return_lse=True)
        torch.cuda.synchronize()
        assert torch.cuda.memory_stats()["segment.all.allocated"] == segments  # no cudaMalloc by torch
        assert torch.cuda.mem_get_info()[0] == free_before  # nor by anyone else (libpsa's plan)
        assert psa.cache_info()["hits"] == 3 and psa.cache_info()["misses"] == 1
        assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])


def test_sparse_attention_gpu_equals_c_call_and_cpu_backend():
    torch.manual_seed(int(torch.randint(1 << 30, ()).item()))
    for layout in ("BNSD", "BSND"):
        q, k, v = (x[:, :2] for x in video_qkv(heads=2, kv_heads=2, text=64))
        if layout == "BSND":
            q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        b, s, h, d = (q.shape[0], q.shape[2], q.shape[1], q.shape[3]) if layout == "BNSD" else \
            tuple(q.shape)
        for kwargs, method in (
                (dict(sparse_type="rf_v2", sparsity=0.6, txt_len=64, latent_shape_q=GRID),
                 psa.Method.RF_V2),
                (dict(sparse_type="ada_bsa", sparsity=0.5, cdf_threshold=0.9), psa.Method.ADA_BSA)):
            got = psa.sparse_attention(q, k, v, head_num=h, input_layout=layout, **kwargs)
            c_out = torch.empty_like(q)
            psa.capi.psa_sparse_attention(
                q.data_ptr(), k.data_ptr(), v.data_ptr(), c_out.data_ptr(), psa.DType.BF16, b, h,
                s, d, psa.Layout.BNSD if layout == "BNSD" else psa.Layout.BSND, method,
                kwargs["sparsity"], kwargs.get("txt_len", 0), kwargs.get("latent_shape_q"), 1, 1,
                kwargs.get("cdf_threshold", 1.0), 0.0, 0, psa.Backend.CUDA,
                torch.cuda.current_stream().cuda_stream)
            torch.cuda.synchronize()
            assert torch.equal(got, c_out), (layout, kwargs)
            cpu = psa.sparse_attention(q.float().cpu(), k.float().cpu(), v.float().cpu(),
                                       head_num=h, input_layout=layout, **kwargs)
            assert rel_l2(got.cpu(), cpu) < 2e-2, (layout, kwargs)


def test_cuda_graph_capture_replays_bit_identically():
    q, k, v = video_qkv()
    static_out = torch.empty_like(q)
    s = torch.cuda.Stream()
    with torch.inference_mode():
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            psa.attention(q, k, v, grid=GRID, out=static_out)  # warm-up: plans the shape
        torch.cuda.current_stream().wait_stream(s)
        expected = static_out.clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            psa.attention(q, k, v, grid=GRID, out=static_out)
        static_out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_out, expected)


def test_explicit_stream_and_device_mix():
    q, k, v = video_qkv()
    stream = torch.cuda.Stream()
    with torch.inference_mode():
        expected = psa.attention(q, k, v, grid=GRID)
        stream.wait_stream(torch.cuda.current_stream())
        out = psa.attention(q, k, v, grid=GRID, stream=stream)
        stream.synchronize()
        assert torch.equal(out, expected)
        with pytest.raises(ValueError, match="k is on cpu"):
            psa.attention(q, k.cpu(), v, grid=GRID)
        with pytest.raises(TypeError, match="k has dtype float16"):
            psa.attention(q, k.half(), v, grid=GRID)
        with pytest.raises(ValueError, match="value is on cpu"):
            psa.sparse_attention(q, k, v.cpu())
    qg = q.float().requires_grad_()
    with pytest.raises(RuntimeError, match="inference only"):
        psa.attention(qg, k.float(), v.float(), grid=GRID)
