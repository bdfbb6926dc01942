# bindings/python/tests/test_jax.py -- psa.jax.attention, libpsa as an XLA FFI custom call
# (skipped without jax; without psa/_jax_ffi.so too, unless PSA_JAX_REQUIRED=1, which
# scripts/python_package_test.sh sets when it built the handlers).
#   CPU backend: bit for bit equal to psa.attention on the same arrays, under jax.jit, for a
#   PSA preset, the dense baseline, rf_v2 and ada_bsa (presets and config overrides); GQA,
#   both layouts, LSE, text tokens, causal/scale, step; one trace for repeated calls and a
#   warm context cache; jax.vmap; bad input raising at trace time or with the library's
#   message. They run under `jax.default_device(cpu)` (the autouse fixture), so that NumPy
#   inputs land on the CPU where jax's default device is a GPU; committed CPU arrays are also
#   checked with the GPU (the backend's first device) left as the default, eager and jitted,
#   and the placement rule with two host devices in a subprocess.
#   CUDA (skipped unless jax has a CUDA device): bf16 device arrays against psa.attention on
#   the same data in PyTorch (bit for bit, when torch with CUDA is there) and against the CPU
#   backend (within bf16 rounding for the dense kernel, twice that for the sparse methods,
#   whose block choices may differ where scores tie); jit, vmap, LSE, GQA and blhd on the
#   device; a workspace of the benchmark's size; float32 GPU arrays refused with a hint.
import os
import subprocess
import sys

import numpy as np
import pytest

import psa
from conftest import reference, rel_l2, video_qkv

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

try:
    import psa.jax as pjax
    pjax._load()
except ImportError as exc:  # the package was built without the handlers
    if os.environ.get("PSA_JAX_REQUIRED") == "1":
        raise
    pytest.skip(str(exc), allow_module_level=True)

GRID = (2, 16, 16)  # 512 tokens: 4 x 4 blocks of 128
CPU = jax.devices("cpu")[0]


def _cuda_devices():
    try:
        return jax.devices("cuda")
    except Exception:  # RuntimeError "Unknown backend cuda" without jax's CUDA plugin
        return []


CUDA = _cuda_devices()
gpu = pytest.mark.skipif(not CUDA, reason="no CUDA device in jax")


@pytest.fixture(autouse=True)
def fresh_caches(request):
    """Empty caches; the CPU tests (all but test_gpu_*) with the CPU as jax's default device:
    their NumPy inputs and jnp arrays would otherwise go to the GPU where jax has one, and
    the call with them (JAX's placement rule, not psa.jax's choice)."""
    psa.clear_cache()
    pjax.clear_cache()
    if request.node.name.startswith("test_gpu"):
        yield
    else:
        with jax.default_device(CPU):
            yield
    psa.clear_cache()


def on_cpu(*arrays):
    return tuple(jax.device_put(a, CPU) for a in arrays)


def as_np(x):
    return np.asarray(jax.device_get(x))


