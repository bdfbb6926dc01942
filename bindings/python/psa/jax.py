# bindings/python/psa/jax.py -- libpsa in JAX: psa.jax.attention as an XLA FFI custom call
# (jax.ffi.ffi_call) whose handlers live in psa/_jax_ffi.so (bindings/python/psa_jax_ffi.cc),
# registered with jax.ffi.register_ffi_target for the "cpu" and "CUDA" platforms. Imported on
# demand only: `import psa` never imports jax.
"""Pyramid Sparse Attention in JAX, as an XLA FFI custom call::

    import jax, psa.jax

    attn = jax.jit(lambda q, k, v: psa.jax.attention(q, k, v, model="Wan2.1_1.3b",
                                                      grid=(21, 30, 52)))
    out = attn(q, k, v)                                   # [B, H, L, D], q's dtype

:func:`attention` takes the keyword arguments of :func:`psa.attention` (less ``out``,
``stream`` and the shard offsets) and gives the same result: on the CPU backend, bit for bit
the result of ``psa.attention`` on the same arrays. Everything that changes the result goes
to the handler as FFI attributes: the config as a string key (:func:`config_key`, the grammar
of ``psa.torch.config_key``), the grid, the text tokens and their position, the layout,
causal, the scale and the step, so a jitted function holds no other state. Python-side
checks (rank, dtype, shapes, grid, arguments, an unknown model or preset) raise at trace
time, the grid's as libpsa checks it (k follows the grid; q too, and causal is refused for
a sparse method, when the config rearranges tokens); what only libpsa rejects (e.g. a
head_dim the CUDA kernels lack) raises when the call runs, with the library's message.

- CPU arrays run on libpsa's CPU backend; CUDA arrays on its CUDA backend, on the stream XLA
  gives the call, no host synchronisation once a shape is planned.
- Placement follows JAX's rules, eager or jitted: the call runs where its committed inputs
  live (``jax.device_put(x, device)``, or the output of a computation on that device), so
  arrays put on ``jax.devices("cpu")[0]`` get the CPU handler even when the default device
  is a GPU. NumPy arrays and arrays made without a device (``jnp.asarray``, ``jnp.ones``)
  live on jax's *default* device, i.e. the GPU where jax has one: put them on the CPU
  explicitly, or create them under ``with jax.default_device(jax.devices("cpu")[0]):``.
  An eager call whose float32 inputs all sit on a GPU raises TypeError at once (the CUDA
  backend takes float16/bfloat16); under ``jax.jit`` the placement is only known when the
  call runs, and libpsa's PSA_ERR_UNSUPPORTED comes back as JAX's runtime error.
- CUDA workspace: from XLA's FFI scratch allocator (XLA's device allocator, so it counts
  against XLA's memory and is reused only by work XLA orders after the call); where that
  allocator refuses, from the device's current CUDA memory pool, stream-ordered on the
  call's stream (cuMemAllocAsync, cuMemFreeAsync right after the forward is enqueued, as
  ``psa_sparse_attention`` does). That memory lies outside XLA's preallocated block, so it
  needs the headroom XLA leaves (``XLA_PYTHON_CLIENT_MEM_FRACTION``, default 0.75); the
  pool's release threshold (``cudaMemPoolAttrReleaseThreshold``) decides whether it is kept
  reserved between calls.
- ``jax.jit``: one trace and compile per shape and argument set; the handler caches its
  contexts (plans) by everything that changes the plan (:func:`cache_info`,
  :func:`clear_cache`), so repeated calls plan nothing.
- ``jax.vmap``: over any extra leading axis (``vmap_method="expand_dims"``): the handler runs
  one forward per mapped index on the 4-D slices, an unmapped input is shared without a copy,
  and each index equals the unmapped call on that slice.
- Inference only: the call has no JVP/VJP rule, so ``jax.grad`` through it raises.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _api, capi
from ._config import Config, Method
from ._keys import ConfigArg, config_from_key, make_key
from ._tensors import parse_layout

__all__ = ["attention", "cache_info", "clear_cache", "config_key", "library_path",
           "TARGET_NAME"]

TARGET_NAME = "psa_attention"
"""The FFI target name, registered for the "cpu" and "CUDA" platforms."""


_LIBRARY_FILE = "_jax_ffi.so"
_DTYPES = ("float32", "float16", "bfloat16")
_INT64_MAX = (1 << 63) - 1


# ---- the handler library -------------------------------------------------------------------
def library_path() -> str:
    """Path of psa/_jax_ffi.so, the handler library (it may not exist: see :func:`_load`)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBRARY_FILE)


