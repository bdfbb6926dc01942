# bindings/python/tests/test_forward.py -- forward on the CPU backend from NumPy arrays and
# from DLPack-only / array-interface-only objects: layouts and strides read from the
# objects, caller-given and allocated outputs, lse, and the library's errors.
import numpy as np
import pytest

import psa
from conftest import GRID, ArrayInterfaceOnly, DLPackOnly, reference, rel_l2, video_qkv


def dense_forward(dense_config, q, k, v, **kw):
    with psa.Context(dense_config, backend="cpu") as ctx:
        return ctx.forward(q, k, v, **kw)


def test_dense_matches_numpy_reference(dense_config, qkv):
    q, k, v = qkv
    out, lse = dense_forward(dense_config, q, k, v, lse=True)
    ref, ref_lse = reference(q, k, v)
    assert out.dtype == np.float32 and out.shape == q.shape
    assert np.abs(out - ref).max() < 1e-4
    assert lse.shape == q.shape[:3] and np.abs(lse - ref_lse).max() < 1e-4


def test_sparse_forward_is_close_to_dense_and_sparse(sparse_config):
    grid = (4, 16, 16)  # 8 x 8 blocks: enough for the mask to keep most of the mass
    q, k, v = video_qkv(grid)
    with psa.Context(sparse_config, backend="cpu") as ctx:
        ctx.set_video_grid(*grid)
        ctx.set_step(sparse_config["warmup_steps"])
        out = ctx.forward(q, k, v)
        stats = ctx.stats()
    assert not stats.ran_dense and stats.query_blocks == 8 and stats.key_blocks == 8
    assert 0.0 < stats.density < 1.0
    assert abs(sum(stats.level_fraction.values()) - 1.0) < 1e-9
    assert stats.stage_ms["total"] > 0.0
    error = rel_l2(out, reference(q, k, v)[0])
    assert error < 0.3, error


def test_warmup_forward_runs_dense(sparse_config, dense_config, qkv):
    q, k, v = qkv
    with psa.Context(sparse_config, backend="cpu") as ctx:
        ctx.set_video_grid(*GRID)
        out = ctx.forward(q, k, v)  # step 0 < warmup_steps
        assert ctx.stats().ran_dense and ctx.stats().density == 1.0
    assert np.abs(out - dense_forward(dense_config, q, k, v)).max() < 1e-5


def test_out_is_written_in_place(dense_config, qkv):
    q, k, v = qkv
    out = np.full_like(q, np.nan)
    result = dense_forward(dense_config, q, k, v, out=out)
    assert result is out and np.isfinite(out).all()


def test_blhd_layout_and_strided_views(dense_config, qkv):
    q, k, v = qkv
    expected = dense_forward(dense_config, q, k, v)
    # [B, L, H, D] arrays, and [B, H, L, D] views of them (non-contiguous strides).
    q2, k2, v2 = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q, k, v))
    out_blhd = dense_forward(dense_config, q2, k2, v2, layout="blhd")
    assert out_blhd.shape == q2.shape
    assert np.abs(out_blhd.transpose(0, 2, 1, 3) - expected).max() < 1e-5
    views = [x.transpose(0, 2, 1, 3) for x in (q2, k2, v2)]
    assert not views[0].flags.c_contiguous
    assert np.abs(dense_forward(dense_config, *views) - expected).max() < 1e-5


def test_gqa_heads(dense_config):
    q, k, v = video_qkv(heads=4, kv_heads=2)
    out = dense_forward(dense_config, q, k, v)
    assert np.abs(out - reference(q, k, v)[0]).max() < 1e-4


def test_float16(dense_config, qkv):
    q, k, v = (x.astype(np.float16) for x in qkv)
    out = dense_forward(dense_config, q, k, v)
    assert out.dtype == np.float16
    assert rel_l2(out, reference(q, k, v)[0]) < 1e-2


def test_dlpack_and_array_interface_objects(dense_config, qkv):
    q, k, v = qkv
    expected = dense_forward(dense_config, q, k, v)
    out = np.zeros_like(q)
    view = np.ascontiguousarray(k.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    dense_forward(dense_config, DLPackOnly(q), DLPackOnly(view), ArrayInterfaceOnly(v),
                  out=DLPackOnly(out))
    assert np.abs(out - expected).max() < 1e-5


def test_dlpack_capsule_reader():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::-1]
    address, dev_type, dev_id, code, bits, lanes, shape, strides = psa.capi.psa_py_dlpack_info(
        np.ascontiguousarray(a).__dlpack__())
    assert (dev_type, code, bits, lanes, shape) == (1, 2, 32, 1, (2, 3, 4))
    with pytest.raises(ValueError):
        psa.capi.psa_py_dlpack_info(object())


def test_library_errors_reach_python(sparse_config, qkv):
    q, k, v = qkv
    with psa.Context(sparse_config, backend="cpu") as ctx:
        ctx.set_step(15)
        with pytest.raises(psa.Error) as info:
            ctx.forward(q, np.zeros(k.shape[:3] + (96,), np.float32), v)
        assert info.value.status == psa.Status.ERR_INVALID_SHAPE
        assert info.value.message == "k: shape[3] (head_dim) = 96; expected q's head_dim 64"
        with pytest.raises(TypeError, match="k has dtype float16 but q has float32"):
            ctx.forward(q, k.astype(np.float16), v)
        with pytest.raises(psa.Error) as info:
            ctx.forward(q, k, v[..., ::2])
        assert info.value.status == psa.Status.ERR_INVALID_STRIDE
        # The preset rearranges tokens: without a grid the sequence has no (t, h, w).
        with pytest.raises(psa.Error) as info:
            ctx.forward(q, k, v)
        assert info.value.message


def test_binding_side_errors(dense_config, qkv):
    q, k, v = qkv
    with psa.Context(dense_config, backend="cpu") as ctx:
        with pytest.raises(TypeError, match="q: dtype '<f8' is not supported"):
            ctx.forward(q.astype(np.float64), k, v)
        with pytest.raises(ValueError, match=r"q: shape \(2, 512, 64\) has 3 dimensions"):
            ctx.forward(q[0], k, v)
        with pytest.raises(ValueError, match="lse: 12 bytes; need 4096"):
            ctx.forward(q, k, v, lse=np.zeros(3, np.float32))
        readonly = np.zeros_like(q)
        readonly.flags.writeable = False
        with pytest.raises(ValueError, match="out: the array is read-only"):
            ctx.forward(q, k, v, out=readonly)
        assert not readonly.any()
        with pytest.raises(ValueError, match=r"out: shape \(1, 2, 256, 64\)"):
            ctx.forward(q, k, v, out=np.zeros((1, 2, 256, 64), np.float32))
        with pytest.raises(TypeError):
            ctx.forward([1, 2], k, v)
        with pytest.raises(ValueError):
            ctx.forward(q, k, v, layout="bshd?")


def test_workspace_size_and_explicit_workspace(dense_config, qkv):
    q, k, v = qkv
    with psa.Context(dense_config, backend="cpu") as ctx:
        size = ctx.workspace_size(q, k, v)
        ctx.check_supported(q, k, v)
        workspace = np.empty(max(size, 1), np.uint8)
        out = ctx.forward(q, k, v, workspace=workspace)
        assert np.abs(out - reference(q, k, v)[0]).max() < 1e-4
        if size:
            with pytest.raises(psa.Error) as info:
                ctx.forward(q, k, v, workspace=workspace[: size // 2])
            assert info.value.status == psa.Status.ERR_WORKSPACE_TOO_SMALL
