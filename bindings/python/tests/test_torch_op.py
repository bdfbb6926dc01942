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


def test_forward_mode_ad_is_refused_with_inference_only():
    """A dual tensor (forward_ad) or torch.func.jvp / jacfwd must not get a zero or missing
    derivative: the op has none, so it says so."""
    import torch.autograd.forward_ad as fwAD

    q, k, v = random_qkv()
    key = psa_torch.config_key()
    calls = [lambda x: psa_torch.attention(x, k, v),
             lambda x: psa_torch.attention(q, x, v, return_lse=True)[1],
             lambda x: torch.ops.psa.attention(q, k, x, key, None, 0, False, "bhld", False,
                                               None, None),
             lambda x: torch.ops.psa.attention_lse(x, k, v, key, None, 0, False, "bhld",
                                                   False, None, None)[0]]
    for call in calls:
        with pytest.raises(RuntimeError, match="inference only"):
            torch.func.jvp(call, (q,), (torch.ones_like(q),))
        with fwAD.dual_level():
            with pytest.raises(RuntimeError, match="inference only"):
                call(fwAD.make_dual(q, torch.ones_like(q)))
    # jacfwd pushes q.numel() tangents at once (an identity basis of numel^2 elements):
    # tiny inputs keep it small (16,384 elements took about 17 GB).
    qs, ks, vs = random_qkv((1, 1, 16, 8))
    with pytest.raises(RuntimeError, match="inference only"):
        torch.func.jacfwd(lambda x: psa_torch.attention(x, ks, vs))(qs)
    with pytest.raises(RuntimeError, match="inference only"):
        torch.func.grad(lambda x: psa_torch.attention(x, k, v).sum())(q)
    # a dual level with no tangent on the inputs is no derivative request
    with fwAD.dual_level():
        assert torch.equal(psa_torch.attention(q, k, v), psa.attention(q, k, v))


def test_vmap_maps_the_op_over_a_leading_axis():
    q, k, v = random_qkv((3, 1, 2, 256, 32))  # 3 problems of [1, 2, 256, 32]
    got = torch.func.vmap(lambda a, b, c: psa_torch.attention(a, b, c))(q, k, v)
    for i in range(3):
        assert torch.equal(got[i], psa.attention(q[i], k[i], v[i]))


def test_mixed_devices_raise_instead_of_returning_garbage():
    """A real CPU q with meta k/v went to the meta (fake) kernel and came back as an
    uninitialised CPU tensor."""
    q, k, v = random_qkv((1, 2, 256, 32))
    key = psa_torch.config_key()
    meta = [x.to("meta") for x in (q, k, v)]
    for args in ((q, meta[1], meta[2]), (meta[0], k, v), (q, k, meta[2])):
        with pytest.raises(ValueError, match="on one device"):
            psa_torch.attention(*args)
        for op in (torch.ops.psa.attention, torch.ops.psa.attention_lse):
            with pytest.raises(ValueError, match="on one device"):
                op(*args, key, None, 0, False, "bhld", False, None, None)
    # every tensor on meta: shape inference, as before
    out = psa_torch.attention(*meta, return_lse=True)
    assert out[0].device.type == "meta" and out[0].shape == q.shape
    assert out[1].shape == (1, 2, 256)


def _bad_inputs():
    q, k, v = random_qkv((1, 2, 256, 32), seed=1)
    return {
        "float64": ((q.double(), k.double(), v.double()), {}),
        "int32": ((q.int(), k.int(), v.int()), {}),
        "mixed dtypes": ((q, k.half(), v.half()), {}),
        "3-D": ((q[0], k[0], v[0]), {}),
        "2-D": ((q[0, 0], k[0, 0], v[0, 0]), {}),
        "head dim strided": (tuple(x.transpose(2, 3).contiguous().transpose(2, 3)
                                   for x in (q, k, v)), {}),
        "empty seq": ((q[:, :, :0], k[:, :, :0], v[:, :, :0]), {}),
        "empty batch": ((q[:0], k[:0], v[:0]), {}),
        "empty head dim": ((q[..., :0], k[..., :0], v[..., :0]), {}),
        "aliased batch": (tuple(x.expand(2, 2, 256, 32) for x in (q, k, v)), {}),
        "v length": ((q, k, v[:, :, :128]), {}),
        "k head_dim": ((q, k[..., :16], v[..., :16]), {}),
        "k batch": ((q, k.expand(2, 2, 256, 32).contiguous(),
                     v.expand(2, 2, 256, 32).contiguous()), {}),
        "GQA heads": ((q[:, :1].repeat(1, 3, 1, 1), k, v), {}),  # 3 q heads, 2 k/v heads
        "grid length": ((q, k, v), {"grid": [2, 8, 8]}),
        "text without grid": ((q, k, v), {"text_length": 16}),
        "bad layout": ((q, k, v), {"layout": "bdlh"}),
        "scale": ((q, k, v), {"scale": -1.0}),
        "step": ((q, k, v), {"step": -2}),
    }


