# bindings/python/psa/_api.py -- the one-call layer: psa.attention (PSA presets, dense, any
# method by config) and psa.sparse_attention (the MindIE-SD-shaped vendor call), on NumPy
# arrays and on PyTorch / CuPy / DLPack / CUDA-array-interface tensors, CPU or CUDA by where
# the data lives. Contexts are cached by everything that changes the plan, so a repeated
# call plans nothing and allocates nothing of its own.
"""One-call attention: psa.attention, psa.sparse_attention, psa.clear_cache."""

from __future__ import annotations

import collections
import sys
import threading
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple, Union

from . import capi
from ._config import Config, Method, Value
from ._context import Context, StreamLike, check_out, check_same_device, stream_handle
from ._tensors import (Tensor, allocate, describe, describe_flat, framework_stream, host_bytes,
                       parse_layout)

_INT64_MAX = 2**63 - 1

DEFAULT_MODEL = "Wan2.1_1.3b"
"""The model whose default preset psa.attention uses when given no model and no config."""

ConfigLike = Union[None, Config, Mapping[str, Value]]


# ---- the context cache ---------------------------------------------------------------------
class _Entry:
    """One cached context: used by one thread at a time (lock), with its planned workspace
    size and, on the CPU, a host workspace reused by every call."""

    __slots__ = ("context", "lock", "needed", "host_workspace", "warmup_steps", "device")

    def __init__(self, context: Context, warmup_steps: int, device: str) -> None:
        self.context = context
        self.lock = threading.Lock()
        self.needed: Optional[int] = None
        self.host_workspace: Any = None
        self.warmup_steps = warmup_steps
        self.device = device


class _Cache:
    """A bounded, thread-safe LRU map from plan keys to contexts."""

    def __init__(self, capacity: int = 64) -> None:
        self._entries: "collections.OrderedDict[Hashable, _Entry]" = collections.OrderedDict()
        self._lock = threading.Lock()
        self.capacity = capacity
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, make: Any) -> _Entry:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry
            self.misses += 1
        made: _Entry = make()  # outside the lock: creating a CUDA context takes a while
        with self._lock:
            entry = self._entries.setdefault(key, made)
            self._entries.move_to_end(key)
            evicted = self._pop_oldest_locked()
        if entry is not made:
            evicted.append(made)
        for old in evicted:
            _retire(old)
        return entry

    def resize(self, capacity: int) -> None:
        """Sets the bound and retires the least recently used entries above it."""
        with self._lock:
            self.capacity = capacity
            evicted = self._pop_oldest_locked()
        for old in evicted:
            _retire(old)

    def _pop_oldest_locked(self) -> List[_Entry]:
        evicted = []
        while len(self._entries) > self.capacity:
            evicted.append(self._entries.popitem(last=False)[1])
        return evicted

    def clear(self) -> None:
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
            self.hits = self.misses = 0
        for entry in entries:
            _retire(entry)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def _retire(entry: _Entry) -> None:
    """Destroys an entry's context once nothing of it is pending: on CUDA, stats() waits for
    the last forward's stream (the plan's device memory is freed with the context)."""
    with entry.lock:
        if entry.device == "cuda" and entry.context._handle is not None:
            try:
                entry.context.stats()
            except Exception:  # no forward yet (or it failed): nothing pending
                pass
        entry.context.close()


_CACHE = _Cache()


def clear_cache() -> None:
    """Destroys every cached context (waiting on CUDA for their last forwards), frees
    their plans and host workspaces and zeroes the hit/miss counters. Later calls plan
    again."""
    _CACHE.clear()


def cache_info() -> Dict[str, int]:
    """``{"size", "capacity", "hits", "misses"}`` of the context cache."""
    return {"size": len(_CACHE), "capacity": _CACHE.capacity, "hits": _CACHE.hits,
            "misses": _CACHE.misses}


