# bindings/python/tests/conftest.py -- shared inputs of the Python binding tests: small
# video-like q/k/v (smooth fields over a t x h x w token grid, so attention is local as in a
# video DiT) and the NumPy reference attention. CPU backend only.
import numpy as np
import pytest

import psa

GRID = (2, 16, 16)  # 512 tokens: 4 x 4 blocks of 128


def video_qkv(grid=GRID, batch=1, heads=2, kv_heads=None, head_dim=64, seed=0):
    """q [B, H, L, D] and k, v [B, Hkv, L, D], float32, raster token order."""
    kv_heads = kv_heads or heads
    rng = np.random.default_rng(seed)
    t, h, w = grid
    tt, hh, ww = np.meshgrid(np.arange(t) / t, np.arange(h) / h, np.arange(w) / w, indexing="ij")
    pos = np.stack([tt.ravel(), hh.ravel(), ww.ravel()], 1)  # [L, 3]

    def field():
        freq = rng.uniform(-1.5, 1.5, (3, head_dim, 3)) * 2 * np.pi
        phase = rng.uniform(0, 2 * np.pi, (head_dim, 3))
        return np.cos(np.einsum("lc,cdk->ldk", pos, freq) + phase).sum(-1) * np.sqrt(2 / 3)

    L = t * h * w
    q = np.empty((batch, heads, L, head_dim), np.float32)
    k = np.empty((batch, kv_heads, L, head_dim), np.float32)
    v = np.empty_like(k)
    group = heads // kv_heads
    for b in range(batch):
        for g in range(kv_heads):
            f = field()
            k[b, g] = f + 0.1 * rng.standard_normal(f.shape)
            v[b, g] = field()
            for hq in range(g * group, (g + 1) * group):
                q[b, hq] = f + 0.1 * rng.standard_normal(f.shape)
    return q, k, v


def video_heads(rng, b, h, grid, text, d):
    """[B, H, L, D] float32 video-like heads: smooth random fields over the t x h x w grid
    plus noise, `text` random rows first. PSA masks on them are sparse and depend on the
    sampled rows (plain noise would give all-level-1 masks)."""
    t, hh, w = grid
    zz, yy, xx = np.meshgrid(np.arange(t), np.arange(hh), np.arange(w), indexing="ij")
    pos = np.stack([zz.ravel() / 2.0, yy.ravel() / 3.0, xx.ravel() / 3.0], 1)
    f = rng.standard_normal((b, h, 3, d))
    phase = rng.uniform(0, 6.3, (b, h, 1, d))
    x = 3.0 * np.cos(np.einsum("nc,bhcd->bhnd", pos, f) + phase)
    x += 0.3 * rng.standard_normal(x.shape)
    return np.concatenate([rng.standard_normal((b, h, text, d)), x], 2).astype(np.float32)


def reference(q, k, v, scale=None):
    """Dense attention in float64: (out, lse)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = (q @ k.transpose(0, 1, 3, 2)) * (scale or 1 / np.sqrt(q.shape[-1]))
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    return (p / p.sum(-1, keepdims=True)) @ v, np.log(p.sum(-1)) + m[..., 0]


def rel_l2(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


@pytest.fixture
def qkv():
    return video_qkv()


@pytest.fixture
def sparse_config():
    """Wan2.1 1.3B's default preset, first step after warm-up pinned by the tests."""
    return psa.Config.load("Wan2.1_1.3b", "psa_balanced")


@pytest.fixture
def dense_config():
    cfg = psa.Config.load("Wan2.1_1.3b", "psa_balanced")
    cfg["type"] = psa.Method.DENSE
    return cfg


class ArrayInterfaceOnly:
    """An array known only through __array_interface__ (no .shape, .dtype, .nbytes)."""

    def __init__(self, array):
        self.array = array

    @property
    def __array_interface__(self):
        return self.array.__array_interface__


class DLPackOnly:
    """An array known only through DLPack (the path PyTorch/JAX/CuPy tensors take); host
    arrays: no stream is asked for."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        assert stream is None  # CPU: no stream
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()