# ---- CPU: equal to psa.attention ------------------------------------------------------------
CASES = {
    "psa_preset": dict(model="Wan2.1_1.3b", preset="psa_balanced", grid=GRID),
    "psa_topk_overrides": dict(model="Wan2.1_1.3b", preset="psa_topk", grid=GRID,
                               config={"mask_ratios.1": 0.08}),
    "default_no_grid": dict(),
    "dense_baseline": dict(model="Wan2.1_1.3b", preset="baseline", grid=GRID),
    "dense_override": dict(config={"type": "dense"}),
    "rf_v2_preset": dict(model="Wan2.1_1.3b", preset="rf_v2_080", grid=GRID),
    "rf_v2_overrides": dict(model="Wan2.1_1.3b", grid=GRID,
                            config={"type": "rf_v2", "sparsity": 0.5, "block_size.n": 128}),
    "ada_bsa_preset": dict(model="Wan2.1_1.3b", preset="ada_bsa_cdf", grid=GRID),
    "ada_bsa_overrides": dict(model="Wan2.1_1.3b", preset="ada_bsa_cdf", grid=GRID,
                              config={"cdf_threshold": 0.8, "keep_recent": False}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_jit_equals_psa_attention_bit_for_bit(case):
    kwargs = CASES[case]
    q, k, v = video_qkv(batch=2)
    expected = psa.attention(q, k, v, **kwargs)
    fn = jax.jit(lambda q, k, v: pjax.attention(q, k, v, **kwargs))
    got = fn(*on_cpu(q, k, v))
    assert got.dtype == jnp.float32 and got.shape == q.shape
    np.testing.assert_array_equal(as_np(got), expected)
    # the same without jit
    np.testing.assert_array_equal(as_np(pjax.attention(q, k, v, **kwargs)), expected)


def test_methods_differ_and_are_sane():
    q, k, v = video_qkv()
    dense_ref, _ = reference(q, k, v)
    outs = {}
    for name in ("psa_preset", "dense_baseline", "rf_v2_preset", "ada_bsa_preset"):
        outs[name] = as_np(pjax.attention(q, k, v, **CASES[name]))
    assert rel_l2(outs["dense_baseline"], dense_ref) < 1e-5
    for name in ("psa_preset", "rf_v2_preset", "ada_bsa_preset"):
        assert 0 < rel_l2(outs[name], dense_ref) < 0.6, name


@pytest.mark.parametrize("layout", ["bhld", "blhd", "BNSD", "bsnd"])
def test_gqa_layouts_and_lse(layout):
    q, k, v = video_qkv(heads=4, kv_heads=2, batch=2, seed=3)
    if layout.lower() in ("blhd", "bsnd"):
        q, k, v = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q, k, v))
    kwargs = dict(model="Wan2.1_1.3b", grid=GRID, layout=layout)
    out_ref, lse_ref = psa.attention(q, k, v, return_lse=True, **kwargs)
    out, lse = jax.jit(lambda q, k, v: pjax.attention(q, k, v, return_lse=True, **kwargs))(
        *on_cpu(q, k, v))
    assert lse.dtype == jnp.float32 and lse.shape == lse_ref.shape
    np.testing.assert_array_equal(as_np(out), out_ref)
    np.testing.assert_array_equal(as_np(lse), lse_ref)


def test_text_tokens_causal_scale_and_step():
    grid = (2, 8, 16)
    q, k, v = video_qkv(grid=(2, 8, 17), heads=2, seed=5)  # 272 tokens = 256 video + 16 text
    for kwargs in (dict(model="CogVideo_5b", grid=grid, text_length=16),  # text first
                   dict(model="Wan2.1_1.3b", grid=grid, text_length=16, text_first=False),
                   dict(model="Wan2.1_1.3b", causal=True, scale=0.1),  # no grid: no rearrange
                   dict(model="Wan2.1_1.3b", grid=grid, text_length=16, step=0),   # warm-up
                   dict(model="Wan2.1_1.3b", grid=grid, text_length=16, step=20)):
        expected = psa.attention(q, k, v, **kwargs)
        got = jax.jit(lambda q, k, v: pjax.attention(q, k, v, **kwargs))(q, k, v)
        np.testing.assert_array_equal(as_np(got), expected, err_msg=str(kwargs))


def test_config_objects_and_keys():
    q, k, v = video_qkv()
    cfg = psa.Config.load("Wan2.1_1.3b", "psa_topk")
    cfg["mask_ratios.1"] = 0.08
    expected = psa.attention(q, k, v, config=cfg, grid=GRID)
    np.testing.assert_array_equal(as_np(pjax.attention(q, k, v, config=cfg, grid=GRID)),
                                  expected)
    key = pjax.config_key(config=cfg)
    assert key.startswith("config;")
    np.testing.assert_array_equal(as_np(pjax.attention(q, k, v, config=key, grid=GRID)),
                                  expected)
    key = pjax.config_key("Wan2.1_1.3b", "psa_topk", {"mask_ratios.1": 0.08})
    assert key == "model=Wan2.1_1.3b,preset=psa_topk;mask_ratios.1=0.08"
    np.testing.assert_array_equal(as_np(pjax.attention(q, k, v, config=key, grid=GRID)),
                                  expected)


