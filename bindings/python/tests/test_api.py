# bindings/python/tests/test_api.py -- the one-call layer on the CPU backend:
# psa.attention against the context API (bit for bit) and a float64 NumPy reference,
# psa.sparse_attention against the C psa_sparse_attention (bit for bit), the context cache
# (hits, bound, clear, threads), and every bad argument (error naming it, nothing written).
import threading

import numpy as np
import pytest

import psa
from conftest import reference, rel_l2, video_qkv

GRID = (2, 16, 16)  # 512 tokens


@pytest.fixture(autouse=True)
def fresh_cache():
    psa.clear_cache()
    yield
    psa.clear_cache()


def context_forward(cfg, q, k, v, grid=None, step=None, layout="bhld", text=(0, "none")):
    with psa.Context(cfg, backend="cpu") as ctx:
        if grid is not None:
            ctx.set_video_grid(*grid, text[0], text[1])
        ctx.set_step(cfg["warmup_steps"] if step is None else step)
        return ctx.forward(q, k, v, layout=layout)


# ---- psa.attention ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("layout", ["bhld", "blhd"])
def test_attention_equals_context_api_bit_for_bit(dtype, layout):
    seed = int(np.random.default_rng().integers(1 << 30))
    q, k, v = (x.astype(dtype) for x in video_qkv(GRID, batch=2, heads=4, kv_heads=2,
                                                     seed=seed))
    if layout == "blhd":
        q, k, v = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q, k, v))
    cfg = psa.Config.load("Wan2.1_1.3b", "psa_balanced")
    expected = context_forward(cfg, q, k, v, grid=GRID, layout=layout)
    out = psa.attention(q, k, v, model="Wan2.1_1.3b", preset="psa_balanced", grid=GRID,
                        layout=layout)
    assert out.dtype == dtype and out.shape == q.shape
    np.testing.assert_array_equal(out, expected)


def test_attention_default_is_sparse_and_close_to_dense():
    q, k, v = video_qkv((4, 16, 16), seed=int(np.random.default_rng().integers(1 << 30)))
    out = psa.attention(q, k, v, grid=(4, 16, 16))
    ref = reference(q, k, v)[0]
    dense = psa.attention(q, k, v, config={"type": "dense"})
    assert np.abs(dense - ref).max() < 1e-4          # the dense method is exact
    assert 0.0 < rel_l2(out, ref) < 0.3              # sparse: not dense, but close
    # Same call, step 0 of the preset's warm-up: dense.
    warm = psa.attention(q, k, v, grid=(4, 16, 16), step=0)
    np.testing.assert_allclose(warm, ref, atol=1e-4)


def test_attention_without_grid_uses_token_order():
    q, k, v = video_qkv(GRID)
    cfg = psa.Config.load("Wan2.1_1.3b")
    cfg["use_rearrange"] = False
    np.testing.assert_array_equal(psa.attention(q, k, v), context_forward(cfg, q, k, v))


def test_attention_text_tokens_and_lse_and_scale():
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((1, 2, 512 + 64, 64)).astype(np.float32) for _ in range(3))
    cfg = psa.Config.load("CogVideo_5b")
    expected = context_forward(cfg, q, k, v, grid=GRID, text=(64, "first"))
    out = psa.attention(q, k, v, model="CogVideo_5b", grid=GRID, text_length=64)
    np.testing.assert_array_equal(out, expected)   # CogVideoX: text first by default
    dense_out, lse = psa.attention(q, k, v, config={"type": "dense"}, scale=0.2,
                                   return_lse=True)
    ref, ref_lse = reference(q, k, v, scale=0.2)
    assert lse.dtype == np.float32 and lse.shape == (1, 2, 576)
    assert np.abs(dense_out - ref).max() < 1e-4 and np.abs(lse - ref_lse).max() < 1e-4


def test_attention_causal_dense_matches_reference():
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((1, 2, 300, 64)).astype(np.float32) for _ in range(3))
    out = psa.attention(q, k, v, config={"type": "dense"}, causal=True)
    s = (q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2)) / 8.0
    s[..., np.triu_indices(300, 1)[0], np.triu_indices(300, 1)[1]] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v
    assert np.abs(out - ref).max() < 1e-4