def set_cache_capacity(capacity: int) -> None:
    """Bounds the context cache (default 64 contexts; least recently used go first)."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError("capacity = %r: expected an int >= 1" % (capacity,))
    _CACHE.resize(capacity)


# ---- configs -------------------------------------------------------------------------------
_PRESETS: Dict[Tuple[str, Optional[str]], Config] = {}
_PRESETS_LOCK = threading.Lock()


def _preset(model: str, preset: Optional[str]) -> Config:
    with _PRESETS_LOCK:
        cfg = _PRESETS.get((model, preset))
        if cfg is None:
            cfg = Config.load(model, preset)
            _PRESETS[(model, preset)] = cfg
        return cfg.copy()


def _resolve_config(model: Optional[str], preset: Optional[str], config: ConfigLike) -> Config:
    if isinstance(config, Config):
        if model is not None or preset is not None:
            raise ValueError("config: pass either config=psa.Config(...) or model=/preset=, "
                             "not both (a dict config= holds overrides of the preset)")
        return config.copy()
    if model is not None and not isinstance(model, str):
        raise TypeError("model = %r: expected a model name (str), e.g. %r"
                        % (model, DEFAULT_MODEL))
    if preset is not None and not isinstance(preset, str):
        raise TypeError("preset = %r: expected a preset name (str)" % (preset,))
    cfg = _preset(model if model is not None else DEFAULT_MODEL, preset)
    if config is not None:
        if not isinstance(config, Mapping):
            raise TypeError("config = %r: expected a psa.Config or a dict of parameter "
                            "overrides" % (config,))
        cfg.update(dict(config))
    return cfg


# ---- arguments shared by every entry (attention, sparse_attention, psa.torch, psa.jax) --------
_FLT_MAX = 3.4028234663852886e+38  # the largest scale: the kernels compute in float


def check_scale(scale: Any) -> float:
    """The softmax scale as a float; 0.0 for None (libpsa's 1/sqrt(head_dim)); ValueError
    for anything else than a number in (0, FLT_MAX]."""
    if scale is None:
        return 0.0
    if not isinstance(scale, bool) and isinstance(scale, (int, float)):
        try:
            value = float(scale)
        except OverflowError:  # an int past the float range
            value = float("inf")
        if 0.0 < value <= _FLT_MAX:
            return value
    raise ValueError("scale = %r: expected a float in (0, %r] (None: 1/sqrt(head_dim))"
                     % (scale, _FLT_MAX))


# ---- arrays --------------------------------------------------------------------------------
def _check_inference(*arrays: Any, names: Tuple[str, ...] = ("q", "k", "v")) -> None:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    # Forward-mode AD (a dual tensor's tangent) would be dropped: no derivative, no error.
    for name, a in zip(names, arrays):
        if isinstance(a, torch.Tensor) and \
                torch.autograd.forward_ad.unpack_dual(a).tangent is not None:
            raise RuntimeError("%s is a dual tensor (forward-mode AD): libpsa is inference "
                               "only (no derivative)" % name)
    if not torch.is_grad_enabled():
        return
    for name, a in zip(names, arrays):
        if getattr(a, "requires_grad", False):
            raise RuntimeError("%s requires grad: libpsa is inference only (no backward); run "
                               "under torch.no_grad() / torch.inference_mode() or detach()"
                               % name)


def _gpu_allocator_template(t: Tensor, obj: Any) -> Any:
    """The array whose framework allocates this call's device memory: q itself for PyTorch
    and CuPy; otherwise a PyTorch/CuPy tensor on q's device when one of them is loaded."""
    if t.framework in ("torch", "cupy"):
        return obj
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.empty((0,), device="cuda:%d" % max(t.device_id, 0))
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        with cupy.cuda.Device(max(t.device_id, 0)):
            return cupy.empty((0,))
    raise TypeError("q: a CUDA %s array, and neither PyTorch nor CuPy is loaded to allocate "
                    "the output and workspace; import torch or cupy, or use PyTorch/CuPy "
                    "arrays" % type(obj).__name__)


class _StreamScope:
    """Makes `stream` the framework's current stream while device memory is allocated, so
    the caching allocator (PyTorch) or pool (CuPy) orders the memory's reuse after this
    call's kernels. A no-op when the stream already is the current one."""

    def __init__(self, template: Any, stream: int, current: Optional[int]) -> None:
        self._ctx: Any = None
        if current is None or stream == current:
            return
        module = type(template).__module__.split(".")[0]
        if module == "torch":
            torch = sys.modules["torch"]
            self._ctx = torch.cuda.stream(torch.cuda.ExternalStream(stream,
                                                                    device=template.device))
        elif module == "cupy":
            cupy = sys.modules["cupy"]
            self._ctx = cupy.cuda.ExternalStream(stream)

    def __enter__(self) -> None:
        if self._ctx is not None:
            self._ctx.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


def _run(key_extra: Hashable, make_config: Any, q: Any, k: Any, v: Any, layout: str,
         out: Any, return_lse: bool, stream: StreamLike, step: Optional[int],
         grid: Optional[Tuple[int, int, int, int, int]],
         names: Tuple[str, str, str] = ("q", "k", "v")) -> Any:
    """Shared body of attention() and sparse_attention(): describe and check the arrays,
    find or make the cached context, allocate out/lse/workspace, run one forward."""
    parse_layout(layout)
    _check_inference(q, k, v, names=names)
    tq = describe(q, names[0], layout)
    tk = describe(k, names[1], layout)
    tv = describe(v, names[2], layout)
    check_same_device(tq, ((names[1], tk), (names[2], tv)), first_name=names[0])
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or
                             not 0 <= step <= _INT64_MAX):
        raise ValueError("step = %r: expected None (sparse) or an int >= 0" % (step,))
    if not isinstance(return_lse, bool):
        raise TypeError("return_lse = %r: expected a bool" % (return_lse,))

    device = tq.device
    current: Optional[int] = None
    if device == "cuda":
        current = framework_stream(q)
        stream_int = stream_handle(stream) if stream is not None else (current or 0)
    else:
        if stream is not None:
            stream_handle(stream)  # type-check only: the CPU backend is synchronous
        stream_int = 0

    if out is not None:
        _check_inference(out, names=("out",))  # a write autograd would not see
        to = describe(out, "out", layout)
        check_out(tq, to)

    key = (device, tq.device_id, tq.dtype, tq.shape, tq.strides, tk.shape, tk.strides,
           tv.strides, layout.lower(), key_extra)

    def make() -> _Entry:
        cfg: Config = make_config()
        ctx = Context(cfg, backend=device, device=tq.device_id if device == "cuda" else -1)
        if grid is not None:
            ctx.set_video_grid(*grid)
        # Rejects what libpsa cannot run (zero strides, absurd shapes) before anything is
        # allocated for it.
        capi.psa_check_supported(ctx.handle, tq.desc, tk.desc, tv.desc, None)
        return _Entry(ctx, int(cfg["warmup_steps"]), device)

    # The context first: a build without the CUDA backend says so (psa.Error) before
    # anything is asked of a framework.
    entry = _CACHE.get(key, make)
    template = _gpu_allocator_template(tq, q) if device == "cuda" else q
    if out is None and template is not q:
        raise TypeError("out: a %s array cannot be allocated here; pass out= (a writable "
                        "CUDA array of q's shape and dtype)" % type(q).__name__)
    while True:
        entry.lock.acquire()
        if entry.context._handle is not None:
            break
        # clear_cache() or an eviction retired it meanwhile: plan again.
        entry.lock.release()
        entry = _CACHE.get(key, make)
    try:
        ctx = entry.context
        handle = ctx.handle
        lse_obj, lse_address, lse_keep = None, 0, None
        ws_address, ws_keep = 0, None
        # Every array this call allocates comes from the framework on the call's stream.
        with _StreamScope(template, stream_int, current):
            if out is None:
                out = allocate(q, device)
                to = describe(out, "out", layout)
            if entry.needed is None:
                entry.needed = int(capi.psa_workspace_size(handle, tq.desc, tk.desc, tv.desc,
                                                           to.desc))
            needed = entry.needed
            if return_lse:
                batch, heads, seq = (int(to.desc.get_shape(i)) for i in range(3))
                lse_obj = allocate(template, device, shape=(batch, heads, seq), float32=True)
                lse_address, _, _, lse_keep = describe_flat(lse_obj, "lse")
            if needed and device == "cuda":
                ws = allocate(template, device, nbytes=needed)
                ws_address, _, _, ws_keep = describe_flat(ws, "workspace")
        if needed and device == "cpu":
            if entry.host_workspace is None:
                entry.host_workspace = host_bytes(needed, "workspace")
            ws_address = int(entry.host_workspace.ctypes.data)
        capi.psa_context_set_step(handle, step if step is not None else entry.warmup_steps)
        capi.psa_attention_forward(handle, tq.desc, tq.address, tk.desc, tk.address, tv.desc,
                                   tv.address, to.desc, to.address, lse_address or None,
                                   ws_address or None, needed, stream_int or None)
        del ws_keep, lse_keep
    finally:
        entry.lock.release()
    return (out, lse_obj) if return_lse else out