def test_float16_cpu():
    q, k, v = (x.astype(np.float16) for x in video_qkv())
    out = jax.jit(lambda q, k, v: pjax.attention(q, k, v, grid=GRID))(q, k, v)
    assert out.dtype == jnp.float16
    np.testing.assert_array_equal(as_np(out), psa.attention(q, k, v, grid=GRID))


def test_bfloat16_cpu():
    torch = pytest.importorskip("torch")  # psa.attention takes bf16 host data from PyTorch
    q, k, v = (torch.from_numpy(x).to(torch.bfloat16) for x in video_qkv())
    out, lse = jax.jit(lambda q, k, v: pjax.attention(q, k, v, grid=GRID, return_lse=True))(
        *(jnp.asarray(x.float().numpy(), jnp.bfloat16) for x in (q, k, v)))
    assert out.dtype == jnp.bfloat16
    t_out, t_lse = psa.attention(q, k, v, grid=GRID, return_lse=True)
    assert torch.equal(torch.from_numpy(as_np(out).view(np.int16).copy()), t_out.view(torch.int16))
    np.testing.assert_array_equal(as_np(lse), t_lse.numpy())


def test_one_trace_repeated_calls_plan_nothing():
    q, k, v = on_cpu(*video_qkv())
    traces = []

    def f(q, k, v):
        traces.append(1)
        return pjax.attention(q, k, v, grid=GRID)

    fn = jax.jit(f)
    first = jax.block_until_ready(fn(q, k, v))
    for _ in range(3):
        again = jax.block_until_ready(fn(q, k, v))
        np.testing.assert_array_equal(as_np(again), as_np(first))
    assert len(traces) == 1
    info = pjax.cache_info()
    assert info["size"] == 1 and info["misses"] == 1 and info["hits"] == 3, info
    # another shape: a new trace and a new context
    q2, k2, v2 = on_cpu(*video_qkv(batch=2))
    jax.block_until_ready(fn(q2, k2, v2))
    assert len(traces) == 2 and pjax.cache_info()["size"] == 2
    pjax.clear_cache()
    assert pjax.cache_info() == {"size": 0, "hits": 0, "misses": 0}


def test_committed_cpu_arrays_run_on_the_cpu_whatever_the_default_device():
    # jax's own default device (a GPU where jax has one), not the fixture's CPU: arrays put
    # on the CPU get the CPU handler, eager, jitted and vmapped
    q, k, v = video_qkv(batch=2, heads=4, kv_heads=2, seed=7)
    kwargs = dict(model="Wan2.1_1.3b", grid=GRID)
    out_ref, lse_ref = psa.attention(q, k, v, return_lse=True, **kwargs)
    with jax.default_device(jax.devices()[0]):
        cq, ck, cv = on_cpu(q, k, v)
        eager = pjax.attention(cq, ck, cv, return_lse=True, **kwargs)
        jitted = jax.jit(lambda q, k, v: pjax.attention(q, k, v, return_lse=True, **kwargs))(
            cq, ck, cv)
        mapped = jax.jit(jax.vmap(lambda q, k, v: pjax.attention(q, k, v, **kwargs)))(
            cq[None], ck[None], cv[None])
    for out, lse in (eager, jitted):
        assert out.devices() == {CPU} and lse.devices() == {CPU}
        np.testing.assert_array_equal(as_np(out), out_ref)
        np.testing.assert_array_equal(as_np(lse), lse_ref)
    assert mapped.devices() == {CPU}
    np.testing.assert_array_equal(as_np(mapped)[0], out_ref)