@pytest.mark.parametrize("name", list(_bad_inputs()) if torch is not None else [])
@pytest.mark.parametrize("lse", [False, True])
def test_fake_rejects_what_the_real_op_rejects(name, lse):
    """The fake (meta) implementation and the real one share their checks: the same
    exception with the same message eagerly, under FakeTensorMode, and when torch.compile
    traces the call."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    (q, k, v), kwargs = _bad_inputs()[name]
    op = torch.ops.psa.attention_lse if lse else torch.ops.psa.attention
    args = dict(grid=None, text_length=0, layout="bhld", scale=None, step=None)
    args.update(kwargs)
    key = psa_torch.config_key()

    def call(a, b, c):
        return op(a, b, c, key, args["grid"], args["text_length"], False,
                  args["layout"], False, args["scale"], args["step"])

    with pytest.raises(Exception) as real:
        call(q, k, v)
    assert isinstance(real.value, (TypeError, ValueError, psa.Error)), real.value
    message = str(real.value)
    with pytest.raises(type(real.value)) as fake:
        with FakeTensorMode() as mode:
            call(*(mode.from_tensor(x) for x in (q, k, v)))
    assert str(fake.value) == message
    torch._dynamo.reset()
    with pytest.raises(Exception) as traced:
        torch.compile(call, fullgraph=True, backend="aot_eager")(q, k, v)
    assert repr(real.value) in str(traced.value)  # Dynamo quotes the fake's exception


@pytest.mark.parametrize("kwargs,error,words", [
    ({"causal": "no"}, TypeError, "causal = 'no'"),
    ({"causal": 1}, TypeError, "causal = 1"),
    ({"text_first": "no", "grid": GRID}, TypeError, "text_first = 'no'"),
    ({"return_lse": "no"}, TypeError, "return_lse = 'no'"),
    ({"text_length": True, "grid": GRID}, ValueError, "text_length = True"),
    ({"text_length": -1, "grid": GRID}, ValueError, "text_length = -1"),
    ({"scale": "x"}, ValueError, "scale = 'x'"),
    ({"scale": 0.0}, ValueError, "scale = 0.0"),
    ({"scale": float("inf")}, ValueError, "scale = inf"),
    ({"step": True}, ValueError, "step = True"),
    ({"step": 2**70}, ValueError, "step = "),
    ({"grid": 5}, ValueError, "grid = 5"),
    ({"grid": (2, 16, 16.5)}, ValueError, "grid = "),
    ({"grid": (2, 16)}, ValueError, "grid = "),
    ({"grid": (2, 16, 8)}, ValueError, "grid = "),  # 256 tokens, the sequence has 512
    ({"layout": 3}, ValueError, "layout = 3"),
    ({"out": "buffer"}, TypeError, "out: str is not a torch.Tensor"),
    ({"out": np.zeros((1, 2, 512, 64), np.float32)}, TypeError, "out: ndarray"),
    ({"out": torch.empty(3, 2, 512, 64)}, ValueError, "out: shape \\(3, 2, 512, 64\\)"),
    ({"out": torch.empty(1, 2, 512, 1)}, ValueError, "out: shape"),
    ({"out": torch.empty(1, 2, 512, 64, dtype=torch.int32)}, TypeError,
     "out: dtype torch.int32"),
    ({"out": torch.empty(1, 2, 512, 64, dtype=torch.float16)}, TypeError,
     "out has dtype float16"),
    ({"out": torch.empty(1, 2, 512, 64, device="meta")}, ValueError, "out is on meta"),
] if torch is not None else [])
def test_friendly_call_checks_arguments_as_psa_attention(kwargs, error, words):
    """No coercion (causal="no" ran causal attention, text_length=True was 1 token) and no
    broadcasting or casting into out; the error names the argument and nothing is written."""
    q, k, v = random_qkv()
    out = kwargs.get("out")
    before = out.clone() if isinstance(out, torch.Tensor) and out.device.type != "meta" \
        else None
    with pytest.raises(error, match=words):
        psa_torch.attention(q, k, v, **kwargs)
    if before is not None:
        assert torch.equal(out, before) or torch.isnan(before).any()


@pytest.mark.parametrize("bad", ["numpy", "list", "none"])
def test_friendly_call_refuses_non_tensors(bad):
    q, k, v = random_qkv()
    value = {"numpy": q.numpy(), "list": [1.0, 2.0], "none": None}[bad]
    for position in range(3):
        args = [q, k, v]
        args[position] = value
        with pytest.raises(TypeError, match="%s: .* is not a torch.Tensor" % "qkv"[position]):
            psa_torch.attention(*args)


def test_friendly_call_with_out_under_compile():
    q, k, v = random_qkv()
    out = torch.empty_like(q)

    def fn(a, b, c, o):
        return psa_torch.attention(a, b, c, grid=GRID, out=o)

    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(fn, fullgraph=True, backend="aot_eager")(q, k, v, out)
    assert got is out or torch.equal(got, out)
    assert torch.equal(out, psa.attention(q, k, v, grid=GRID))


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
