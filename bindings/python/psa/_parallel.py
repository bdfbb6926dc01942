# bindings/python/psa/_parallel.py -- building blocks of sequence parallelism in the one-call
# layer: psa.merge_attention (partial results of the same queries over disjoint key sets,
# merged through their fp32 log-sum-exps by the C psa_merge_attention, on NumPy arrays and
# PyTorch / CuPy / DLPack tensors, CPU or CUDA) and psa.sequence_order (the token order a
# preset computes in, so that sequence-parallel code can permute once and shard in it).
"""Sequence-parallel building blocks: merge_attention, sequence_order."""

from __future__ import annotations

import sys
from typing import Any, List, Optional, Sequence, Tuple

from . import capi
from ._api import DEFAULT_MODEL, ConfigLike, _check_grid, _resolve_config
from ._config import Config
from ._context import Context, StreamLike, stream_handle
from ._tensors import allocate, describe, describe_flat, framework_stream

_MAX_PARTS = 64


def _like(part: Any, template: Any) -> Any:
    """A copy of `part` laid out with `template`'s strides (same framework)."""
    module = type(template).__module__.split(".")[0]
    if module == "numpy":
        import numpy as np

        copy = np.empty_like(template)
        copy[...] = part
        return copy
    if module == "torch":
        torch = sys.modules["torch"]
        return torch.empty_like(template).copy_(part)
    raise ValueError("outs: parts with different strides; pass them with one layout")


def merge_attention(outs: Sequence[Any], lses: Sequence[Any], *, layout: str = "bhld",
                    out: Any = None, return_lse: bool = True,
                    stream: StreamLike = None) -> Any:
    """Merges partial attention results of the same queries over disjoint key sets (one per
    key shard of a ring) through their float32 log-sum-exps, FlashAttention convention::

        lse = logsumexp_i(lse_i),   out = sum_i exp(lse_i - lse) * out_i

    outs: 1..64 arrays of one shape [B, H, L, D] (in `layout`, "bhld" or "blhd"), dtype
        (float32, float16, bfloat16) and device, e.g. ``psa.attention(..., return_lse=True)``
        results; lses: their float32 [B, H, L] contiguous log-sum-exps (-inf: the part saw
        no key for that row). Computed in float32; a row where every part is -inf gives 0.
    out: write the result here (may be one of outs: in place). return_lse: also return the
        merged float32 [B, H, L] log-sum-exp (a new array).
    stream: CUDA stream (default: the framework's current stream); one kernel, no
        synchronisation. NumPy / CPU tensors run on the CPU.
    Returns ``(out, lse)``, or out when return_lse is False.
    """
    if isinstance(outs, (str, bytes)) or not isinstance(outs, Sequence):
        raise TypeError("outs: expected a list of arrays")
    if isinstance(lses, (str, bytes)) or not isinstance(lses, Sequence):
        raise TypeError("lses: expected a list of arrays")
    if not 1 <= len(outs) <= _MAX_PARTS:
        raise ValueError("outs: %d parts; expected 1..%d" % (len(outs), _MAX_PARTS))
    if len(lses) != len(outs):
        raise ValueError("lses: %d arrays for %d parts in outs" % (len(lses), len(outs)))
    if not isinstance(return_lse, bool):
        raise TypeError("return_lse = %r: expected a bool" % (return_lse,))
    parts = list(outs)
    first = describe(parts[0], "outs[0]", layout)
    device = first.device
    shape = tuple(int(first.desc.get_shape(i)) for i in range(4))
    if out is None:
        out = allocate(parts[0], device)
    to = describe(out, "out", layout)
    if not to.writable:
        raise ValueError("out: is read-only")
    out_shape = tuple(int(to.desc.get_shape(i)) for i in range(4))
    out_strides = tuple(int(to.desc.get_stride(i)) for i in range(4))
    if out_shape != shape or to.dtype != first.dtype or to.device != device:
        raise ValueError("out: shape %r / dtype / device differ from outs[0] (%r)"
                         % (out_shape, shape))
    keep: List[Any] = []
    addresses = []
    for i, part in enumerate(parts):
        t = describe(part, "outs[%d]" % i, layout)
        pshape = tuple(int(t.desc.get_shape(j)) for j in range(4))
        if pshape != shape or t.dtype != first.dtype or t.device != device or \
                t.device_id != first.device_id:
            raise ValueError("outs[%d]: shape %r, dtype or device differs from outs[0] "
                             "(shape %r)" % (i, pshape, shape))
        if tuple(int(t.desc.get_stride(j)) for j in range(4)) != out_strides:
            part = _like(part, out)
            t = describe(part, "outs[%d]" % i, layout)
        keep.append((part, t))
        addresses.append(t.address)
    rows = shape[0] * shape[1] * shape[2]
    lse_addresses = []
    for i, lse_i in enumerate(lses):
        address, nbytes, lse_device, hold = describe_flat(lse_i, "lses[%d]" % i)
        dtype = getattr(lse_i, "dtype", None)
        if dtype is not None and "float32" not in str(dtype):
            raise ValueError("lses[%d]: dtype %s; expected float32" % (i, dtype))
        if nbytes != rows * 4 or lse_device != device:
            raise ValueError("lses[%d]: %d bytes on %s; expected float32 [B, H, L] = %d floats "
                             "on %s" % (i, nbytes, lse_device, rows, device))
        keep.append(hold)
        lse_addresses.append(address)
    import numpy as np

    out_ptrs = np.asarray(addresses, dtype=np.uint64)
    lse_ptrs = np.asarray(lse_addresses, dtype=np.uint64)
    merged = None
    merged_address = 0
    if return_lse:
        merged = allocate(out, device, shape=shape[:3], float32=True)
        merged_address, _, _, hold = describe_flat(merged, "lse")
        keep.append(hold)
    if device == "cuda":
        current = framework_stream(out)
        stream_int = stream_handle(stream) if stream is not None else (current or 0)
        backend = int(capi.PSA_BACKEND_CUDA)
    else:
        if stream is not None:
            stream_handle(stream)
        stream_int = 0
        backend = int(capi.PSA_BACKEND_CPU)
    capi.psa_merge_attention(len(parts), to.desc, int(out_ptrs.ctypes.data),
                             int(lse_ptrs.ctypes.data), to.address, merged_address or None,
                             backend, stream_int or None)
    del keep
    return (out, merged) if return_lse else out