def test_the_call_follows_its_inputs_device():
    # Two host devices (XLA_FLAGS) in a subprocess stand in for a CPU + GPU machine: with
    # cpu:0 the default, arrays committed to cpu:1 run there, eager and jitted, and NumPy
    # inputs follow jax.default_device.
    code = "\n".join([
        "import jax, numpy as np, psa, psa.jax as pjax",
        "from conftest import video_qkv",
        "other = jax.devices('cpu')[1]",
        "q, k, v = video_qkv()",
        "grid = %r" % (GRID,),
        "expected = psa.attention(q, k, v, grid=grid)",
        "xs = [jax.device_put(x, other) for x in (q, k, v)]",
        "got = [pjax.attention(*xs, grid=grid),",
        "       jax.jit(lambda q, k, v: pjax.attention(q, k, v, grid=grid))(*xs)]",
        "with jax.default_device(other):",
        "    got.append(pjax.attention(q, k, v, grid=grid))",
        "for out in got:",
        "    assert out.devices() == {other}, out.devices()",
        "    np.testing.assert_array_equal(np.asarray(out), expected)",
    ])
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        " --xla_force_host_platform_device_count=2").strip()
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__))] +
                                        [p for p in [env.get("PYTHONPATH")] if p])
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_vmap_equals_per_item_calls():
    items = [video_qkv(seed=s) for s in range(3)]
    qs, ks, vs = (np.stack([it[i] for it in items]) for i in range(3))  # [3, 1, H, L, D]
    kwargs = dict(model="Wan2.1_1.3b", grid=GRID)
    fn = jax.jit(jax.vmap(lambda q, k, v: pjax.attention(q, k, v, **kwargs)))
    got = as_np(fn(qs, ks, vs))
    for i, (q, k, v) in enumerate(items):
        np.testing.assert_array_equal(got[i], psa.attention(q, k, v, **kwargs))
    # k, v shared (not mapped); with LSE
    fn = jax.vmap(lambda q, k, v: pjax.attention(q, k, v, return_lse=True, **kwargs),
                  in_axes=(0, None, None))
    out, lse = fn(qs, ks[0], vs[0])
    for i in range(3):
        o, l_ = psa.attention(qs[i], ks[0], vs[0], return_lse=True, **kwargs)
        np.testing.assert_array_equal(as_np(out)[i], o)
        np.testing.assert_array_equal(as_np(lse)[i], l_)
    # q shared, k and v mapped
    out = jax.vmap(lambda q, k, v: pjax.attention(q, k, v, **kwargs), in_axes=(None, 0, 0))(
        qs[0], ks, vs)
    for i in range(3):
        np.testing.assert_array_equal(as_np(out)[i], psa.attention(qs[0], ks[i], vs[i],
                                                                   **kwargs))
    # nested vmap over two leading axes
    q4 = qs.reshape((3, 1) + qs.shape[1:])
    nested = jax.vmap(jax.vmap(lambda q, k, v: pjax.attention(q, k, v, **kwargs)))
    got = as_np(nested(q4, ks.reshape(q4.shape), vs.reshape(q4.shape)))
    for i, (q, k, v) in enumerate(items):
        np.testing.assert_array_equal(got[i, 0], psa.attention(q, k, v, **kwargs))


def test_threads_share_the_handler_cache():
    import threading

    inputs = [on_cpu(*video_qkv(seed=s)) for s in range(4)]
    expected = [psa.attention(*(np.asarray(x) for x in qkv), grid=GRID) for qkv in inputs]
    fn = jax.jit(lambda q, k, v: pjax.attention(q, k, v, grid=GRID))
    results, errors = {}, []

    def work(i):
        try:
            for _ in range(3):
                results[i] = as_np(fn(*inputs[i]))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(4):
        np.testing.assert_array_equal(results[i], expected[i])
    assert pjax.cache_info()["size"] == 1


def test_import_psa_does_not_import_jax():
    code = "import sys, psa; psa.attention; assert 'jax' not in sys.modules, 'jax imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))