def test_out_is_written_in_place_and_cache_is_reused():
    q, k, v = video_qkv(GRID)
    out = np.full_like(q, np.nan)
    first = psa.attention(q, k, v, grid=GRID)
    info = psa.cache_info()
    assert info["size"] == 1 and info["misses"] == 1
    result = psa.attention(q, k, v, grid=GRID, out=out)
    assert result is out
    np.testing.assert_array_equal(out, first)
    assert psa.cache_info()["size"] == 1 and psa.cache_info()["hits"] == 1
    psa.attention(q, k, v, grid=(2, 8, 32))                # another grid: another plan
    assert psa.cache_info()["size"] == 2
    psa.clear_cache()
    assert psa.cache_info()["size"] == 0


def test_cache_is_bounded():
    q, k, v = video_qkv(GRID)
    psa.set_cache_capacity(2)
    try:
        for grid in [(2, 16, 16), (2, 8, 32), (2, 32, 8), (4, 8, 16)]:
            psa.attention(q, k, v, grid=grid)
        assert psa.cache_info()["size"] == 2
    finally:
        psa.set_cache_capacity(64)


def test_threads_give_serial_results():
    inputs = [video_qkv(GRID, seed=s) for s in range(4)]
    grids = [(2, 16, 16), (2, 8, 32)]
    serial = [[psa.attention(*x, grid=g) for g in grids] for x in inputs]
    results = {}
    errors = []

    def worker(i):
        try:
            for rep in range(3):
                for j, g in enumerate(grids):
                    results[(i, j, rep)] = psa.attention(*inputs[i % 4], grid=g)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for (i, j, _), out in results.items():
        np.testing.assert_array_equal(out, serial[i % 4][j])


# ---- psa.sparse_attention -----------------------------------------------------------------
def c_sparse_attention(q, k, v, method, layout, sparsity=0.0, txt_len=0, latent=None,
                       keep_sink=1, keep_recent=1, cdf=1.0, scale=0.0, causal=0):
    out = np.zeros_like(q)
    if layout == "BNSD":
        b, h, s, d = q.shape
    else:
        b, s, h, d = q.shape
    dtype = psa.DType.F32 if q.dtype == np.float32 else psa.DType.F16
    lay = psa.Layout.BNSD if layout == "BNSD" else psa.Layout.BSND
    psa.capi.psa_sparse_attention(q.ctypes.data, k.ctypes.data, v.ctypes.data, out.ctypes.data,
                                  dtype, b, h, s, d, lay, method, sparsity, txt_len, latent,
                                  keep_sink, keep_recent, cdf, scale, causal,
                                  psa.Backend.CPU, None)
    return out


@pytest.mark.parametrize("layout", ["BNSD", "BSND"])
def test_sparse_attention_equals_c_vendor_call(layout):
    rng = np.random.default_rng()
    seq = 64 + 3 * 12 * 20  # text + an unaligned grid
    shape = (2, 3, seq, 64) if layout == "BNSD" else (2, seq, 3, 64)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    cases = [
        (dict(sparse_type="rf_v2", sparsity=0.6, txt_len=64, latent_shape_q=(3, 12, 20)),
         dict(method=psa.Method.RF_V2, sparsity=0.6, txt_len=64, latent=(3, 12, 20))),
        (dict(sparse_type="ada_bsa", sparsity=0.5, cdf_threshold=0.9, keep_sink=False),
         dict(method=psa.Method.ADA_BSA, sparsity=0.5, cdf=0.9, keep_sink=0)),
        (dict(sparse_type="ada_bsa", sparsity=0.3, is_causal=True, keep_recent=False,
              scale=0.1),
         dict(method=psa.Method.ADA_BSA, sparsity=0.3, causal=1, keep_recent=0, scale=0.1)),
        (dict(sparse_type=None), dict(method=psa.Method.DENSE)),
    ]
    for py_args, c_args in cases:
        got = psa.sparse_attention(q, k, v, head_num=3, input_layout=layout, **py_args)
        np.testing.assert_array_equal(got, c_sparse_attention(q, k, v, layout=layout, **c_args))


