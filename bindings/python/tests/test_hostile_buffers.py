# bindings/python/tests/test_hostile_buffers.py -- flat buffers (workspace, lse, levels,
# merge lses) and array memory handed to the CPU backend: strided 1-D views, CUDA objects
# and workspaces beyond the machine's memory are refused with an error naming the argument,
# before libpsa gets a pointer, and nothing is written.
import numpy as np
import pytest

import psa
import psa._tensors as tensors
from conftest import ArrayInterfaceOnly, DLPackOnly

torch = pytest.importorskip("torch")


def _qkv(length=256, heads=2, dim=32):
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((1, heads, length, dim)).astype(np.float32)
               for _ in range(3))
    return q, k, v


def _sparse_context():
    cfg = psa.Config.load("Wan2.1_1.3b")
    cfg["use_rearrange"] = False
    ctx = psa.Context(cfg, backend="cpu")
    ctx.set_step(int(cfg["warmup_steps"]))
    return ctx


class CudaInterface:
    """Host memory announced through __cuda_array_interface__ (as a CuPy or Numba array
    announces device memory): a CPU context must not take it."""

    def __init__(self, a):
        self.a = a
        self.shape = a.shape

    @property
    def __cuda_array_interface__(self):
        iface = dict(self.a.__array_interface__)
        iface["version"] = 3
        return iface


class RawInterface:
    """An array interface with explicit strides (NumPy leaves them out when contiguous)."""

    def __init__(self, a, shape, strides):
        self.a = a
        self.__array_interface__ = {"version": 3, "typestr": "<f4", "shape": shape,
                                    "strides": strides, "data": (a.ctypes.data, False)}


# ---- strided 1-D buffers ---------------------------------------------------------------------
def test_reversed_workspace_is_refused():
    q, k, v = _qkv()
    with _sparse_context() as ctx:
        n = ctx.workspace_size(q, k, v)
        assert n > 0
        ws = np.full(n, 7, np.uint8)
        with pytest.raises(ValueError, match=r"workspace: must be contiguous \(shape \(%d,\), "
                           r"strides \(-1,\) bytes\)" % n):
            ctx.forward(q, k, v, workspace=ws[::-1])
        with pytest.raises(ValueError, match="workspace: must be contiguous"):
            ctx.forward(q, k, v, workspace=torch.from_numpy(np.full(2 * n, 7, np.uint8))[::2])
        assert (ws == 7).all()
        out = ctx.forward(q, k, v, workspace=ws)  # the buffer itself is fine
        np.testing.assert_allclose(out, ctx.forward(q, k, v), rtol=0, atol=0)


def test_stepped_lse_is_refused_and_nothing_is_written():
    q, k, v = _qkv()
    rows = q.shape[0] * q.shape[1] * q.shape[2]
    with _sparse_context() as ctx:
        p = np.full(4 * rows, 7, np.float32)
        out = np.full_like(q, 7)
        for lse, unit in ((p[::2], "bytes"), (ArrayInterfaceOnly(p[::2]), "bytes"),
                          (DLPackOnly(p[::2]), "elements"), (torch.from_numpy(p)[::2], "elements")):
            with pytest.raises(ValueError, match="lse: must be contiguous .*%s" % unit):
                ctx.forward(q, k, v, out=out, lse=lse)
        assert (p == 7).all() and (out == 7).all()
        # Dimensions of extent 1 may have any stride; an interface-only lse is fine too.
        _, ref = ctx.forward(q, k, v, lse=True)
        backing = np.zeros(rows, np.float32)
        odd = RawInterface(backing, q.shape[:3], (12345, 4 * q.shape[2], 4))
        ctx.forward(q, k, v, lse=odd)
        np.testing.assert_array_equal(backing, ref.ravel())
        flat = np.zeros(rows, np.float32)
        ctx.forward(q, k, v, lse=ArrayInterfaceOnly(flat))
        np.testing.assert_array_equal(flat, ref.ravel())


