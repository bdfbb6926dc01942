# bindings/python/tests/test_hostile.py -- hostile arguments to the one-call layer, the
# sequence-parallel helpers and the diagnostics: each fails with psa.Error, TypeError or
# ValueError naming the argument (never MemoryError, OverflowError or IndexError), and writes
# nothing.
import os
import threading

import numpy as np
import pytest

import psa
from conftest import ArrayInterfaceOnly, DLPackOnly


def _qkv(length=256):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 2, length, 32)).astype(np.float32)
    return q, q.copy(), q.copy()


def _fake_huge():
    """A stride-0 array claiming 2^60 elements (4 EiB): never to be allocated for."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.float32),
                                           shape=(2**20, 2**20, 2**20, 1), strides=(0, 0, 0, 4))


@pytest.mark.parametrize("call", ["attention", "sparse_attention", "forward"])
def test_huge_broadcast_is_refused_before_allocating(call):
    big = _fake_huge()
    with pytest.raises(psa.Error, match="strides"):
        if call == "attention":
            psa.attention(big, big, big)
        elif call == "sparse_attention":
            psa.sparse_attention(big, big, big)
        else:
            with psa.Context(psa.Config(), backend="cpu") as ctx:
                ctx.forward(big, big, big)


@pytest.mark.parametrize("grid", [(float("inf"), 16, 16), (float("nan"), 16, 16)])
def test_grid_of_non_finite_floats(grid):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="grid"):
        psa.attention(q, k, v, grid=grid)
    with pytest.raises(ValueError, match="latent_shape_q"):
        psa.sparse_attention(q, k, v, sparse_type="rf_v2", latent_shape_q=grid)
    with pytest.raises(ValueError, match="grid"):
        psa.sequence_order(grid)


@pytest.mark.parametrize("name", ["step", "head_offset", "batch_offset"])
def test_ints_beyond_int64(name):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=name):
        psa.attention(q, k, v, **{name: 2**70})


def test_lse_buffer_of_another_dtype():
    q, k, v = _qkv()
    with psa.Context(psa.Config(), backend="cpu") as ctx:
        for lse in (np.full(1024, 7.0, np.float64), np.full(2048, 7, np.int8)):
            with pytest.raises(ValueError, match="lse: dtype"):
                ctx.forward(q, k, v, lse=lse)
            assert (lse == 7).all()


def test_sequence_order_too_long_to_allocate():
    with psa.Context(psa.Config.load("Wan2.1_1.3b"), backend="cpu") as ctx:
        ctx.set_video_grid(1, 4, 4)
        with pytest.raises(psa.Error, match="seq_len"):
            ctx.sequence_order(2**40)        # does not match the grid: no allocation
        ctx.clear_video_grid()
        with pytest.raises(psa.Error, match="seq_len"):
            ctx.sequence_order(2**62)        # identity of 2^62 tokens: cannot be allocated
        with pytest.raises(ValueError, match="seq_len"):
            ctx.sequence_order(2**70)
        # 2^40 tokens: an order NumPy may reserve (8 TB) on a machine that overcommits, which
        # the library must refuse before anyone writes it (past 2^31 - 1 tokens).
        with pytest.raises(psa.Error, match="2\\^31 - 1"):
            ctx.sequence_order(2**40)
    with pytest.raises(psa.Error, match="2\\^31 - 1"):
        psa.sequence_order((1, 2**20, 2**20))


def test_config_text_arguments_are_named():
    # Every text argument that libpsa reads as C text: a wrong type is a TypeError naming the
    # argument (not SWIG's "argument 1 of type 'char const *'"); a NUL is a ValueError (load's
    # yaml= read only the text before it: "a\0..." loaded "a").
    text = psa.capi.psa_embedded_config_yaml()
    with pytest.raises(TypeError, match="model = 3: expected a str"):
        psa.Config.load(3)
    with pytest.raises(TypeError, match="model = None"):
        psa.Config.load(None)
    with pytest.raises(TypeError, match="preset = 3: expected a str"):
        psa.Config.load("Wan2.1_1.3b", 3)
    with pytest.raises(TypeError, match="yaml = b'x': expected a str"):
        psa.Config.load("Wan2.1_1.3b", yaml=b"x")
    with pytest.raises(ValueError, match="yaml = .*: must not contain a NUL"):
        psa.Config.load("Wan2.1_1.3b", yaml=text + "\0junk")
    with pytest.raises(ValueError, match="model = .*not valid UTF-8"):
        psa.Config.load("Wan\udc80")
    with pytest.raises(TypeError, match="yaml = 5: expected a str"):
        psa.presets(yaml=5)
    with pytest.raises(TypeError, match="path = 5: expected a str, bytes or os.PathLike"):
        psa.presets(path=5)
    with pytest.raises(ValueError, match="path= or yaml=, not both"):
        psa.presets(path="x.yaml", yaml=text)
    # Paths as str, bytes or os.PathLike all open the file.
    path = psa.__file__  # any readable file: its YAML error names the path
    for p in (path, path.encode(), __import__("pathlib").Path(path)):
        with pytest.raises(psa.Error, match="__init__.py"):
            psa.Config.load("Wan2.1_1.3b", path=p)


def test_config_keys_and_values():
    cfg = psa.Config()
    with pytest.raises(ValueError, match="NUL"):
        cfg["seed\0anything"] = 1
    with pytest.raises(ValueError, match="NUL"):
        cfg["seed\0anything"]
    with pytest.raises(ValueError, match="NUL"):
        psa.Config.load("Wan2.1_1.3b\0junk")
    with pytest.raises(ValueError, match="NUL"):
        psa.Context("Wan2.1_1.3b\0junk", backend="cpu")
    # The catalog too: "/etc/passwd\0.yaml" must not open /etc/passwd.
    with pytest.raises(ValueError, match="path = '/etc/passwd\\\\x00.yaml': must not contain a NUL"):
        psa.presets(path="/etc/passwd\0.yaml")
    with pytest.raises(ValueError, match="yaml = .*: must not contain a NUL"):
        psa.presets(yaml="Wan:\n  default_attention: p\0[[[")
    with pytest.raises(ValueError, match="config key"):
        cfg[2**70]
    for key, value in (("seed", [1]), ("sparsity", None), ("sparsity", 1j), ("seed", {})):
        with pytest.raises(TypeError, match=key):
            cfg[key] = value
    for value in (2**70, 1e30, -2**64):
        with pytest.raises(ValueError, match="seed"):
            cfg["seed"] = value
    assert cfg["seed"] == 0
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="NUL"):
        psa.attention(q, k, v, config={"seed\0x": 1})


def test_plot_mask_arguments(tmp_path):
    q, k, v = _qkv()
    with psa.Context(psa.Config(), backend="cpu") as ctx:
        ctx.forward(q, k, v)
        target = tmp_path / "m.png"
        with pytest.raises(ValueError, match="NUL"):
            psa.plot_mask(ctx, str(target) + "\0.zzz")
        assert not target.exists()
        for kwargs, name in (({"batch": 2**70}, "batch"), ({"cell": 2**40}, "cell"),
                             ({"batch": 2.5}, "batch"), ({"head": True}, "head"),
                             ({"query_position": (2**70, 1, 1)}, "query_position")):
            with pytest.raises((TypeError, ValueError), match=name):
                psa.plot_mask(ctx, target, view="video" if "query_position" in kwargs
                              else "blocks", **kwargs)
        assert not target.exists()
        with pytest.raises(ValueError, match="view"):
            psa.plot_mask(ctx, target, view=[])
        with pytest.raises(ValueError, match="sequence"):
            ctx.token_order([])
        with pytest.raises(psa.Error, match="path"):
            psa.plot_mask(ctx, tmp_path)
    levels = np.ones((1, 2, 3, 4), np.int8)
    for batch in (5, 1.5):
        with pytest.raises((TypeError, ValueError), match="batch"):
            psa.plot_mask(levels, target, batch=batch)
    with pytest.raises(psa.Error, match="cell = 64"):
        psa.plot_mask(np.ones((64, 1024, 1024), np.int8), target, cell=64)
    assert not target.exists()


def test_sparse_type_unhashable():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="sparse_type"):
        psa.sparse_attention(q, k, v, sparse_type=[])


def test_merge_out_overlapping_a_part():
    rng = np.random.default_rng(1)
    buf = np.zeros((1, 2, 9, 4), np.float32)
    buf[:, :, :8] = rng.standard_normal((1, 2, 8, 4))
    before = buf.copy()
    other = rng.standard_normal((1, 2, 8, 4)).astype(np.float32)
    lse = np.zeros((1, 2, 8), np.float32)
    with pytest.raises(psa.Error, match="out: overlaps outs"):
        psa.merge_attention([buf[:, :, :8], other], [lse, lse.copy()], out=buf[:, :, 1:])
    np.testing.assert_array_equal(buf, before)


def test_merge_names_the_parts_descriptor():
    with pytest.raises(psa.Error, match="desc"):
        psa.merge_attention([np.zeros((1, 0, 8, 4), np.float32)], [np.zeros((1, 0, 8),
                                                                            np.float32)])


def test_clear_cache_while_calls_run():
    q, k, v = _qkv()
    errors = []

    def work():
        for _ in range(20):
            try:
                psa.attention(q, k, v)
            except Exception as e:  # noqa: BLE001 -- collected and asserted below
                errors.append(repr(e))

    def clear():
        for i in range(40):
            psa.clear_cache()
            psa.set_cache_capacity(1 + i % 3)

    threads = [threading.Thread(target=work) for _ in range(3)] + [threading.Thread(target=clear)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    psa.set_cache_capacity(64)
    assert errors == []


def test_context_integer_arguments_are_named():
    cfg = psa.Config.load("Wan2.1_1.3b")
    with pytest.raises(ValueError, match="device = 1180591620717411303424: outside int32"):
        psa.Context(cfg, backend="cpu", device=2**70)
    with psa.Context(cfg, backend="cpu") as ctx:
        for call, match in ((lambda: ctx.set_video_grid(2**70, 16, 16), "t = "),
                            (lambda: ctx.set_video_grid(2, 16, 16, text_length=2**64), "text_length = "),
                            (lambda: ctx.set_video_pixels(81, 2**65, 832), "height = "),
                            (lambda: ctx.set_step(2**63), "step = ")):
            with pytest.raises(ValueError, match=match):
                call()
        with pytest.raises(TypeError, match="step = True: expected an int"):
            ctx.set_step(True)
        with pytest.raises(TypeError, match="w = 16.5: expected an int"):
            ctx.set_video_grid(2, 16, 16.5)
        ctx.set_video_grid(2, 16, 16)   # still usable
        assert ctx.next_step()[0] == 0


@pytest.mark.parametrize("wrap", [ArrayInterfaceOnly, DLPackOnly])
def test_arrays_without_a_shape_attribute(wrap):
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((1, 2, 256, 32)).astype(np.float32) for _ in range(3))
    ref = psa.attention(q, k, v)
    out = np.full_like(q, 7)
    psa.attention(wrap(q), wrap(k), wrap(v), out=out)
    np.testing.assert_array_equal(out, ref)
    out[...] = 7
    psa.sparse_attention(wrap(q), wrap(k), wrap(v), sparse_type="ada_bsa", sparsity=0.5,
                         out=out)
    np.testing.assert_array_equal(out, psa.sparse_attention(q, k, v, sparse_type="ada_bsa",
                                                            sparsity=0.5))
    with pytest.raises(ValueError, match=r"q: shape \(2, 256, 32\) has 3 dimensions"):
        psa.attention(wrap(q[0]), wrap(k[0]), wrap(v[0]), out=out)
    with pytest.raises(ValueError, match=r"query: shape \(2, 256, 32\) has 3 dimensions"):
        psa.sparse_attention(wrap(q[0]), wrap(k[0]), wrap(v[0]), out=out)


def test_attention_docstring_says_the_array_interface_is_trusted():
    assert "trusted as NumPy trusts them" in " ".join(psa.attention.__doc__.split())


def _random_levels(rng, shape):
    return rng.choice(np.array([0, 1, 2, 4, 8], np.int8), size=shape)


@pytest.mark.parametrize("bad", [7, -1, 300.7, float("nan"), 3.5, 256 + 1])
def test_plot_mask_level_values(tmp_path, bad):
    rng = np.random.default_rng()
    target = tmp_path / "m.png"
    levels = _random_levels(rng, (2, 3, 4, 5)).astype(np.float64 if isinstance(bad, float)
                                                       else np.int64)
    index = tuple(int(rng.integers(0, n)) for n in levels.shape)
    levels[index] = bad
    first = tuple(int(i) for i in np.argwhere(~np.isin(levels, (0, 1, 2, 4, 8)))[0])
    with pytest.raises(ValueError, match=r"levels: value %s at index %s; expected 0 "
                       r"\(skipped\), 1, 2, 4 or 8" % (
                           "nan" if bad != bad else str(levels[first].item()).replace(".", r"\."),
                           str(first).replace("(", r"\(").replace(")", r"\)"))):
        psa.plot_mask(levels, target)
    assert not target.exists()
    with pytest.raises(ValueError, match="levels: value"):
        psa.plot_mask(np.full((2, 4, 4), bad), target)
    assert not target.exists()


def test_plot_mask_level_dtypes_and_integral_floats(tmp_path):
    rng = np.random.default_rng()
    levels = _random_levels(rng, (2, 3, 4))
    target = tmp_path / "a.png"
    assert psa.plot_mask(levels.astype(np.float32), target) == str(target)
    first = target.read_bytes()
    target.unlink()
    psa.plot_mask(levels.astype(np.uint8), target)
    assert target.read_bytes() == first
    target.unlink()
    for wrong in (levels.astype(bool), levels.astype(np.complex64), levels.astype(str)):
        with pytest.raises(TypeError, match="levels: dtype"):
            psa.plot_mask(wrong, target)
    assert not target.exists()


def test_plot_mask_query_arguments_outside_the_video_view(tmp_path):
    target = tmp_path / "m.png"
    levels = _random_levels(np.random.default_rng(), (1, 2, 2))
    q, k, v = _qkv()
    with psa.Context(psa.Config(), backend="cpu") as ctx:
        ctx.forward(q, k, v)
        for source in (levels, ctx):
            with pytest.raises(ValueError, match="query_block = 1: only the video view"):
                psa.plot_mask(source, target, query_block=1)
            with pytest.raises(ValueError, match=r"query_position = \(0, 1, 1\): only the "
                                                 r"video view"):
                psa.plot_mask(source, target, query_position=(0, 1, 1))
        assert not target.exists()


def test_plot_mask_path_and_source(tmp_path):
    levels = _random_levels(np.random.default_rng(), (1, 2, 2))
    bad = os.fsencode(str(tmp_path)) + b"/m\xff.png"
    with pytest.raises(ValueError, match="path = .*not valid UTF-8"):
        psa.plot_mask(levels, bad)
    with pytest.raises(ValueError, match="path = .*not valid UTF-8"):
        psa.plot_mask(levels, os.fsdecode(bad))
    with pytest.raises(TypeError, match="path = 3"):
        psa.plot_mask(levels, 3)
    assert os.listdir(tmp_path) == []
    good = os.fsencode(str(tmp_path / "m.png"))
    assert psa.plot_mask(levels, good) == str(tmp_path / "m.png")

    class Fake:
        handle = 12345

    with pytest.raises(TypeError, match=r"source: a Fake whose \.handle \(int\) is not a "
                                        r"libpsa context"):
        psa.plot_mask(Fake(), tmp_path / "f.png")
    with pytest.raises(ValueError, match="levels: expected .* got shape \\(\\)"):
        psa.plot_mask(None, tmp_path / "f.png")
    assert not (tmp_path / "f.png").exists()


def test_forward_mode_ad_is_refused():
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as fwAD

    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    q, k, v = (torch.randn(1, 2, 256, 32, generator=g) for _ in range(3))
    with fwAD.dual_level():
        dual = fwAD.make_dual(q, torch.randn(q.shape, generator=g))
        with pytest.raises(RuntimeError, match="q is a dual tensor .forward-mode AD.: libpsa is "
                                               "inference only"):
            psa.attention(dual, k, v)
    out = psa.attention(q, k, v)  # the same tensors outside the dual level run
    assert torch.isfinite(out).all()


def test_torch_tensors_without_strided_storage_are_named():
    torch = pytest.importorskip("torch")
    import psa.torch as pt

    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    q = torch.randn(1, 2, 64, 32, generator=g)
    nested = torch.nested.nested_tensor([torch.randn(2, 64, 32, generator=g)])
    for call in (psa.attention, pt.attention):
        with pytest.raises(TypeError, match="k: layout torch.sparse_coo is not supported"):
            call(q, q.to_sparse(), q)
        with pytest.raises(TypeError, match="v: a nested tensor is not supported"):
            call(q, q, nested)


def test_out_that_requires_grad_is_refused_and_unwritten():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
    q, k, v = (torch.randn(1, 2, 128, 32, generator=g) for _ in range(3))
    out = torch.zeros(1, 2, 128, 32, requires_grad=True)
    with pytest.raises(RuntimeError, match="out requires grad: libpsa is inference only"):
        psa.attention(q, k, v, out=out)
    assert not out.detach().any()
    with torch.no_grad():  # autograd off: the write is the caller's business, as in torch
        psa.attention(q, k, v, out=out)
    assert torch.equal(out.detach(), psa.attention(q, k, v))