def test_sparse_attention_dense_and_rf_v2_zero_sparsity_match_reference():
    q, k, v = video_qkv(GRID, heads=2)
    ref = reference(q, k, v)[0]
    assert np.abs(psa.sparse_attention(q, k, v) - ref).max() < 1e-4
    full = psa.sparse_attention(q, k, v, sparse_type="rf_v2", sparsity=0.0,
                                latent_shape_q=GRID)
    assert np.abs(full - ref).max() < 1e-4
    sparse = psa.sparse_attention(q, k, v, sparse_type="rf_v2", sparsity=0.75,
                                  latent_shape_q=GRID)
    assert 0.0 < rel_l2(sparse, ref) < 0.5


# ---- bad input: an error naming the argument, nothing written -----------------------------
def bad_calls(q, k, v, out):
    ro = out.copy()
    ro.flags.writeable = False

    class FakeCuda:  # a CUDA array as far as the adapters can tell
        __cuda_array_interface__ = {"shape": k.shape, "typestr": "<f4", "data": (1 << 40, False),
                                    "version": 3, "strides": None}

    return [
        ("q", TypeError, lambda: psa.attention(q.astype(np.float64), k, v, out=out)),
        ("k has dtype float16", TypeError,
         lambda: psa.attention(q, k.astype(np.float16), v, out=out)),
        ("q: shape", ValueError, lambda: psa.attention(q[0], k, v, out=out)),
        ("layout = 'bshd?'", ValueError, lambda: psa.attention(q, k, v, layout="bshd?", out=out)),
        ("k is on cuda", ValueError, lambda: psa.attention(q, FakeCuda(), v, out=out)),
        ("out: the array is read-only", ValueError, lambda: psa.attention(q, k, v, out=ro)),
        ("out: shape", ValueError, lambda: psa.attention(q, k, v, out=out[:, :1])),
        ("grid = (2, 16, 15)", ValueError, lambda: psa.attention(q, k, v, grid=(2, 16, 15),
                                                                 out=out)),
        ("grid = (2, 16)", ValueError, lambda: psa.attention(q, k, v, grid=(2, 16), out=out)),
        ("text_length = 4 needs grid", ValueError,
         lambda: psa.attention(q, k, v, text_length=4, out=out)),
        ("step = -1", ValueError, lambda: psa.attention(q, k, v, step=-1, out=out)),
        ("model = 3", TypeError, lambda: psa.attention(q, k, v, model=3, out=out)),
        ("Wan9", psa.Error, lambda: psa.attention(q, k, v, model="Wan9", out=out)),
        ("mask_mode = 'top'", ValueError,
         lambda: psa.attention(q, k, v, config={"mask_mode": "top"}, out=out)),
        ("scale = -1", ValueError, lambda: psa.attention(q, k, v, scale=-1, out=out)),
        # Past float's range (the kernels compute in float): named by Python, as -1 is.
        ("scale = inf", ValueError, lambda: psa.attention(q, k, v, scale=float("inf"), out=out)),
        ("scale = 1e+39", ValueError, lambda: psa.attention(q, k, v, scale=1e39, out=out)),
        ("scale = 1000000", ValueError, lambda: psa.attention(q, k, v, scale=10**400, out=out)),
        ("scale = inf", ValueError,
         lambda: psa.sparse_attention(q, k, v, scale=float("inf"), out=out)),
        ("causal = 'yes'", TypeError, lambda: psa.attention(q, k, v, causal="yes", out=out)),
        ("mask_ratios", psa.Error,
         lambda: psa.attention(q, k, v, config={"mask_ratios.1": 0.9, "mask_ratios.2": 0.5},
                               out=out)),
        ("sparse_type = 'rf_v3'", ValueError,
         lambda: psa.sparse_attention(q, k, v, sparse_type="rf_v3", out=out)),
        ("input_layout = 'TND'", ValueError,
         lambda: psa.sparse_attention(q, k, v, input_layout="TND", out=out)),
        ("sparsity = 1.0", ValueError,
         lambda: psa.sparse_attention(q, k, v, sparse_type="ada_bsa", sparsity=1.0, out=out)),
        ("cdf_threshold = 0", ValueError,
         lambda: psa.sparse_attention(q, k, v, sparse_type="ada_bsa", cdf_threshold=0, out=out)),
        ("head_num = 5", ValueError, lambda: psa.sparse_attention(q, k, v, head_num=5, out=out)),
        ("latent_shape_q: required", ValueError,
         lambda: psa.sparse_attention(q, k, v, sparse_type="rf_v2", out=out)),
        ("latent_shape_q = (2, 16, 17)", ValueError,
         lambda: psa.sparse_attention(q, k, v, sparse_type="rf_v2", latent_shape_q=(2, 16, 17),
                                      out=out)),
        ("txt_len = 9999", ValueError, lambda: psa.sparse_attention(q, k, v, txt_len=9999,
                                                                   out=out)),
        ("block_size = 64", ValueError, lambda: psa.sparse_attention(q, k, v, block_size=64,
                                                                    out=out)),
        ("attn_mask", ValueError, lambda: psa.sparse_attention(q, k, v, attn_mask=q, out=out)),
        ("out: the array is read-only", ValueError, lambda: psa.sparse_attention(q, k, v, out=ro)),
    ]


