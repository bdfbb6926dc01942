# bindings/python/tests/test_torch_op.py -- psa.torch: the custom ops psa::attention and
# psa::attention_lse against psa.attention (bit for bit, CPU f32/bf16; CUDA bf16 when a GPU
# is there), torch.library.opcheck, torch.compile(fullgraph=True) with no graph break, the
# config keys, "inference only" autograd refusal, and `import psa` without torch. Skips the
# torch tests when torch is not installed (the build tree's interpreter has none).
import subprocess
import sys

import numpy as np
import pytest

import psa

try:  # skipped per test, not per module: a module with no test makes pytest exit 5
    import torch
    import psa.torch as psa_torch
except ImportError:
    torch = psa_torch = None

pytestmark = pytest.mark.skipif(torch is None, reason="torch is not installed")

GRID = (2, 16, 16)  # 512 tokens

needs_cuda = pytest.mark.skipif(
    torch is None or not (torch.cuda.is_available() and psa.cuda_available()),
    reason="needs a CUDA device and libpsa's CUDA backend")


@pytest.fixture(autouse=True)
def fresh_cache():
    psa.clear_cache()
    yield
    psa.clear_cache()


def random_qkv(shape=(1, 2, 512, 64), kv_heads=None, dtype="float32", device="cpu",
               seed=None):
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    gen = torch.Generator().manual_seed(
        seed if seed is not None else int(np.random.default_rng().integers(1 << 30)))
    kv_shape = (shape[0], kv_heads or shape[1]) + tuple(shape[2:])
    q = torch.randn(shape, generator=gen)
    k = torch.randn(kv_shape, generator=gen)
    v = torch.randn(kv_shape, generator=gen)
    return tuple(x.to(device=device, dtype=dtype) for x in (q, k, v))


# ---- the op equals the one-call layer ----------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("layout", ["bhld", "blhd"])
@pytest.mark.parametrize("model,preset,kwargs", [
    ("Wan2.1_1.3b", "psa_balanced", {}),
    ("Wan2.1_1.3b", "psa_topk", {"step": 3}),               # a warm-up step: dense
    ("CogVideo_5b", None, {"text_length": 64}),             # text first (CogVideoX default)
    ("Wan2.2_A14B", None, {"scale": 0.2, "causal": True, "grid": None}),  # token order
])
def test_op_equals_psa_attention_bit_for_bit(dtype, layout, model, preset, kwargs):
    q, k, v = random_qkv((2, 4, 512 + kwargs.get("text_length", 0), 64), kv_heads=2,
                         dtype=dtype)
    dtype = getattr(torch, dtype)
    if layout == "blhd":
        q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    kwargs = dict({"grid": GRID}, **kwargs)
    expected = psa.attention(q, k, v, model=model, preset=preset, layout=layout, **kwargs)
    psa.clear_cache()
    out = psa_torch.attention(q, k, v, model=model, preset=preset, layout=layout, **kwargs)
    assert out.dtype == dtype and out.shape == q.shape and out.is_contiguous()
    assert torch.equal(out, expected)


def test_op_lse_out_and_overrides_bit_for_bit():
    q, k, v = random_qkv()
    overrides = {"mask_ratios.1": 0.2, "mask_mode": "topk", "use_sim_mask": False,
                 "attn_impl": "new_mask_type"}
    expected, expected_lse = psa.attention(q, k, v, model="Wan2.1_1.3b", config=overrides,
                                           grid=GRID, return_lse=True)
    out, lse = psa_torch.attention(q, k, v, model="Wan2.1_1.3b", config=overrides, grid=GRID,
                                   return_lse=True)
    assert torch.equal(out, expected) and torch.equal(lse, expected_lse)
    assert lse.dtype == torch.float32 and lse.shape == (1, 2, 512)
    target = torch.full_like(q, float("nan"))
    returned = psa_torch.attention(q, k, v, model="Wan2.1_1.3b", config=overrides, grid=GRID,
                                   out=target)
    assert returned is target and torch.equal(target, expected)
    # blhd: lse stays [B, H, L]
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    _, lse_t = psa_torch.attention(qt, kt, vt, config=psa.Config.load("Wan2.1_1.3b"),
                                   grid=GRID, layout="blhd", return_lse=True)
    assert lse_t.shape == (1, 2, 512)