def test_grad_is_refused():
    q, k, v = (jnp.asarray(x) for x in video_qkv())
    with pytest.raises(Exception):
        jax.grad(lambda q: pjax.attention(q, k, v, grid=GRID).sum())(q)


# ---- bad input ------------------------------------------------------------------------------
def test_bad_input_raises_at_trace_time():
    q, k, v = (jnp.asarray(x) for x in video_qkv(heads=4, kv_heads=2))
    cases = [
        (dict(q=q[0]), ValueError, "q: shape .* 3 dimensions"),
        (dict(q=q.astype(jnp.int32)), TypeError, "q: dtype int32"),
        (dict(k=k.astype(jnp.float16)), TypeError, "k: dtype float16 differs"),
        (dict(v=v[:, :1]), ValueError, "v: shape"),
        (dict(k=q[:, :3], v=q[:, :3]), ValueError, "k: 3 heads do not divide"),
        (dict(k=k[..., :32], v=v[..., :32]), ValueError, "k: shape"),
        (dict(layout="bxld"), ValueError, "layout = 'bxld'"),
        (dict(grid=(2, 16, 15)), ValueError, "grid = \\(2, 16, 15\\)"),
        (dict(grid=(2, 16)), ValueError, "grid = \\(2, 16\\)"),
        (dict(text_length=4), ValueError, "text_length = 4 needs grid"),
        (dict(step=-1), ValueError, "step = -1"),
        (dict(causal=1), TypeError, "causal = 1"),
        (dict(scale=0.0), ValueError, "scale = 0.0"),
        (dict(scale=1e39), ValueError, "scale = 1e\\+39"),
        (dict(return_lse="yes"), TypeError, "return_lse"),
        (dict(model=3), TypeError, "model = 3"),
        (dict(config=[1]), TypeError, "config = \\[1\\]"),
        (dict(config="model=Wan2.1_1.3b;oops"), ValueError, "'oops' is not name=value"),
        (dict(config="nonsense"), ValueError, "expected 'config' or 'model="),
    ]
    for change, error, match in cases:
        args = dict(q=q, k=k, v=v)
        kwargs = {name: value for name, value in change.items() if name not in args}
        args.update({name: value for name, value in change.items() if name in args})
        with pytest.raises(error, match=match):
            jax.jit(lambda q, k, v: pjax.attention(q, k, v, **kwargs))(
                args["q"], args["k"], args["v"])


def test_library_rejections_are_psa_errors_at_trace_time():
    q, k, v = (jnp.asarray(x) for x in video_qkv())
    for kwargs, match in ((dict(model="NoSuchModel"), "NoSuchModel"),
                          (dict(preset="no_such_preset"), "no_such_preset"),
                          (dict(config={"no_such_key": 1}), "no_such_key"),
                          (dict(config={"sparsity": 1.5, "type": "rf_v2"}), "sparsity")):
        with pytest.raises(psa.Error, match=match):
            pjax.attention(q, k, v, grid=GRID, **kwargs)


def test_step_outside_int64_is_a_value_error():
    q, k, v = (jnp.asarray(x) for x in video_qkv())
    for step in (2 ** 63, 2 ** 64 + 3, -(2 ** 63)):
        with pytest.raises(ValueError, match=r"step = %d: .*\[0, 2\*\*63 - 1\]" % step):
            jax.jit(lambda q, k, v: pjax.attention(q, k, v, grid=GRID, step=step))(q, k, v)
    top = jax.jit(lambda q, k, v: pjax.attention(q, k, v, grid=GRID, step=2 ** 63 - 1))
    np.testing.assert_array_equal(as_np(top(q, k, v)),
                                  as_np(pjax.attention(q, k, v, grid=GRID)))  # sparse both