def test_bad_arguments_are_named_and_nothing_is_written():
    q, k, v = video_qkv(GRID)
    out = np.full_like(q, 7.0)
    for expected, kind, call in bad_calls(q, k, v, out):
        with pytest.raises(kind) as info:
            call()
        assert expected in str(info.value), (expected, str(info.value))
        assert (out == 7.0).all(), expected


def test_autograd_is_refused_when_torch_is_present():
    torch = pytest.importorskip("torch")
    q = torch.randn(1, 2, 512, 64, requires_grad=True)
    with pytest.raises(RuntimeError, match="inference only"):
        psa.attention(q, q.detach(), q.detach())


# ---- config words ----------------------------------------------------------------------
def test_config_words_enums_and_bools():
    cfg = psa.Config.load("Wan2.1_1.3b")
    cfg["mask_mode"] = "topk"
    assert cfg["mask_mode"] == psa.MaskMode.TOPK and str(cfg["mask_mode"]) == "topk"
    cfg["mask_mode"] = "ThresholdBound"                   # any case
    assert cfg["mask_mode"].word == "thresholdbound"
    cfg["type"] = "dense"
    assert cfg["type"] is psa.Method.DENSE and cfg["type"] == 1
    cfg["rearrange_method"] = "Gilbert"
    assert str(cfg["rearrange_method"]) == "Gilbert"
    cfg["attn_impl"] = "old_mask_type"
    assert cfg["attn_impl"] is psa.MaskFormat.LEVELS
    cfg["type"] = 2                                         # ints still work
    assert cfg["type"] is psa.Method.RF_V2
    cfg["type"] = psa.Method.ADA_BSA
    assert str(cfg["type"]) == "ada_bsa"
    assert cfg["use_rearrange"] is True and cfg["causal"] is False
    assert isinstance(cfg["block_size.m"], int) and isinstance(cfg["mask_ratios.1"], float)
    with pytest.raises(ValueError, match="expected one of 'psa', 'dense', 'rf_v2', 'ada_bsa'"):
        cfg["type"] = "sparse"
    with pytest.raises(ValueError, match="rearrange_method = 'hilbert'"):
        cfg["rearrange_method"] = "hilbert"
    with pytest.raises(ValueError, match="block_size.m = 'big'"):
        cfg["block_size.m"] = "big"
    with pytest.raises(psa.Error, match="nonexistent"):
        cfg["nonexistent"] = 1
    assert "mask_mode" in cfg and "nonexistent" not in cfg and len(cfg) == len(cfg.keys())
    assert cfg.copy() == cfg


def test_public_names_have_docstrings():
    for name in psa.__all__:
        obj = getattr(psa, name)
        if name in ("capi", "DEFAULT_MODEL"):
            continue
        assert (obj.__doc__ or "").strip(), name
        for attr, member in vars(obj).items() if isinstance(obj, type) else []:
            if not attr.startswith("_") and callable(member):
                assert (member.__doc__ or "").strip(), "%s.%s" % (name, attr)