def test_op_with_a_config_object_and_a_key():
    q, k, v = random_qkv()
    cfg = psa.Config.load("Wan2.1_14b")
    cfg["mask_ratios.1"] = 0.3
    expected = psa.attention(q, k, v, config=cfg, grid=GRID)
    key = psa_torch.config_key(config=cfg)
    assert psa_torch.config_from_key(key) == cfg
    assert torch.equal(psa_torch.attention(q, k, v, config=cfg, grid=GRID), expected)
    assert torch.equal(psa_torch.attention(q, k, v, config=key, grid=GRID), expected)
    raw = torch.ops.psa.attention(q, k, v, key, list(GRID), 0, False, "bhld", False, None,
                                  None)
    assert torch.equal(raw, expected)


def test_config_keys_describe_the_config():
    key = psa_torch.config_key("CogVideo_5b", "psa_4steps", {"warmup_steps": 2,
                                                             "mask_mode": psa.MaskMode.TOPK,
                                                             "mask_ratios.1": 0.125})
    assert key == ("model=CogVideo_5b,preset=psa_4steps;mask_mode=topk;mask_ratios.1=0.125;"
                   "warmup_steps=2")
    cfg = psa.Config.load("CogVideo_5b", "psa_4steps").update(
        {"warmup_steps": 2, "mask_ratios.1": 0.125})
    assert psa_torch.config_from_key(key) == cfg
    assert psa_torch.config_key() == "model=%s" % psa.DEFAULT_MODEL
    full = psa.Config.load("Wan2.2_5B", "rf_v2_080")
    assert psa_torch.config_from_key(psa_torch.config_key(config=full)) == full


@pytest.mark.parametrize("kwargs,error,words", [
    ({"model": "NoSuchModel"}, psa.Error, "NoSuchModel"),
    ({"model": "Wan2.1_14b", "preset": "nope"}, psa.Error, "nope"),
    ({"config": {"no_such_key": 1}}, psa.Error, "no_such_key"),
    ({"config": "model=Wan2.1_14b;broken"}, ValueError, "broken"),
    ({"config": 3}, TypeError, "config"),
    ({"model": "a;b"}, ValueError, "model"),
])
def test_bad_config_arguments_are_named(kwargs, error, words):
    q, k, v = random_qkv()
    with pytest.raises(error, match=words):
        psa_torch.attention(q, k, v, **kwargs)


# ---- opcheck, compile, autograd -----------------------------------------------------------
def test_opcheck():
    q, k, v = random_qkv()
    key = psa_torch.config_key("Wan2.1_1.3b", "psa_topk")
    for args in ((q, k, v, key, list(GRID), 0, False, "bhld", False, None, None),
                 (q, k, v, key, None, 0, False, "bhld", True, 0.1, 0)):
        torch.library.opcheck(torch.ops.psa.attention.default, args)
        torch.library.opcheck(torch.ops.psa.attention_lse.default, args)