_LIB: Optional[ctypes.CDLL] = None
_LOCK = threading.Lock()


def _load() -> ctypes.CDLL:
    """Loads the handler library and registers its handlers with XLA (once)."""
    global _LIB
    with _LOCK:
        if _LIB is not None:
            return _LIB
        path = library_path()
        if not os.path.exists(path):
            raise ImportError(
                "psa.jax: %s is missing: this psa package was built without the JAX FFI "
                "handlers (CMake found no jax). Rebuild it where jax's headers are visible: "
                "`pip install --no-build-isolation .` in an environment with jax, "
                "scikit-build-core and swig, or `pip install . -C cmake.define."
                "PSA_JAX_INCLUDE_DIR=$(python -c 'import jax.ffi; print(jax.ffi.include_dir())')`"
                % path)
        lib = ctypes.CDLL(path)
        built = int(lib.PsaJaxHeaderVersion())
        if built != int(capi.PSA_VERSION_NUMBER):
            raise ImportError("psa.jax: %s was built from psa.h %d, the package is %d"
                              % (path, built, int(capi.PSA_VERSION_NUMBER)))
        lib.PsaJaxCacheInfo.restype = None
        lib.PsaJaxCacheInfo.argtypes = [ctypes.POINTER(ctypes.c_int64)] * 3
        lib.PsaJaxClearCache.restype = None
        lib.PsaJaxClearCache.argtypes = []
        jax.ffi.register_ffi_target(TARGET_NAME, jax.ffi.pycapsule(lib.PsaJaxAttentionHost),
                                    platform="cpu")
        jax.ffi.register_ffi_target(TARGET_NAME, jax.ffi.pycapsule(lib.PsaJaxAttentionCuda),
                                    platform="CUDA")
        _LIB = lib
        return lib


def cache_info() -> Dict[str, int]:
    """``{"size", "hits", "misses"}`` of the handler's context cache (64 contexts at most,
    least recently used first out; thread-safe)."""
    lib = _load()
    size, hits, misses = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
    lib.PsaJaxCacheInfo(ctypes.byref(size), ctypes.byref(hits), ctypes.byref(misses))
    return {"size": int(size.value), "hits": int(hits.value), "misses": int(misses.value)}


def clear_cache() -> None:
    """Destroys the handler's cached contexts (on CUDA each after its last forward is done)
    and zeroes the counters. Later calls plan again."""
    _load().PsaJaxClearCache()


def config_key(model: Optional[str] = None, preset: Optional[str] = None,
               config: ConfigArg = None) -> str:
    """The handler's config attribute: ``model`` / ``preset`` (default: psa.DEFAULT_MODEL's
    default preset) with `config` a dict of overrides (``{"mask_ratios.1": 0.2}``), or
    `config` a psa.Config (every parameter is written into the key), or `config` an existing
    key (the grammar of psa.torch.config_key). Validated here: psa.Error for an unknown
    model, preset or parameter, ValueError for a malformed key."""
    return make_key(model, preset, config)