def test_grid_is_checked_against_k_at_trace_time():
    # libpsa checks k's length against the grid, and q's too when the config rearranges
    # tokens; the same checks run at trace time.
    q, k, v = (jnp.asarray(x) for x in video_qkv())          # 512 tokens = GRID
    short = q[:, :, :256]
    half = (1, 16, 16)                                        # 256 tokens
    traced = []

    def attend(q, k, v, **kwargs):
        traced.append(1)
        return pjax.attention(q, k, v, **kwargs)

    cases = [  # (q, k, v, kwargs, error, match)
        (q, k[:, :, :256], v[:, :, :256], dict(grid=GRID), ValueError,
         r"grid = \(2, 16, 16\) .* the sequence has 256 tokens"),
        (short, k, v, dict(grid=GRID), ValueError, r"q: 256 tokens, but grid = \(2, 16, 16\)"),
        (short, k, v, dict(grid=half), ValueError, r"grid = \(1, 16, 16\) .* 512 tokens"),
        (q, k, v, dict(grid=GRID, causal=True), ValueError, "causal = True with grid"),
        (q, k, v, dict(grid=GRID, config={"causal": True}), ValueError, "causal = True"),
    ]
    for qq, kk, vv, kwargs, error, match in cases:
        traced.clear()
        with pytest.raises(error, match=match):
            jax.jit(lambda a, b, c: attend(a, b, c, **kwargs)).lower(qq, kk, vv)
        assert traced  # raised while tracing, before anything was compiled or run
    # queries of another length with a grid of the keys: fine without rearrangement, and
    # equal to psa.attention on the same arrays
    kwargs = dict(model="Wan2.1_1.3b", grid=GRID, config={"use_rearrange": False})
    out = jax.jit(lambda a, b, c: pjax.attention(a, b, c, **kwargs))(short, k, v)
    np.testing.assert_array_equal(as_np(out), psa.attention(
        np.asarray(short), np.asarray(k), np.asarray(v), **kwargs))
    # a dense preset never rearranges: causal with a grid runs
    kwargs = dict(model="Wan2.1_1.3b", preset="baseline", grid=GRID, causal=True)
    np.testing.assert_array_equal(as_np(pjax.attention(q, k, v, **kwargs)), psa.attention(
        np.asarray(q), np.asarray(k), np.asarray(v), **kwargs))


def _raw_call(q, k, v, **attrs):
    base = dict(config="model=Wan2.1_1.3b", grid_t=np.int64(0), grid_h=np.int64(0),
                grid_w=np.int64(0), text_length=np.int64(0), text_position=np.int64(0),
                layout=np.int64(0), causal=np.int64(0), scale=np.float64(0.0),
                step=np.int64(-1))
    base.update(attrs)
    call = jax.ffi.ffi_call(pjax.TARGET_NAME, jax.ShapeDtypeStruct(q.shape, q.dtype))
    return jax.block_until_ready(call(q, k, v, **base))


