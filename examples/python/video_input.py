# examples/python/video_input.py -- the small video-like input of every example (the same
# numbers as examples/c/video_input.h): per head and channel a unit-variance plane wave over
# the (t, h, w) token grid shared by q and k (plus a little noise), another wave for v.
# Counter-based splitmix64, vectorised with NumPy.
import numpy as np

_U64 = np.uint64


def uniform(i):
    """Uniform [0, 1) draws number `i` (array) of the stream with seed 42."""
    with np.errstate(over="ignore"):
        z = _U64(42) + (np.asarray(i, dtype=_U64) + _U64(1)) * _U64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    z ^= z >> _U64(31)
    return (z >> _U64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def video_qkv(heads=2, t=4, h=16, w=16, dim=64):
    """q, k, v: float32 [1, heads, t*h*w, dim] (BNSD), raster token order."""
    length = t * h * w
    l = np.arange(length)
    tt, hh, ww = (l // (h * w)) / t, ((l // w) % h) / h, (l % w) / w
    q = np.empty((1, heads, length, dim), np.float32)
    k, v = np.empty_like(q), np.empty_like(q)
    for hd in range(heads):
        waves = []
        for c in range(2):  # 0: the q/k wave, 1: the v wave
            base = ((hd * 2 + c) * dim + np.arange(dim)) * 4
            ft, fh, fw = (3.0 * uniform(base + j) - 1.5 for j in range(3))
            phase = 2 * np.pi * uniform(base + 3)
            waves.append(np.cos(2 * np.pi * (np.outer(tt, ft) + np.outer(hh, fh) + np.outer(ww, fw))
                                + phase))
        at = (hd * length + l)[:, None] * dim + np.arange(dim)[None, :]
        noise = heads * 2 * dim * 4 + at * 2
        q[0, hd] = np.sqrt(2.0) * waves[0] + 0.2 * (uniform(noise) - 0.5)
        k[0, hd] = np.sqrt(2.0) * waves[0] + 0.2 * (uniform(noise + 1) - 0.5)
        v[0, hd] = waves[1]
    return q, k, v


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))