def _check_arrays(q: Any, k: Any, v: Any, layout: str) -> Tuple[int, int, int, int]:
    """Trace-time checks; returns (B, Hq, Lq) of q and Lk of k."""
    axes = parse_layout(layout)
    shapes = []
    for name, a in (("q", q), ("k", k), ("v", v)):
        shape = tuple(int(x) for x in a.shape)
        if len(shape) != 4:
            raise ValueError("%s: shape %r has %d dimensions; expected 4 in %s order"
                             % (name, shape, len(shape), layout))
        if str(a.dtype) not in _DTYPES:
            raise TypeError("%s: dtype %s; expected float32, float16 or bfloat16"
                            % (name, a.dtype))
        if a.dtype != q.dtype:
            raise TypeError("%s: dtype %s differs from q's %s" % (name, a.dtype, q.dtype))
        shapes.append(tuple(shape[i] for i in axes))  # [B, H, L, D]
    (bq, hq, lq, dq), (bk, hk, lk, dk), vshape = shapes
    if vshape != shapes[1]:
        raise ValueError("v: shape %r differs from k's %r" % (tuple(v.shape), tuple(k.shape)))
    if bk != bq or dk != dq:
        raise ValueError("k: shape %r does not match q's %r (batch and head_dim must agree, "
                         "%s order)" % (tuple(k.shape), tuple(q.shape), layout))
    if min(bq, hq, lq, dq, hk, lk) < 1:
        raise ValueError("q, k: empty dimensions (q %r, k %r)" % (tuple(q.shape),
                                                                 tuple(k.shape)))
    if hq % hk:
        raise ValueError("k: %d heads do not divide q's %d (GQA/MQA needs Hq %% Hkv == 0)"
                         % (hk, hq))
    return bq, hq, lq, lk


def _check_grid_lengths(key: str, grid: Tuple[int, int, int], text_length: int, lq: int,
                        causal: bool) -> None:
    """What libpsa checks when it plans a forward with a video grid, at trace time: the keys
    follow the grid (checked by _api._check_grid on Lk); with use_rearrange the queries do
    too, and causal masking is refused for a sparse method (it means nothing after the
    tokens are rearranged)."""
    cfg = config_from_key(key)
    if not bool(cfg["use_rearrange"]):
        return
    total = grid[0] * grid[1] * grid[2] + text_length
    if lq != total:
        raise ValueError("q: %d tokens, but grid = %r with text_length = %d gives %d: with "
                         "use_rearrange (the preset's token rearrangement) q follows the "
                         "grid as k does; pass config={'use_rearrange': False} for queries "
                         "of another length (cross-attention)"
                         % (lq, tuple(grid), text_length, total))
    if (causal or bool(cfg["causal"])) and cfg["type"] != Method.DENSE:
        raise ValueError("causal = True with grid = %r and use_rearrange: causal masking is "
                         "meaningless after token rearrangement (type %s); drop the grid or "
                         "pass config={'use_rearrange': False}" % (tuple(grid), cfg["type"]))


def _concrete_devices(arrays: Sequence[Any]) -> Optional[Set[Any]]:
    """The devices of concrete arrays (an eager call); None when one is a tracer (jit, vmap:
    XLA places the call when it compiles it)."""
    devices: Set[Any] = set()
    for a in arrays:
        try:
            devices.update(a.devices())
        except Exception:  # a tracer
            return None
    return devices


def _check_eager_placement(q: Any, k: Any, v: Any) -> None:
    """An eager float32 call on a GPU: the CUDA backend would refuse it when it runs, with a
    message that does not say why the arrays are there. Say it now."""
    if q.dtype != jnp.float32:
        return
    devices = _concrete_devices((q, k, v))
    if devices and all(d.platform in ("gpu", "cuda") for d in devices):
        raise TypeError(
            "q, k, v: float32 arrays on %s: libpsa's CUDA backend takes float16 or bfloat16. "
            "Cast them, or run on the CPU backend with arrays on the CPU: "
            "jax.device_put(x, jax.devices('cpu')[0]) (NumPy inputs and arrays made without "
            "a device live on jax's default device)"
            % ", ".join(sorted(str(d) for d in devices)))