def test_handler_errors_carry_the_library_message():
    # The handler checks everything again: a direct ffi_call with bad attributes or
    # buffers raises with a message, never a crash.
    q, k, v = (jnp.asarray(x) for x in video_qkv())
    cases = [
        (dict(config="model=NoSuchModel"), "PSA_ERR_NOT_FOUND"),
        (dict(config="model=Wan2.1_1.3b;mask_ratios.1=2"), "mask_ratios.1"),
        (dict(config="model=Wan2.1_1.3b;type=nope"), "type = 'nope'"),
        (dict(config=""), "empty config key"),
        (dict(layout=np.int64(7)), "layout = 7"),
        (dict(grid_t=np.int64(2), grid_h=np.int64(16), grid_w=np.int64(15)),
         "PSA_ERR_"),
        (dict(grid_t=np.int64(2)), "grid: t, h and w"),
        (dict(text_position=np.int64(9)), "text_position = 9"),
        (dict(step=np.int64(-5)), "step = -5"),
        (dict(scale=np.float64(-1.0)), "scale"),
    ]
    for attrs, match in cases:
        with pytest.raises(Exception, match=match):
            _raw_call(q, k, v, **attrs)
    with pytest.raises(Exception, match="q: dtype"):
        _raw_call(q.astype(jnp.int32), k.astype(jnp.int32), v.astype(jnp.int32))
    with pytest.raises(Exception, match="k: rank"):
        _raw_call(q, k[0], v)
    with pytest.raises(Exception, match="k: dtype differs"):
        _raw_call(q, k.astype(jnp.float16), v)
    with pytest.raises(Exception, match="q: expected a 4-D array"):
        _raw_call(q[0], k[0], v[0])
    with pytest.raises(Exception, match="k: leading \\(vmapped\\) dims"):
        _raw_call(q[None], jnp.stack([k, k, k]), jnp.stack([v, v, v]))
    bad_lse = jax.ffi.ffi_call(pjax.TARGET_NAME, (jax.ShapeDtypeStruct(q.shape, q.dtype),
                                                  jax.ShapeDtypeStruct((1, 2, 7), jnp.float32)))
    with pytest.raises(Exception, match="lse: expected a float32 result"):
        jax.block_until_ready(bad_lse(q, k, v, config="model=Wan2.1_1.3b", grid_t=np.int64(0),
                                      grid_h=np.int64(0), grid_w=np.int64(0),
                                      text_length=np.int64(0), text_position=np.int64(0),
                                      layout=np.int64(0), causal=np.int64(0),
                                      scale=np.float64(0.0), step=np.int64(-1)))
    # the handler still works afterwards
    np.testing.assert_array_equal(as_np(_raw_call(q, k, v)), psa.attention(
        np.asarray(q), np.asarray(k), np.asarray(v)))


# ---- CUDA -----------------------------------------------------------------------------------
def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() and psa.cuda_available() else None


def _gpu_qkv(heads=2, kv_heads=None, batch=1, grid=(2, 16, 32), seed=0, layout="bhld"):
    q, k, v = video_qkv(grid=grid, heads=heads, kv_heads=kv_heads, batch=batch,
                        head_dim=128, seed=seed)
    if layout == "blhd":
        q, k, v = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q, k, v))
    return tuple(jax.device_put(jnp.asarray(x, jnp.bfloat16), CUDA[0]) for x in (q, k, v))


GPU_CASES = ["psa_preset", "dense_baseline", "rf_v2_preset", "ada_bsa_preset"]


@gpu
@pytest.mark.parametrize("case", GPU_CASES)
@pytest.mark.parametrize("layout", ["bhld", "blhd"])
def test_gpu_bf16_equals_psa_attention_and_cpu(case, layout):
    grid = (2, 16, 32)
    kwargs = dict(CASES[case], grid=grid, layout=layout)
    q, k, v = _gpu_qkv(heads=4, kv_heads=2, grid=grid, layout=layout)
    fn = jax.jit(lambda q, k, v: pjax.attention(q, k, v, return_lse=True, **kwargs))
    out, lse = jax.block_until_ready(fn(q, k, v))
    assert out.dtype == jnp.bfloat16 and list(out.devices())[0] == CUDA[0]
    again = jax.block_until_ready(fn(q, k, v))
    np.testing.assert_array_equal(as_np(again[0]), as_np(out))  # deterministic, warm
    # vs the CPU backend on the same bf16 data. Dense: the same math up to summation order
    # and the bf16 rounding of P and of the result (a few 1e-3 relative), LSE to f32
    # accuracy. Sparse methods: their block choices (importance scores in another precision)
    # may differ where scores tie, so twice the bound, and LSE relative to its size.
    cpu_out, cpu_lse = pjax.attention(*on_cpu(q, k, v), return_lse=True, **kwargs)
    assert cpu_out.devices() == {CPU}
    o64, c64 = (as_np(x).astype(np.float64) for x in (out, cpu_out))
    l64, cl64 = as_np(lse).astype(np.float64), as_np(cpu_lse).astype(np.float64)
    assert np.isfinite(o64).all() and np.isfinite(l64).all(), case
    if case == "dense_baseline":
        assert rel_l2(o64, c64) < 1e-2, (case, rel_l2(o64, c64))
        assert np.abs(l64 - cl64).max() < 1e-3, (case, np.abs(l64 - cl64).max())
    else:
        assert rel_l2(o64, c64) < 2e-2, (case, rel_l2(o64, c64))
        assert rel_l2(l64, cl64) < 1e-2, (case, rel_l2(l64, cl64))
    torch = _torch_cuda()
    if torch is None:
        return
    # vs psa.attention on the same device data in PyTorch: the same kernels, bit for bit
    tq, tk, tv = (torch.from_dlpack(x) for x in (q, k, v))
    t_out, t_lse = psa.attention(tq, tk, tv, return_lse=True, **kwargs)
    torch.cuda.synchronize()
    assert torch.equal(torch.from_dlpack(out), t_out), case
    assert torch.equal(torch.from_dlpack(lse), t_lse), case