def _Block(dim=128, heads=2, **psa_kwargs):
    """A small attention block: projections, PSA, output projection."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = heads
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.proj = torch.nn.Linear(dim, dim)
            self.psa_kwargs = psa_kwargs

        def forward(self, x):
            q, k, v = self.qkv(x).unflatten(-1, (3, self.heads, -1)).unbind(2)  # [B, L, H, D]
            o = psa_torch.attention(q, k, v, layout="blhd", **self.psa_kwargs)
            return self.proj(o.flatten(2))

    return Block()


@pytest.mark.parametrize("psa_kwargs", [
    {"model": "Wan2.1_1.3b", "grid": GRID},
    {"config": {"mask_mode": "topk", "mask_ratios.1": 0.3, "use_sim_mask": False,
                "attn_impl": "new_mask_type"}, "grid": GRID, "step": 0},
    {"config": psa.Config.load("CogVideo_5b"), "grid": (2, 16, 15), "text_length": 32,
     "text_first": True},
])
def test_compile_fullgraph_has_no_graph_break(psa_kwargs):
    if isinstance(psa_kwargs.get("config"), psa.Config) and \
            tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 15):
        # Dynamo before 2.15 does not fold the Config argument into a constant: the
        # documented way there is a key computed outside the compiled code.
        psa_kwargs = dict(psa_kwargs, config=psa_torch.config_key(config=psa_kwargs["config"]))
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    block = _Block(**psa_kwargs).eval()
    seq = psa_kwargs["grid"][0] * psa_kwargs["grid"][1] * psa_kwargs["grid"][2]
    x = torch.randn(2, seq + psa_kwargs.get("text_length", 0), 128)
    with torch.no_grad():
        explained = torch._dynamo.explain(block)(x)
        assert explained.graph_break_count == 0, explained.break_reasons
        assert explained.graph_count == 1
        torch._dynamo.reset()
        compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
        got = compiled(x)
        assert sum(torch._dynamo.utils.counters["graph_break"].values()) == 0
        assert torch.equal(got, block(x))
        # the op is in the traced graph as one node
        gm = explained.graphs[0]
        targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        assert any("psa.attention" in t for t in targets), targets


def test_compile_inductor_cpu_equals_eager():
    torch._dynamo.reset()
    block = _Block(model="Wan2.1_1.3b", grid=GRID).eval()
    x = torch.randn(1, 512, 128)
    with torch.no_grad():
        try:
            compiled = torch.compile(block, fullgraph=True)
            got = compiled(x)
        except Exception as e:  # no C++ compiler for inductor's CPU code: not ours to test
            if "compiler" in str(e).lower() or "InvalidCxxCompiler" in type(e).__name__:
                pytest.skip("inductor cannot compile CPU code here: %s" % e)
            raise
        torch.testing.assert_close(got, block(x), rtol=1e-5, atol=1e-5)


def test_autograd_is_refused_with_inference_only():
    q, k, v = random_qkv()
    key = psa_torch.config_key()
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        args = [q, k, v]
        args[("q", "k", "v").index(name)] = tensor.clone().requires_grad_()
        with pytest.raises(RuntimeError, match="inference only"):
            psa_torch.attention(*args)
        with pytest.raises(RuntimeError, match="inference only"):
            torch.ops.psa.attention(*args, key, None, 0, False, "bhld", False, None, None)
        with pytest.raises(RuntimeError, match="inference only"):
            torch.ops.psa.attention_lse(*args, key, None, 0, False, "bhld", False, None, None)
        with torch.no_grad():
            assert torch.equal(psa_torch.attention(*args), psa.attention(q, k, v))
        with torch.inference_mode():
            assert torch.equal(psa_torch.attention(*args), psa.attention(q, k, v))


def test_import_psa_does_not_import_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import psa\n"
            "assert psa.attention is not None\n"
            "try:\n"
            "    import psa.torch\n"
            "except ImportError:\n"
            "    print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# ---- CUDA ---------------------------------------------------------------------------------
@needs_cuda
@pytest.mark.parametrize("layout", ["bhld", "blhd"])
@pytest.mark.parametrize("preset", ["psa_balanced", "psa_topk", "baseline"])
def test_cuda_bf16_equals_psa_attention_bit_for_bit(layout, preset):
    shape = (2, 4, 4 * 16 * 16, 128)
    q, k, v = random_qkv(shape, kv_heads=2, dtype=torch.bfloat16, device="cuda")
    if layout == "blhd":
        q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    grid = (4, 16, 16)
    expected, expected_lse = psa.attention(q, k, v, model="Wan2.1_1.3b", preset=preset,
                                           grid=grid, layout=layout, return_lse=True)
    out, lse = psa_torch.attention(q, k, v, model="Wan2.1_1.3b", preset=preset, grid=grid,
                                   layout=layout, return_lse=True)
    torch.cuda.synchronize()
    assert out.device == q.device and out.dtype == torch.bfloat16
    assert torch.equal(out, expected) and torch.equal(lse, expected_lse)
    # on a side stream, given as the stream argument
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    got = psa_torch.attention(q, k, v, model="Wan2.1_1.3b", preset=preset, grid=grid,
                              layout=layout, stream=side)
    side.synchronize()
    assert torch.equal(got, expected)


@needs_cuda
def test_cuda_graph_capture_replays_bit_identical():
    grid = (4, 16, 16)
    block = _Block(dim=256, heads=2, model="Wan2.1_1.3b", grid=grid).cuda().to(torch.bfloat16)
    x = torch.randn(1, 4 * 16 * 16, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # warm-up outside the capture: plans the shape
                eager = block(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = block(x)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, eager)
        first = captured.clone()
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, block(x))
        assert not torch.equal(captured, first)


@needs_cuda
def test_cuda_compile_fullgraph_no_graph_break():
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    grid = (4, 16, 16)
    block = _Block(dim=256, heads=2, model="Wan2.1_1.3b", grid=grid).cuda().to(torch.bfloat16)
    x = torch.randn(1, 4 * 16 * 16, 256, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        compiled = torch.compile(block, fullgraph=True)
        got = compiled(x)
        assert sum(torch._dynamo.utils.counters["graph_break"].values()) == 0
        torch.testing.assert_close(got, block(x), rtol=2e-2, atol=2e-2)