def test_lse_of_another_dtype_through_the_interface():
    q, k, v = _qkv()
    with _sparse_context() as ctx:
        buf = np.full(2 * q.shape[1] * q.shape[2], 7, np.int32)
        with pytest.raises(ValueError, match="lse: dtype int32; expected float32"):
            ctx.forward(q, k, v, lse=ArrayInterfaceOnly(buf))
        assert (buf == 7).all()


def test_stepped_level_map_buffer_is_refused():
    q, k, _ = _qkv(512)
    with _sparse_context() as ctx:
        count = 1 * 2 * 4 * 4  # 512 tokens in blocks of 128
        backing = np.full(2 * count, 7, np.int8)
        with pytest.raises(ValueError, match="levels: must be contiguous"):
            ctx.compute_level_map(q, k, levels=backing[::2])
        assert (backing == 7).all()
        with pytest.raises(ValueError, match="levels: dtype float32; expected int8"):
            ctx.compute_level_map(q, k, levels=np.zeros(count // 4, np.float32))
        levels = np.full(count, 7, np.int8)
        ctx.compute_level_map(q, k, levels=levels)
        assert set(np.unique(levels)) <= {0, 1, 2, 4, 8}


def test_shard_levels_must_cover_the_queries():
    q, k, v = _qkv(512)
    with _sparse_context() as ctx:
        levels = ctx.compute_level_map(q[:, :, 128:], k)  # 3 query blocks, q has 4
        with pytest.raises(ValueError, match=r"levels: shape \(1, 2, 3, 4\); expected "
                                             r"\[1, 2, 4, Nk\]"):
            ctx.shard_attention(q, k[:, :, :256], v[:, :, :256], levels, 0)
        with pytest.raises(ValueError, match="levels: must be contiguous"):
            ctx.shard_attention(q[:, :, 128:], k[:, :, :256], v[:, :, :256],
                                levels[:, :, :, ::2], 0)
        ctx.shard_attention(q[:, :, 128:], k[:, :, :256], v[:, :, :256], levels, 0)


def test_stepped_merge_lse_is_refused():
    rng = np.random.default_rng()
    outs = [rng.standard_normal((1, 2, 8, 4)).astype(np.float32) for _ in range(2)]
    lses = [rng.standard_normal((1, 2, 8)).astype(np.float32) for _ in range(2)]
    stepped = np.repeat(lses[1].ravel(), 2)[::2]  # 16 floats, the right count
    with pytest.raises(ValueError, match=r"lses\[1\]: must be contiguous"):
        psa.merge_attention(outs, [lses[0], stepped])


def test_buffer_descriptions_of_every_kind():
    p = np.arange(64, dtype=np.float32)
    for obj in (p[::2], ArrayInterfaceOnly(p[::-1]), CudaInterface(p[::4]), DLPackOnly(p[::2]),
                torch.from_numpy(p)[::2]):
        with pytest.raises(ValueError, match="buf: must be contiguous"):
            tensors.describe_flat(obj, "buf")
    for obj, nbytes, device in ((p, 256, "cpu"), (ArrayInterfaceOnly(p), 256, "cpu"),
                                (CudaInterface(p), 256, "cuda"), (DLPackOnly(p), 256, "cpu"),
                                (torch.from_numpy(p), 256, "cpu"),
                                (torch.from_numpy(p).view(4, 16)[1:2], 64, "cpu"),
                                (RawInterface(p, (1, 8), (4000, 4)), 32, "cpu"),
                                (np.zeros((4, 0, 3), np.float32)[:, :, ::2], 0, "cpu")):
        described = tensors.describe_flat(obj, "buf")
        assert described[1:3] == (nbytes, device)
    with pytest.raises(ValueError, match="buf: is read-only"):
        ro = p.copy()
        ro.flags.writeable = False
        tensors.describe_flat(ro, "buf")
    with pytest.raises(TypeError, match="buf: list is not a buffer"):
        tensors.describe_flat([1.0], "buf")


# ---- memory of the other backend -------------------------------------------------------------
def test_cuda_arrays_on_a_cpu_context_are_refused():
    q, k, v = _qkv()
    with _sparse_context() as ctx:
        assert ctx.backend == "cpu"
        sentinel = np.full_like(q, 7)
        match = (r"q: a CUDA array; this context runs on the CPU backend \(pass host "
                 r"memory\)")
        with pytest.raises(ValueError, match=match):
            ctx.forward(CudaInterface(q), CudaInterface(k), CudaInterface(v),
                        out=CudaInterface(sentinel))
        with pytest.raises(ValueError, match=match):
            ctx.compute_level_map(CudaInterface(q), CudaInterface(k))
        with pytest.raises(ValueError, match=match):
            ctx.shard_attention(CudaInterface(q), CudaInterface(k), CudaInterface(v),
                                np.ones((1, 2, 2, 2), np.int8), 0)
        n = ctx.workspace_size(q, k, v)
        ws = np.full(n, 7, np.uint8)
        with pytest.raises(ValueError, match="workspace: a CUDA array; this context runs on "
                                             "the CPU backend"):
            ctx.forward(q, k, v, out=sentinel, workspace=CudaInterface(ws))
        lse = np.full(q.shape[:3], 7, np.float32)
        with pytest.raises(ValueError, match="lse: a CUDA array; this context runs on the "
                                             "CPU backend"):
            ctx.forward(q, k, v, out=sentinel, lse=CudaInterface(lse))
        with pytest.raises(ValueError, match="levels: a CUDA array; this context runs on "
                                             "the CPU backend"):
            ctx.compute_level_map(q, k, levels=CudaInterface(np.full((1, 2, 2, 2), 7,
                                                                     np.int8)))
        with pytest.raises(ValueError, match="levels: a CUDA array"):
            ctx.shard_attention(q, k, v, CudaInterface(np.ones((1, 2, 2, 2), np.int8)), 0)
        with pytest.raises(ValueError, match="out is on cuda"):
            ctx.forward(q, k, v, out=CudaInterface(sentinel))
        assert (sentinel == 7).all() and (ws == 7).all() and (lse == 7).all()


def test_backend_check_names_both_devices():
    from psa._context import check_backend

    with pytest.raises(ValueError, match=r"q: a CUDA array \(device 1\); this context runs "
                                         r"on the CPU backend"):
        check_backend("cpu", "q", "cuda", 1)
    with pytest.raises(ValueError, match="workspace: a host array; this context runs on the "
                                         "CUDA backend"):
        check_backend("cuda", "workspace", "cpu", 0)
    check_backend("cuda", "q", "cuda", -1)
    check_backend("cpu", "q", "cpu", 0)


# ---- workspaces beyond the machine -----------------------------------------------------------
def test_workspace_beyond_host_memory_is_refused_before_allocating(monkeypatch):
    x = np.zeros((1, 1, 2**24, 1), np.float16)  # 32 MB of input, hundreds of GB of workspace
    monkeypatch.setattr(tensors, "host_memory_bytes", lambda: 16 * 2**30)
    allocated = []
    real_empty = np.empty

    def spy(shape, *args, **kwargs):
        allocated.append(shape)
        return real_empty(shape, *args, **kwargs)

    with _sparse_context() as ctx:
        need = ctx.workspace_size(x, x, x)
        assert need > 16 * 2**30
        match = (r"workspace: this shape needs %.3g GB of host memory; this machine has "
                 r"17.2 GB" % (need * 1e-9))
        monkeypatch.setattr(np, "empty", spy)
        with pytest.raises(psa.Error, match=match) as info:
            ctx.forward(x, x, x, out=np.empty_like(x))
        assert info.value.name == "PSA_ERR_OUT_OF_MEMORY"
        with pytest.raises(psa.Error, match=match):
            ctx.forward(torch.from_numpy(x), torch.from_numpy(x), torch.from_numpy(x))
        assert not any(isinstance(s, tuple) and s and s[0] == need for s in allocated)
    with pytest.raises(psa.Error, match="workspace: this shape needs .* GB of host memory"):
        psa.attention(x, x, x, out=np.empty_like(x))
    monkeypatch.undo()
    psa.clear_cache()