def attention(q: Any, k: Any, v: Any, *, model: Optional[str] = None,
              preset: Optional[str] = None, config: ConfigArg = None,
              grid: Optional[Sequence[int]] = None, text_length: int = 0,
              text_first: Optional[bool] = None, layout: str = "bhld", causal: bool = False,
              scale: Optional[float] = None, step: Optional[int] = None,
              return_lse: bool = False) -> Any:
    """Pyramid Sparse Attention of (q, k, v) as an XLA FFI call; returns out (or
    ``(out, lse)``). Works under ``jax.jit``, ``jax.vmap`` and on CPU and CUDA devices.

    q, k, v: 4-D JAX arrays (or anything jnp.asarray takes) in `layout` order, "bhld"
        ([B, H, L, D]) or "blhd" ([B, L, H, D]); float32, float16 or bfloat16 (CUDA:
        float16/bfloat16, head_dim 64 or 128), one dtype. K/V may have fewer heads (GQA).
    model, preset, config: as psa.attention (config: a psa.Config, a dict of overrides of
        the preset, or a key string from :func:`config_key` / ``psa.torch.config_key``).
    grid, text_length, text_first, causal, scale, step: as psa.attention (the grid
        describes the key sequence: t*h*w + text_length = Lk; with use_rearrange, the
        presets' default, Lq too; step: None or 0 <= step <= 2**63 - 1).
    return_lse: also return the float32 [B, H, L] natural-log sum-exp of the scaled logits.
    """
    _load()
    if isinstance(config, str):
        key = config_key(model, preset, config)
        text_name = key.split(";")[0]
        text_name = text_name[len("model="):] if text_name.startswith("model=") else ""
    else:
        key = config_key(model, preset, config)
        text_name = (model if model is not None else
                     "" if isinstance(config, Config) else _api.DEFAULT_MODEL)
    if not isinstance(causal, bool):
        raise TypeError("causal = %r: expected a bool" % (causal,))
    _api.check_scale(scale)
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)
                             or not 0 <= step <= _INT64_MAX):
        raise ValueError("step = %r: expected None (sparse) or an int in [0, 2**63 - 1]"
                         % (step,))
    if not isinstance(return_lse, bool):
        raise TypeError("return_lse = %r: expected a bool" % (return_lse,))
    q, k, v = (x if isinstance(x, jax.Array) else jnp.asarray(x) for x in (q, k, v))
    batch, heads, seq_len, key_len = _check_arrays(q, k, v, layout)
    _check_eager_placement(q, k, v)
    # The grid describes the key sequence (libpsa checks k against it); q follows it too
    # when the config rearranges tokens.
    g = _api._check_grid(grid, text_length, key_len)
    position = int(capi.PSA_TEXT_NONE)
    if g is None:
        g = (0, 0, 0)
    else:
        _check_grid_lengths(key, g, text_length, seq_len, causal)
        if text_length:
            if text_first is None:
                text_first = text_name.lower().startswith("cogvideo")
            if not isinstance(text_first, bool):
                raise TypeError("text_first = %r: expected a bool or None" % (text_first,))
            position = int(capi.PSA_TEXT_FIRST) if text_first else int(capi.PSA_TEXT_LAST)
    layout_id = 0 if parse_layout(layout) == (0, 1, 2, 3) else 1

    results: List[Any] = [jax.ShapeDtypeStruct(q.shape, q.dtype)]
    if return_lse:
        results.append(jax.ShapeDtypeStruct((batch, heads, seq_len), jnp.float32))
    call = jax.ffi.ffi_call(TARGET_NAME, results, vmap_method="expand_dims")
    outs = call(q, k, v, config=key, grid_t=np.int64(g[0]), grid_h=np.int64(g[1]),
                grid_w=np.int64(g[2]), text_length=np.int64(text_length),
                text_position=np.int64(position), layout=np.int64(layout_id),
                causal=np.int64(int(causal)), scale=np.float64(scale or 0.0),
                step=np.int64(-1 if step is None else step))
    return (outs[0], outs[1]) if return_lse else outs[0]
