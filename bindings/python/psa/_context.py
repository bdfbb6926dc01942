# bindings/python/psa/_context.py -- psa.Context: a config bound to a backend, used as a
# context manager; forward() takes NumPy arrays (CPU backend) or PyTorch / DLPack /
# __cuda_array_interface__ tensors (CUDA backend) and writes into `out` or a new array.
"""Contexts and the forward call."""

from __future__ import annotations

import operator
from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

from . import capi
from ._config import Config, Precision
from ._errors import Error
from ._tensors import (Flat, Tensor, allocate, describe, describe_flat, dtype_name, flat,
                       framework_stream, is_cuda_device)

# Longest token order psa_context_sequence_order builds (include/psa.h: 2^31 - 1 tokens).
_MAX_ORDER_TOKENS = 2**31 - 1
_BACKENDS = {"auto": int(capi.PSA_BACKEND_AUTO), "cpu": int(capi.PSA_BACKEND_CPU),
             "cuda": int(capi.PSA_BACKEND_CUDA)}
_TEXT_POSITIONS = {"none": int(capi.PSA_TEXT_NONE), "first": int(capi.PSA_TEXT_FIRST),
                   "last": int(capi.PSA_TEXT_LAST)}

_LEVELS = ((1, capi.PSA_STAT_LEVEL_1), (2, capi.PSA_STAT_LEVEL_2), (4, capi.PSA_STAT_LEVEL_4),
           (8, capi.PSA_STAT_LEVEL_8), (0, capi.PSA_STAT_LEVEL_SKIP))
_STAGES = (("rearrange", capi.PSA_STAGE_REARRANGE), ("pool", capi.PSA_STAGE_POOL),
           ("importance", capi.PSA_STAGE_IMPORTANCE), ("mask", capi.PSA_STAGE_MASK),
           ("attention", capi.PSA_STAGE_ATTENTION), ("inverse", capi.PSA_STAGE_INVERSE),
           ("total", capi.PSA_STAGE_TOTAL))

StreamLike = Union[None, int, Any]


class Stats(NamedTuple):
    """Statistics of a context's last forward.

    density: computed fraction of the dense work (a level-p block counts 1/p; 1.0 dense).
    ran_dense: True when the forward ran dense (method dense, or a warm-up step).
    step: the denoising step the forward used; call_index: the context's call counter then.
    level_fraction: level (1, 2, 4, 8; 0 = skipped) -> fraction of block pairs.
    query_blocks, key_blocks: the block counts of the forward.
    stage_ms: stage name -> host milliseconds (CPU backend only; zeros on CUDA).
    precision: the arithmetic the attention ran (``Precision.FP8`` only where it was asked
    for and the backend runs it on this shape; ``Precision.DEFAULT`` otherwise).
    """

    density: float
    ran_dense: bool
    step: int
    call_index: int
    level_fraction: Dict[int, float]
    query_blocks: int
    key_blocks: int
    stage_ms: Dict[str, float]
    precision: Precision


def _lookup(table: Dict[str, int], value: Union[str, int], what: str) -> int:
    if isinstance(value, str):
        try:
            return table[value.lower()]
        except KeyError:
            raise ValueError("%s = %r: expected one of %s"
                             % (what, value, ", ".join(repr(k) for k in table))) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s = %r: expected a str or an int" % (what, value))
    return int(value)


def int_arg(name: str, value: Any, bits: int = 64) -> int:
    """`value` as a C integer argument of `bits` bits: TypeError for a non-int (bool
    included), ValueError naming `name` outside the C type's range (instead of SWIG's
    OverflowError)."""
    if isinstance(value, bool):
        raise TypeError("%s = %r: expected an int" % (name, value))
    try:
        number = operator.index(value)  # int, NumPy integers, anything with __index__
    except TypeError:
        raise TypeError("%s = %r: expected an int" % (name, value)) from None
    bound = 2 ** (bits - 1)
    if not -bound <= number < bound:
        raise ValueError("%s = %r: outside int%d" % (name, value, bits))
    return number


def stream_handle(stream: StreamLike) -> int:
    """A CUDA stream as an int: None/0 (legacy default), an int, or an object with
    .cuda_stream (PyTorch) or .ptr (CuPy)."""
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError("stream = %r: expected None, an int (cudaStream_t), or an object with "
                        ".cuda_stream or .ptr" % (stream,))
    return int(stream)