def sequence_order(grid: Sequence[int], *, text_length: int = 0,
                   text_first: Optional[bool] = None, model: Optional[str] = None,
                   preset: Optional[str] = None,
                   config: ConfigLike = None) -> Tuple[Any, int, int]:
    """``(order, text_begin, text_end)``: the order in which the preset (model/preset/config,
    as psa.attention takes them) computes a sequence of t*h*w + text_length tokens on the
    grid (t, h, w): ``order[i]`` (NumPy int64) is the index, in the caller's sequence, of the
    token at position i (Gilbert curve or STA order, text moved as the preset moves it; the
    identity when it rearranges nothing). Permuting q, k, v once with it
    (``x[:, :, order]``), running with ``use_rearrange = False`` and the text at
    [text_begin, text_end) computes the same numbers; the output comes back permuted
    (``out_caller[..., order, :] = out``). Sequence parallelism shards in this order.
    """
    cfg = _resolve_config(model, preset, config)
    if grid is None:
        raise ValueError("grid: expected (t, h, w)")
    try:
        total = int(grid[0]) * int(grid[1]) * int(grid[2]) + int(text_length)
    except (TypeError, ValueError, IndexError, OverflowError):
        raise ValueError("grid = %r: expected three ints (t, h, w) >= 1" % (grid,)) from None
    t, h, w = _check_grid(grid, text_length, total)  # type: ignore[misc]
    if text_first is None:
        name = model if model is not None else ("" if isinstance(config, Config)
                                                else DEFAULT_MODEL)
        text_first = name.lower().startswith("cogvideo")
    position = ("none" if text_length == 0 else "first" if text_first else "last")
    with Context(cfg, backend="cpu") as ctx:
        ctx.set_video_grid(t, h, w, text_length, position)
        return ctx.sequence_order(total)