def _grid_triple(grid: Any, what: str = "grid") -> Tuple[int, int, int]:
    """`grid` as (t, h, w): three ints >= 1 (bools and fractions refused), else ValueError
    naming `what`."""
    try:
        t, h, w = (int(x) for x in grid)
        valid = all(not isinstance(x, bool) and int(x) == x for x in grid)
    except (TypeError, ValueError, OverflowError):
        valid = False
    if not valid or min(t, h, w) < 1:
        raise ValueError("%s = %r: expected three ints (t, h, w) >= 1" % (what, grid))
    return t, h, w


def _check_grid(grid: Optional[Sequence[int]], text_length: int, seq_len: int,
                what: str = "grid") -> Optional[Tuple[int, int, int]]:
    if isinstance(text_length, bool) or not isinstance(text_length, int) or text_length < 0:
        raise ValueError("text_length = %r: expected an int >= 0" % (text_length,))
    if grid is None:
        if text_length:
            raise ValueError("text_length = %d needs grid=(t, h, w): text tokens are placed "
                             "relative to the video grid" % text_length)
        return None
    t, h, w = _grid_triple(grid, what)
    if t * h * w + text_length != seq_len:
        raise ValueError("%s = %r with text_length = %d: t*h*w + text_length = %d, but the "
                         "sequence has %d tokens" % (what, tuple(grid), text_length,
                                                     t * h * w + text_length, seq_len))
    return t, h, w