def is_cuda_object(obj: Any) -> bool:
    """True when `obj` is an array in CUDA memory (PyTorch, DLPack, CUDA array interface)."""
    try:
        if type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "device"):
            return bool(obj.device.type == "cuda")
        # DLPack first: PyTorch's __cuda_array_interface__ raises TypeError for bfloat16.
        if hasattr(obj, "__dlpack_device__"):
            return is_cuda_device(int(obj.__dlpack_device__()[0]))
        return hasattr(obj, "__cuda_array_interface__")
    except Exception:  # a property that refuses this tensor: not ours to decide here
        return False


class Context:
    """A config bound to a backend, with cached per-shape plans and the warm-up counter::

        with psa.Context(psa.Config.load("Wan2.1_1.3b"), backend="cpu") as ctx:
            ctx.set_video_grid(4, 16, 16)
            ctx.set_step(ctx.config["warmup_steps"])   # a sparse step (see next_step)
            out = ctx.forward(q, k, v)

    Warm-up: the context counts forwards; step = (calls // calls_per_step) %
    inference_steps, and a forward runs dense while step < warmup_steps. With the shipped
    presets a fresh context therefore runs its first calls_per_step * warmup_steps forwards
    dense. :meth:`next_step` tells what the next forward will do, :meth:`set_step` pins the
    step, and :meth:`stats` reports ``ran_dense``. (:func:`psa.attention` runs sparse unless
    given a step.)

    One context must not be used by two threads at once. Closing (or leaving the ``with``
    block) destroys the native context; on CUDA the caller must make sure no forward using
    it is still pending on a stream.
    """

    def __init__(self, config: Union[None, str, Config] = None,
                 backend: Union[str, int] = "auto", device: int = -1) -> None:
        """config: a psa.Config, a model name (its default preset) or None (library
        defaults). backend: "auto", "cpu" or "cuda". device: CUDA ordinal, -1 = current."""
        if config is None:
            config = Config()
        elif isinstance(config, str):
            config = Config.load(config)
        elif not isinstance(config, Config):
            raise TypeError("config = %r: expected a psa.Config, a model name or None"
                            % (config,))
        self._handle: Any = capi.psa_context_create(config._handle,
                                                    _lookup(_BACKENDS, backend, "backend"),
                                                    int_arg("device", device, 32))
        self._workspace: Optional[Tuple[Any, int, Tuple[str, int]]] = None
        self._blocks = (int(config["block_size.m"]), int(config["block_size.n"]))

    # -- lifetime ----------------------------------------------------------------------
    def close(self) -> None:
        """Destroys the native context now (idempotent)."""
        self._workspace = None
        self._handle = None

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def handle(self) -> Any:
        """The SWIG handle of the native context (psa.Error when closed)."""
        if self._handle is None:
            raise Error(capi.PSA_ERR_INVALID_STATE, "the context is closed")
        return self._handle

    # -- state -------------------------------------------------------------------------
    @property
    def backend(self) -> str:
        """"cpu" or "cuda": the backend actually chosen."""
        return "cuda" if capi.psa_context_backend(self.handle) == capi.PSA_BACKEND_CUDA else "cpu"

    def _check_device(self, name: str, device: str, device_id: int) -> None:
        """ValueError naming the argument when its memory is not the backend's (host
        memory for the CPU backend, CUDA memory for the CUDA backend), before libpsa is
        given the pointer: a host-only build cannot tell a device pointer from a host one."""
        check_backend(self.backend, name, device, device_id)

    @property
    def config(self) -> Config:
        """A copy of the context's config."""
        return Config(capi.psa_context_get_config(self.handle))

    def set_video_grid(self, t: int, h: int, w: int, text_length: int = 0,
                       text_position: Union[str, int] = "none") -> None:
        """Token grid of the sequences that follow: t*h*w video tokens plus text_length text
        tokens at text_position ("none", "first", "last")."""
        capi.psa_context_set_video_grid(self.handle, int_arg("t", t), int_arg("h", h),
                                        int_arg("w", w), int_arg("text_length", text_length),
                                        _lookup(_TEXT_POSITIONS, text_position, "text_position"))

    def set_video_pixels(self, frames: int, height: int, width: int, text_length: int = -1,
                         text_position: Union[str, int] = "none") -> None:
        """As set_video_grid, from pixel sizes and the config's video_scale divisors
        (text_length < 0: the config's text_length)."""
        capi.psa_context_set_video_pixels(self.handle, int_arg("frames", frames),
                                          int_arg("height", height), int_arg("width", width),
                                          int_arg("text_length", text_length),
                                          _lookup(_TEXT_POSITIONS, text_position, "text_position"))

    def sequence_order(self, seq_len: int) -> Tuple[Any, int, int]:
        """``(order, text_begin, text_end)``: the token order this context computes a
        sequence of `seq_len` tokens in under its grid and config, as a NumPy int64 array
        (``order[i]`` = caller's index of the token at position i: the Gilbert curve or STA
        order, or the identity), and the text span in that order. Sequence-parallel code
        permutes once with it (``x[..., order, :]``), shards, and runs with
        ``use_rearrange = False``; see psa_context_sequence_order. At most 2**31 - 1
        tokens (psa.Error beyond, before anything is allocated)."""
        import numpy as np

        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or \
                not 1 <= seq_len <= 2**63 - 1:
            raise ValueError("seq_len = %r: expected an int >= 1" % (seq_len,))
        capi.psa_context_sequence_order(self.handle, seq_len, None)  # seq_len vs the grid
        if seq_len > _MAX_ORDER_TOKENS:  # refused by the library too, before it writes
            raise Error(capi.PSA_ERR_INVALID_SHAPE, "seq_len = %d; token orders of more than "
                        "2^31 - 1 tokens are not supported" % seq_len)
        try:
            order = np.empty((seq_len,), dtype=np.int64)
        except (MemoryError, ValueError):
            raise Error(capi.PSA_ERR_OUT_OF_MEMORY, "seq_len = %d: the order needs %d bytes, "
                        "which cannot be allocated" % (seq_len, 8 * seq_len)) from None
        begin, end = capi.psa_context_sequence_order(self.handle, seq_len,
                                                     int(order.ctypes.data))
        return order, int(begin), int(end)

    def clear_video_grid(self) -> None:
        """Forgets the video grid (no rearrangement, no text handling)."""
        capi.psa_context_clear_video_grid(self.handle)

    def level_map(self) -> Any:
        """The last forward's decision: int8 NumPy array ``[batch, heads, q_blocks,
        k_blocks]``, values 1/2/4/8 (level) and 0 (skipped); all 1 after a dense forward.
        On CUDA this waits for the forward's stream (psa_context_get_level_map)."""
        from ._mask import level_map
        return level_map(self.handle)

    def token_order(self, sequence: str = "keys") -> Any:
        """``TokenOrder(order, text_begin, text_end)`` of the last forward's ``"keys"`` or
        ``"queries"``: ``order[x]`` is the caller's token at rearranged position x (block j
        holds positions ``[j * block, (j + 1) * block)``); see psa_context_get_token_order."""
        from ._mask import token_order
        return token_order(self.handle, sequence)

    def set_step(self, step: int) -> None:
        """Pins the denoising step (>= 0); -1 returns to counting forwards."""
        capi.psa_context_set_step(self.handle, int_arg("step", step))

    def reset_calls(self) -> None:
        """Zeroes the forward counter (the next forward is step 0 again)."""
        capi.psa_context_reset_calls(self.handle)

    def next_step(self) -> Tuple[int, bool]:
        """``(step, dense)`` of the next forward: dense is True when it will run dense
        because step < warmup_steps (or the method is dense)."""
        step, dense = capi.psa_context_next_step(self.handle)
        return int(step), bool(dense)

    def stats(self) -> Stats:
        """psa.Stats of the last forward (on CUDA this waits for that forward's stream)."""
        s = capi.psa_stats()
        capi.psa_context_get_stats(self.handle, s)
        return Stats(float(s.density), bool(s.ran_dense), int(s.step), int(s.call_index),
                     {level: float(s.get_level_fraction(i)) for level, i in _LEVELS},
                     int(s.query_blocks), int(s.key_blocks),
                     {name: float(s.get_stage_ms(i)) for name, i in _STAGES},
                     Precision(int(s.precision)))

    # -- queries and forward -----------------------------------------------------------
    def check_supported(self, q: Any, k: Any, v: Any, out: Any = None,
                        layout: str = "bhld") -> None:
        """Raises psa.Error with the reason when a forward on these tensors would fail."""
        tq, tk, tv = (describe(x, n, layout) for x, n in ((q, "q"), (k, "k"), (v, "v")))
        to = describe(out, "out", layout) if out is not None else None
        capi.psa_check_supported(self.handle, tq.desc, tk.desc, tv.desc,
                                 to.desc if to is not None else None)

    def workspace_size(self, q: Any, k: Any, v: Any, out: Any = None,
                       layout: str = "bhld") -> int:
        """Workspace bytes a forward on these tensors needs (and plans the shape)."""
        tq, tk, tv = (describe(x, n, layout) for x, n in ((q, "q"), (k, "k"), (v, "v")))
        to = describe(out, "out", layout) if out is not None else tq
        return int(capi.psa_workspace_size(self.handle, tq.desc, tk.desc, tv.desc, to.desc))

    def forward(self, q: Any, k: Any, v: Any, out: Any = None, lse: Any = None,
                layout: str = "bhld", stream: StreamLike = None, workspace: Any = None) -> Any:
        """Sparse attention of (q, k, v); returns `out`, or ``(out, lse)`` when lse is given.

        q, k, v: 4-D tensors in `layout` order -- "bhld" ([B, H, L, D], PyTorch SDPA's) or
            "blhd" ([B, L, H, D]); any strides with a contiguous head dim. NumPy arrays
            (CPU backend), torch tensors, or objects exporting __dlpack__ or
            __cuda_array_interface__. K/V may have fewer heads than q (GQA).
        out: written in place when given (must be writable, q's shape and dtype), else
            allocated like q (NumPy, PyTorch, CuPy).
        lse: True to allocate the fp32 [B, H, L] log-sum-exp, or a contiguous fp32 buffer.
        stream: CUDA stream (int, or an object with .cuda_stream / .ptr); default: PyTorch's
            or CuPy's current stream for their tensors, else the legacy default stream.
        workspace: a byte buffer on the backend's device; default: one the context keeps
            and grows (reused by later forwards: pass your own per stream when forwards of
            one context run concurrently on several streams).
        """
        handle = self.handle
        if stream is None:
            stream = framework_stream(q) if is_cuda_object(q) else None
        stream_int = stream_handle(stream)
        tq = describe(q, "q", layout, stream_int)
        tk = describe(k, "k", layout, stream_int)
        tv = describe(v, "v", layout, stream_int)
        check_same_device(tq, (("k", tk), ("v", tv)))
        self._check_device("q", tq.device, tq.device_id)
        if out is None:
            # What libpsa would reject (zero strides, absurd shapes) is never allocated for.
            capi.psa_check_supported(handle, tq.desc, tk.desc, tv.desc, None)
            out = allocate(q, tq.device)
        to = describe(out, "out", layout, stream_int)
        check_out(tq, to)
        lse_address, lse_obj, lse_keep = 0, None, None
        if lse is not None and lse is not False:
            batch, heads, seq = (int(to.desc.get_shape(i)) for i in range(3))
            lse_obj = (allocate(q, tq.device, shape=(batch, heads, seq), float32=True)
                       if lse is True else lse)
            f = flat(lse_obj, "lse", stream_int)
            self._check_device("lse", f.device, f.device_id)
            if f.dtype != "float32":
                raise ValueError("lse: dtype %s; expected float32" % (f.dtype,))
            if f.nbytes < 4 * batch * heads * seq:
                raise ValueError("lse: %d bytes; need %d (float32 [%d, %d, %d])"
                                 % (f.nbytes, 4 * batch * heads * seq, batch, heads, seq))
            lse_address, lse_keep = f.address, f.keep
        needed = int(capi.psa_workspace_size(handle, tq.desc, tk.desc, tv.desc, to.desc))
        ws_address, ws_bytes, ws_keep = 0, 0, None
        if workspace is not None:
            f = flat(workspace, "workspace", stream_int)
            self._check_device("workspace", f.device, f.device_id)
            ws_address, ws_bytes, ws_keep = f.address, f.nbytes, f.keep
        elif needed:
            ws = self._workspace
            if ws is None or ws[1] < needed or ws[2] != (tq.device, tq.device_id):
                ws = (allocate(q, tq.device, nbytes=needed), needed, (tq.device, tq.device_id))
                self._workspace = ws
            ws_address, ws_bytes, _, ws_keep = describe_flat(ws[0], "workspace", stream_int)
        capi.psa_attention_forward(handle, tq.desc, tq.address, tk.desc, tk.address, tv.desc,
                                   tv.address, to.desc, to.address, lse_address or None,
                                   ws_address or None, ws_bytes, stream_int or None)
        del tq, tk, tv, ws_keep, lse_keep  # the capsules stay alive until the call returned
        return (out, lse_obj) if lse_obj is not None else out


    # ---- the PSA ring: the level map and the attention of one K/V shard -------------------
    def compute_level_map(self, q: Any, k: Any, layout: str = "bhld",
                          stream: StreamLike = None, levels: Any = None) -> Any:
        """The level map [B, H, Mq, Nk] (int8: 0 skip, 1, 2, 4, 8) of the query blocks of `q`
        against every key block of `k`, as a forward on (q, k) builds it; counts as one
        forward of the context (step, warm-up, statistics). q and k in the computing order
        (the context must not rearrange: psa_compute_level_map). `levels`: a contiguous
        int8 buffer of that size (default: allocated like q)."""
        if stream is None:
            stream = framework_stream(q) if is_cuda_object(q) else None
        stream_int = stream_handle(stream)
        tq = describe(q, "q", layout, stream_int)
        tk = describe(k, "k", layout, stream_int)
        check_same_device(tq, (("k", tk),))
        self._check_device("q", tq.device, tq.device_id)
        needed = int(capi.psa_level_map_workspace_size(self.handle, tq.desc, tk.desc))
        bm, bn = self._blocks
        b, h, lq = (int(tq.desc.get_shape(i)) for i in range(3))
        lk = int(tk.desc.get_shape(2))
        shape = (b, h, -(-lq // bm), -(-lk // bn))
        if levels is None:
            levels = allocate(q, tq.device, nbytes=shape[0] * shape[1] * shape[2] * shape[3],
                              name="levels")
            levels = _as_int8(levels, shape)
        f = self._levels(levels, stream_int)
        if f.nbytes != shape[0] * shape[1] * shape[2] * shape[3]:
            raise ValueError("levels: %d bytes; expected int8 %r" % (f.nbytes, shape))
        ws = allocate(q, tq.device, nbytes=max(needed, 1))
        ws_address, _, _, ws_keep = describe_flat(ws, "workspace", stream_int)
        capi.psa_compute_level_map(self.handle, tq.desc, tq.address, tk.desc, tk.address,
                                   f.address, ws_address, needed, stream_int or None)
        del tq, tk, f, ws_keep
        return levels

    def _levels(self, levels: Any, stream_int: int) -> Flat:
        """A level map buffer: contiguous, one-byte integers, in the backend's memory."""
        f = flat(levels, "levels", stream_int)
        if f.dtype not in ("int8", "uint8"):
            raise ValueError("levels: dtype %s; expected int8" % (f.dtype,))
        self._check_device("levels", f.device, f.device_id)
        return f

    def shard_attention(self, q: Any, k: Any, v: Any, levels: Any, key_block_begin: int,
                        layout: str = "bhld", stream: StreamLike = None) -> Tuple[Any, Any]:
        """``(out, lse)``: the attention of `q` against the K/V shard (k, v) whose key blocks
        are columns [key_block_begin, key_block_begin + ceil(Lk / block_size.n)) of `levels`
        (from compute_level_map); merging every shard's result with psa.merge_attention
        gives the forward on the whole K/V (psa_shard_attention)."""
        if stream is None:
            stream = framework_stream(q) if is_cuda_object(q) else None
        stream_int = stream_handle(stream)
        tq = describe(q, "q", layout, stream_int)
        tk = describe(k, "k", layout, stream_int)
        tv = describe(v, "v", layout, stream_int)
        check_same_device(tq, (("k", tk), ("v", tv)))
        self._check_device("q", tq.device, tq.device_id)
        f = self._levels(levels, stream_int)
        shape = f.shape
        if len(shape) != 4:
            raise ValueError("levels: shape %r; expected [B, H, Mq, Nk] int8" % (shape,))
        begin = int_arg("key_block_begin", key_block_begin)
        bm, bn = self._blocks
        b, h, lq = (int(tq.desc.get_shape(i)) for i in range(3))
        rows = (b, h, -(-lq // bm))
        shard_blocks = -(-int(tk.desc.get_shape(2)) // bn)
        # libpsa reads B * H * Mq rows of the map (Mq from q) once key_block_begin lies inside
        # it (and refuses a key_block_begin outside it, naming it, before reading anything).
        if tuple(shape[:3]) != rows and 0 <= begin <= int(shape[3]) - shard_blocks:
            raise ValueError("levels: shape %r; expected [%d, %d, %d, Nk] ([B, H, Mq] of q: "
                             "seq_len = %d, block_size.m = %d)" % (shape, rows[0], rows[1],
                                                                   rows[2], lq, bm))
        address, keep = f.address, f.keep
        out = allocate(q, tq.device)
        to = describe(out, "out", layout, stream_int)
        b, h, lq = (int(to.desc.get_shape(i)) for i in range(3))
        lse = allocate(q, tq.device, shape=(b, h, lq), float32=True)
        lse_address, _, _, lse_keep = describe_flat(lse, "lse", stream_int)
        needed = int(capi.psa_shard_attention_workspace_size(self.handle, tq.desc, tk.desc,
                                                             tv.desc, to.desc))
        ws = allocate(q, tq.device, nbytes=max(needed, 1))
        ws_address, _, _, ws_keep = describe_flat(ws, "workspace", stream_int)
        capi.psa_shard_attention(self.handle, tq.desc, tq.address, tk.desc, tk.address,
                                 tv.desc, tv.address, address, int(shape[3]), begin, to.desc,
                                 to.address, lse_address, ws_address, needed,
                                 stream_int or None)
        del tq, tk, tv, to, f, keep, lse_keep, ws_keep
        return out, lse


def _as_int8(buffer: Any, shape: Tuple[int, int, int, int]) -> Any:
    """A uint8 byte buffer from allocate() viewed as int8 of `shape`."""
    if hasattr(buffer, "view") and type(buffer).__module__.split(".")[0] == "torch":
        import torch

        return buffer.view(torch.int8).view(shape)
    return buffer.view("int8").reshape(shape)


def _memory_words(device: str, device_id: int) -> str:
    if device == "cuda":
        return "a CUDA array (device %d)" % device_id if device_id >= 0 else "a CUDA array"
    return "a host array"


def check_backend(backend: str, name: str, device: str, device_id: int) -> None:
    """ValueError naming the argument and both devices when an array's memory is not the
    `backend`'s ("cpu": host memory, "cuda": CUDA memory)."""
    if device != backend:
        raise ValueError("%s: %s; this context runs on the %s backend (pass %s memory)"
                         % (name, _memory_words(device, device_id), backend.upper(),
                            "host" if backend == "cpu" else "CUDA device"))


def check_same_device(first: Tensor, others: Tuple[Tuple[str, Tensor], ...],
                      first_name: str = "q") -> None:
    """ValueError naming the argument when an array is on another device than `first`, or
    TypeError when its dtype differs."""
    for name, t in others:
        if t.device != first.device or (t.device == "cuda" and -1 not in (t.device_id,
                                                                          first.device_id)
                                         and t.device_id != first.device_id):
            raise ValueError("%s is on %s:%d but %s is on %s:%d; all arrays must be on one "
                             "device" % (name, t.device, t.device_id, first_name, first.device,
                                         first.device_id))
        if t.dtype != first.dtype:
            raise TypeError("%s has dtype %s but %s has %s; q, k, v and out must share one "
                            "dtype" % (name, dtype_name(t.dtype), first_name,
                                       dtype_name(first.dtype)))


def check_out(tq: Tensor, to: Tensor) -> None:
    """ValueError naming `out` when it is read-only, wrongly shaped or elsewhere."""
    if not to.writable:
        raise ValueError("out: the array is read-only; pass a writable array")
    check_same_device(tq, (("out", to),))
    if tuple(to.shape) != tuple(tq.shape):
        raise ValueError("out: shape %r; expected q's shape %r" % (tuple(to.shape),
                                                                   tuple(tq.shape)))