@gpu
def test_gpu_jit_repeated_vmap_and_cache():
    grid = (2, 16, 32)
    kwargs = dict(model="Wan2.1_1.3b", grid=grid)
    q, k, v = _gpu_qkv(batch=1, grid=grid)
    traces = []

    def f(q, k, v):
        traces.append(1)
        return pjax.attention(q, k, v, **kwargs)

    fn = jax.jit(f)
    first = jax.block_until_ready(fn(q, k, v))
    for _ in range(5):
        out = fn(q, k, v)
    jax.block_until_ready(out)
    assert len(traces) == 1
    np.testing.assert_array_equal(as_np(out), as_np(first))
    info = pjax.cache_info()
    assert info["size"] == 1 and info["hits"] == 5, info
    # vmap over a stack on the device equals the per-item calls
    items = [_gpu_qkv(grid=grid, seed=s) for s in range(2)]
    stacked = [jnp.stack([it[i] for it in items]) for i in range(3)]
    got = as_np(jax.jit(jax.vmap(lambda q, k, v: pjax.attention(q, k, v, **kwargs)))(
        *stacked))
    for i, it in enumerate(items):
        np.testing.assert_array_equal(got[i], as_np(fn(*it)))


@gpu
def test_gpu_library_rejection_has_the_message():
    # the CUDA kernels take head_dim 64 or 128: 96 is rejected by libpsa when the call runs
    q = jax.device_put(jnp.ones((1, 2, 256, 96), jnp.bfloat16), CUDA[0])
    with pytest.raises(Exception, match="PSA_ERR_"):
        jax.block_until_ready(pjax.attention(q, q, q))


@gpu
def test_gpu_float32_is_refused_with_a_hint():
    # eager: at once, naming the device; jitted: libpsa's message when the call runs
    q = jax.device_put(jnp.ones((1, 2, 256, 128), jnp.float32), CUDA[0])
    with pytest.raises(TypeError, match="float32 arrays on .*float16 or bfloat16"):
        pjax.attention(q, q, q)
    with pytest.raises(Exception, match="PSA_ERR_UNSUPPORTED"):
        jax.block_until_ready(jax.jit(lambda q: pjax.attention(q, q, q))(q))


@gpu
def test_gpu_large_workspace():
    # the benchmark's shape (Wan2.1-1.3B 480p, ~300 MB of workspace for a PSA preset)
    grid = (21, 30, 52)
    q, k, v = _gpu_qkv(heads=12, grid=grid, layout="blhd")
    fn = jax.jit(lambda q, k, v: pjax.attention(q, k, v, model="Wan2.1_1.3b", grid=grid,
                                               layout="blhd"))
    out = jax.block_until_ready(fn(q, k, v))
    again = jax.block_until_ready(fn(q, k, v))
    assert out.shape == q.shape and np.isfinite(as_np(out).astype(np.float32)).all()
    np.testing.assert_array_equal(as_np(again), as_np(out))