def attention(q: Any, k: Any, v: Any, *, model: Optional[str] = None,
              preset: Optional[str] = None, config: ConfigLike = None,
              grid: Optional[Sequence[int]] = None, text_length: int = 0,
              text_first: Optional[bool] = None, layout: str = "bhld", causal: bool = False,
              scale: Optional[float] = None, step: Optional[int] = None, out: Any = None,
              return_lse: bool = False, stream: StreamLike = None, head_offset: int = 0,
              batch_offset: int = 0) -> Any:
    """Pyramid Sparse Attention of (q, k, v) in one call; returns out (or ``(out, lse)``).

    q, k, v: 4-D arrays in `layout` order, "bhld" ([B, H, L, D], as SDPA) or "blhd"
        ([B, L, H, D], as flash_attn); any strides with a contiguous head dim; float32,
        float16 or bfloat16 (CUDA: float16/bfloat16, head_dim 64 or 128). K/V may have fewer
        heads than q (GQA/MQA). NumPy arrays run on the CPU backend; PyTorch, CuPy, or any
        ``__dlpack__`` / ``__cuda_array_interface__`` array runs where its data lives. An
        array interface's pointer, shape and strides are trusted as NumPy trusts them: an
        object whose interface describes memory it does not own is read out of bounds.
    model, preset: a preset of the embedded attention_config.yaml (``psa.presets()``);
        default: Wan2.1_1.3b's default preset. config: a psa.Config instead, or a dict of
        parameter overrides applied to the preset (``{"mask_ratios.1": 0.2}``).
    grid: (t, h, w) latent video grid: the preset's token rearrangement (Gilbert curve)
        and text handling need it; the sequence must hold t*h*w + text_length tokens. With
        no grid, tokens are used in the order given (no rearrangement).
    text_length, text_first: text tokens in the sequence, before the video tokens
        (text_first=True, as CogVideoX) or after them; default: first for CogVideoX models.
    causal: causal mask (bottom-right aligned). scale: softmax scale (default 1/sqrt(D)).
    step: None runs the sparse forward (no warm-up); step=s applies the preset's warm-up
        rule (dense while s < warmup_steps), as a pipeline at denoising step s.
    out: write the result here (writable, q's shape and dtype, q's device).
    return_lse: also return the float32 [B, H, L] natural-log sum-exp of the scaled logits.
    stream: CUDA stream (int, torch.cuda.Stream, CuPy stream); default: the framework's
        current stream. The call is stream-ordered and does not synchronise.
    head_offset, batch_offset: for shards (Ulysses, CFG / batch parallelism): the index, in
        the whole tensor, of q's first head and first batch item. The importance samples
        are drawn for the global (batch, head), so the shard's output equals those rows of
        the whole forward (config keys ``head_offset`` / ``batch_offset``).

    The context and its plan are cached by device, dtype, shapes, strides, layout, config
    and grid (``psa.cache_info()``, ``psa.clear_cache()``): the second call with the same
    key plans nothing; on CUDA, out, lse and the workspace come from PyTorch's caching
    allocator or CuPy's pool (no cudaMalloc once warm). Thread-safe. Inference only.
    Errors: TypeError/ValueError naming the argument for bad Python arguments, psa.Error
    (with the library's message) for what libpsa rejects; nothing is written on error.
    """
    cfg = _resolve_config(model, preset, config)
    for name, value in (("head_offset", head_offset), ("batch_offset", batch_offset)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT64_MAX:
            raise ValueError("%s = %r: expected an int >= 0" % (name, value))
        if value:
            cfg[name] = value
    if not isinstance(causal, bool):
        raise TypeError("causal = %r: expected a bool" % (causal,))
    if causal:
        cfg["causal"] = True
    if scale is not None:
        cfg["scale"] = check_scale(scale)
    axes = parse_layout(layout)
    # The grid describes the key sequence; q follows it too unless it is a shard of the
    # queries (use_rearrange off: libpsa then says so when they differ).
    q_shape = _shape4(q, "q", layout)
    try:
        k_shape = _shape4(k, "k", layout)
    except (TypeError, ValueError):
        k_shape = q_shape  # _run names k's problem
    seq_len = k_shape[axes[2]]
    g = _check_grid(grid, text_length, seq_len)
    if g is None:
        cfg["use_rearrange"] = False
        full_grid = None
    else:
        if text_first is None:
            name = model if model is not None else ("" if isinstance(config, Config)
                                                    else DEFAULT_MODEL)
            text_first = name.lower().startswith("cogvideo")
        if not isinstance(text_first, bool):
            raise TypeError("text_first = %r: expected a bool or None" % (text_first,))
        position = (int(capi.PSA_TEXT_NONE) if text_length == 0 else
                    int(capi.PSA_TEXT_FIRST) if text_first else int(capi.PSA_TEXT_LAST))
        full_grid = (g[0], g[1], g[2], text_length, position)
    fingerprint = cfg.fingerprint()
    return _run(("attention", fingerprint, full_grid), lambda: cfg, q, k, v, layout, out,
                return_lse, stream, step, full_grid)


def _shape4(obj: Any, name: str, layout: str) -> Tuple[int, ...]:
    """The 4-D shape (caller's order) of an array: its .shape, or what its array interface
    or DLPack capsule says for objects without one; describe() gives the precise error (not
    an array, not 4-D, dtype)."""
    shape = getattr(obj, "shape", None)
    try:
        dims = tuple(int(x) for x in shape) if shape is not None else None
    except (TypeError, ValueError):
        dims = None
    if dims is None or len(dims) != 4:
        dims = tuple(describe(obj, name, layout).shape)
    return dims


_SPARSE_TYPES = {None: Method.DENSE, "rf_v2": Method.RF_V2, "ada_bsa": Method.ADA_BSA}
_VENDOR_LAYOUTS = {"BNSD": "bnsd", "BSND": "bsnd"}


def sparse_attention(query: Any, key: Any, value: Any, attn_mask: Any = None,
                     scale: Optional[float] = None, is_causal: bool = False,
                     head_num: Optional[int] = None, input_layout: str = "BNSD",
                     inner_precise: int = 0, sparse_type: Optional[str] = None,
                     txt_len: int = 0, block_size: int = 128,
                     latent_shape_q: Optional[Sequence[int]] = None,
                     latent_shape_k: Optional[Sequence[int]] = None, keep_sink: bool = True,
                     keep_recent: bool = True, cdf_threshold: float = 1.0,
                     sparsity: float = 0.0, *, out: Any = None,
                     stream: StreamLike = None) -> Any:
    """The MindIE-SD ``sparse_attention`` call, with its names and defaults, on CPU and CUDA
    arrays: porting code is an import change (``from psa import sparse_attention``).

    sparse_type: None (dense), "rf_v2" (RainFusion2.0) or "ada_bsa" (adaptive block-sparse).
    input_layout: "BNSD" ([B, N, S, D]) or "BSND". head_num: must equal N when given.
    sparsity: fraction of key blocks to skip, [0, 1). txt_len: text tokens at the FRONT of
    the sequence. latent_shape_q: (t, h, w) of the video latent, t*h*w = S - txt_len;
    required for rf_v2 (t = 1 for an image). latent_shape_k is accepted and unused, as in the
    vendor call. keep_sink, keep_recent, cdf_threshold: ada_bsa's ranking options.
    scale: softmax scale (None: 1/sqrt(D)). is_causal: ada_bsa and dense only.
    block_size must be 128; inner_precise (0/1) is accepted and ignored: the softmax is
    always fp32. attn_mask must be None.
    The semantics are those of the C ``psa_sparse_attention`` (rainfusion-adabsa spec, with
    its fixes: one mask per batch item, no failure at sparsity edges or for an image with
    an unaligned grid, key tails kept); K/V may also have fewer heads than q (GQA).
    out / stream: as psa.attention. Contexts are cached as for psa.attention.
    """
    if attn_mask is not None:
        raise ValueError("attn_mask: must be None (block-sparse masks come from sparse_type)")
    if not (sparse_type is None or isinstance(sparse_type, str)) or \
            sparse_type not in _SPARSE_TYPES:
        raise ValueError("sparse_type = %r: expected None, 'rf_v2' or 'ada_bsa'"
                         % (sparse_type,))
    method = _SPARSE_TYPES[sparse_type]
    layout = _VENDOR_LAYOUTS.get(input_layout.upper()) if isinstance(input_layout, str) else None
    if layout is None:
        raise ValueError("input_layout = %r: expected 'BNSD' or 'BSND'" % (input_layout,))
    if isinstance(block_size, bool) or block_size != 128:
        raise ValueError("block_size = %r: only 128 is supported" % (block_size,))
    if inner_precise not in (0, 1) or isinstance(inner_precise, bool):
        raise ValueError("inner_precise = %r: expected 0 or 1" % (inner_precise,))
    for name, flag in (("is_causal", is_causal), ("keep_sink", keep_sink),
                       ("keep_recent", keep_recent)):
        if not isinstance(flag, (bool, int)) or flag not in (0, 1):
            raise ValueError("%s = %r: expected a bool" % (name, flag))
    for name, number in (("sparsity", sparsity), ("cdf_threshold", cdf_threshold)):
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise TypeError("%s = %r: expected a float" % (name, number))
    if not 0.0 <= sparsity < 1.0:
        raise ValueError("sparsity = %r: expected a float in [0, 1)" % (sparsity,))
    if not 0.0 < cdf_threshold <= 1.0:
        raise ValueError("cdf_threshold = %r: expected a float in (0, 1]" % (cdf_threshold,))
    scale_value = check_scale(scale)  # 0.0: 1/sqrt(head_dim)
    axes = parse_layout(layout)
    shape = _shape4(query, "query", layout)
    heads, seq_len = int(shape[axes[1]]), int(shape[axes[2]])
    if head_num is not None and (isinstance(head_num, bool) or head_num != heads):
        raise ValueError("head_num = %r: query has %d heads (N of %s)"
                         % (head_num, heads, input_layout.upper()))
    if isinstance(txt_len, bool) or not isinstance(txt_len, int) or not 0 <= txt_len <= seq_len:
        raise ValueError("txt_len = %r: expected an int in [0, S = %d]" % (txt_len, seq_len))
    grid: Optional[Tuple[int, int, int, int, int]] = None
    if latent_shape_q is None:
        if method == Method.RF_V2:
            raise ValueError("latent_shape_q: required for sparse_type='rf_v2'; pass (t, h, w) "
                             "with t*h*w = S - txt_len = %d (t = 1 for an image)"
                             % (seq_len - txt_len))
    else:
        t, h, w = _check_grid(latent_shape_q, txt_len, seq_len, "latent_shape_q")  # type: ignore[misc]
        if method == Method.RF_V2:
            grid = (t, h, w, txt_len,
                    int(capi.PSA_TEXT_FIRST) if txt_len else int(capi.PSA_TEXT_NONE))
    del latent_shape_k  # accepted for the vendor signature; never read (as upstream)
    params = (int(method), float(sparsity), float(cdf_threshold), int(keep_sink),
              int(keep_recent), scale_value, int(is_causal))

    def make_config() -> Config:
        # The vendor defaults as a config: 128 x 128 blocks, no warm-up, no rearrange flag
        # (rf_v2 orders its own tokens); the same as the C psa_sparse_attention.
        cfg = Config()
        cfg["type"] = method
        cfg["block_size.m"] = 128
        cfg["block_size.n"] = 128
        cfg["sparsity"] = float(sparsity)
        cfg["cdf_threshold"] = float(cdf_threshold)
        cfg["keep_sink"] = int(keep_sink)
        cfg["keep_recent"] = int(keep_recent)
        cfg["scale"] = scale_value
        cfg["causal"] = int(is_causal)
        return cfg

    return _run(("sparse_attention", params, grid), make_config, query, key, value, layout,
                out, False, stream, None, grid, names=("query", "key", "value"))
