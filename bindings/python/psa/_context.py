# bindings/python/psa/_context.py -- psa.Context: a config bound to a backend, used as a
# context manager; forward() takes NumPy arrays (CPU backend) or DLPack /
# __cuda_array_interface__ tensors (CUDA backend) and writes into `out` or a new array.
"""Contexts and the forward call."""

import collections

from . import capi
from ._config import Config
from ._errors import Error
from ._tensors import allocate_like, describe, describe_flat, framework_stream, is_cuda_device

_BACKENDS = {"auto": capi.PSA_BACKEND_AUTO, "cpu": capi.PSA_BACKEND_CPU,
             "cuda": capi.PSA_BACKEND_CUDA}
_TEXT_POSITIONS = {"none": capi.PSA_TEXT_NONE, "first": capi.PSA_TEXT_FIRST,
                   "last": capi.PSA_TEXT_LAST}

Stats = collections.namedtuple("Stats", [
    "density", "ran_dense", "step", "call_index", "level_fraction", "query_blocks",
    "key_blocks", "stage_ms"])
Stats.__doc__ = """Statistics of a context's last forward. level_fraction maps the level
(1, 2, 4, 8, 0 = skipped) to its fraction of block pairs; stage_ms maps the stage name to
host milliseconds (CPU backend only)."""

_LEVELS = ((1, capi.PSA_STAT_LEVEL_1), (2, capi.PSA_STAT_LEVEL_2), (4, capi.PSA_STAT_LEVEL_4),
           (8, capi.PSA_STAT_LEVEL_8), (0, capi.PSA_STAT_LEVEL_SKIP))
_STAGES = (("rearrange", capi.PSA_STAGE_REARRANGE), ("pool", capi.PSA_STAGE_POOL),
           ("importance", capi.PSA_STAGE_IMPORTANCE), ("mask", capi.PSA_STAGE_MASK),
           ("attention", capi.PSA_STAGE_ATTENTION), ("inverse", capi.PSA_STAGE_INVERSE),
           ("total", capi.PSA_STAGE_TOTAL))


def _lookup(table, value, what):
    if isinstance(value, str):
        try:
            return table[value.lower()]
        except KeyError:
            raise ValueError("%s %r: expected one of %s" % (what, value, ", ".join(table)))
    return int(value)


def _stream_handle(stream):
    """A CUDA stream as an int: None/0 (legacy default), an int, or an object with
    .cuda_stream (PyTorch) or .ptr (CuPy)."""
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    return int(stream)


class Context:
    """A config bound to a backend, with cached per-shape plans and the warm-up counter.

        with psa.Context(psa.Config.load("Wan2.1_1.3b"), backend="cpu") as ctx:
            ctx.set_video_grid(4, 16, 16)
            out = ctx.forward(q, k, v)

    One context must not be used by two threads at once. Closing (or leaving the `with`
    block) destroys the native context; on CUDA the caller must make sure no forward using
    it is still pending on a stream.
    """

    def __init__(self, config=None, backend="auto", device=-1):
        if config is None:
            config = Config()
        elif isinstance(config, str):
            config = Config.load(config)
        self._handle = capi.psa_context_create(config._handle,
                                               _lookup(_BACKENDS, backend, "backend"), device)
        self._workspace = None  # (array, nbytes, device): reused by forwards

    # -- lifetime ----------------------------------------------------------------------
    def close(self):
        """Destroys the native context now (idempotent)."""
        self._workspace = None
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def handle(self):
        if self._handle is None:
            raise Error(capi.PSA_ERR_INVALID_STATE, "the context is closed")
        return self._handle

    # -- state -------------------------------------------------------------------------
    @property
    def backend(self):
        """"cpu" or "cuda": the backend actually chosen."""
        return "cuda" if capi.psa_context_backend(self.handle) == capi.PSA_BACKEND_CUDA else "cpu"

    @property
    def config(self):
        """A copy of the context's config."""
        return Config(capi.psa_context_get_config(self.handle))

    def set_video_grid(self, t, h, w, text_length=0, text_position="none"):
        """Token grid of the sequences that follow: t*h*w video tokens plus text_length text
        tokens at text_position ("none", "first", "last")."""
        capi.psa_context_set_video_grid(self.handle, t, h, w, text_length,
                                        _lookup(_TEXT_POSITIONS, text_position, "text_position"))

    def set_video_pixels(self, frames, height, width, text_length=-1, text_position="none"):
        capi.psa_context_set_video_pixels(self.handle, frames, height, width, text_length,
                                          _lookup(_TEXT_POSITIONS, text_position, "text_position"))

    def clear_video_grid(self):
        capi.psa_context_clear_video_grid(self.handle)

    def set_step(self, step):
        """Pins the denoising step (>= 0); -1 returns to counting forwards."""
        capi.psa_context_set_step(self.handle, step)

    def reset_calls(self):
        capi.psa_context_reset_calls(self.handle)

    def next_step(self):
        """(step, dense) of the next forward."""
        step, dense = capi.psa_context_next_step(self.handle)
        return step, bool(dense)

    def stats(self):
        """psa.Stats of the last forward (on CUDA this waits for that forward's stream)."""
        s = capi.psa_stats()
        capi.psa_context_get_stats(self.handle, s)
        return Stats(s.density, bool(s.ran_dense), s.step, s.call_index,
                     {level: s.get_level_fraction(i) for level, i in _LEVELS},
                     s.query_blocks, s.key_blocks,
                     {name: s.get_stage_ms(i) for name, i in _STAGES})

    # -- queries and forward -----------------------------------------------------------
    def check_supported(self, q, k, v, out=None, layout="bhld"):
        """Raises psa.Error with the reason when a forward on these tensors would fail."""
        tq, tk, tv = (describe(x, n, layout) for x, n in ((q, "q"), (k, "k"), (v, "v")))
        to = describe(out, "out", layout) if out is not None else None
        capi.psa_check_supported(self.handle, tq.desc, tk.desc, tv.desc,
                                 to.desc if to is not None else None)

    def workspace_size(self, q, k, v, out=None, layout="bhld"):
        """Workspace bytes a forward on these tensors needs (and plans the shape)."""
        tq, tk, tv = (describe(x, n, layout) for x, n in ((q, "q"), (k, "k"), (v, "v")))
        to = describe(out, "out", layout) if out is not None else tq
        return capi.psa_workspace_size(self.handle, tq.desc, tk.desc, tv.desc, to.desc)

    def forward(self, q, k, v, out=None, lse=None, layout="bhld", stream=None,
                workspace=None):
        """Sparse attention of (q, k, v); returns `out` (or (out, lse) when lse is given).

        q, k, v: 4-D tensors in `layout` order -- "bhld" ([B, H, L, D], PyTorch SDPA's) or
            "blhd" ([B, L, H, D]); any strides with a contiguous head dim. NumPy arrays
            (CPU backend), or objects exporting __dlpack__ or __cuda_array_interface__.
        out: written in place when given, else allocated like q (NumPy, PyTorch, CuPy).
        lse: True to allocate the fp32 [B, H, L] log-sum-exp, or a contiguous fp32 buffer.
        stream: CUDA stream (int, or an object with .cuda_stream / .ptr); default: PyTorch's
            or CuPy's current stream for their tensors, else the legacy default stream.
            DLPack producers are asked to order their pending work before it;
            __cuda_array_interface__ objects are used as they are (their producer's stream
            is not waited on: order that work yourself, or pass DLPack objects).
        workspace: a byte buffer on the backend's device; default: one the context keeps
            and grows (reused by later forwards: pass your own per stream when forwards of
            one context run concurrently on several streams).
        """
        handle = self.handle
        if stream is None:
            stream = framework_stream(q) if _is_cuda_object(q) else None
        stream = _stream_handle(stream)
        tq = describe(q, "q", layout, stream)
        tk = describe(k, "k", layout, stream)
        tv = describe(v, "v", layout, stream)
        if out is None:
            out = allocate_like(q, tq.device, tq.desc.dtype)
        to = describe(out, "out", layout, stream)
        lse_address, lse_obj, lse_keep = 0, None, None
        if lse is not None and lse is not False:
            batch, heads, seq = (to.desc.get_shape(i) for i in range(3))
            lse_obj = (allocate_like(q, tq.device, tq.desc.dtype, shape=(batch, heads, seq))
                       if lse is True else lse)
            lse_address, lse_bytes, _, lse_keep = describe_flat(lse_obj, "lse", stream)
            if lse_bytes < 4 * batch * heads * seq:
                raise Error(capi.PSA_ERR_BUFFER_TOO_SMALL,
                            "lse: %d bytes; need %d (fp32 [%d, %d, %d])"
                            % (lse_bytes, 4 * batch * heads * seq, batch, heads, seq))
        needed = capi.psa_workspace_size(handle, tq.desc, tk.desc, tv.desc, to.desc)
        ws_address, ws_keep = 0, None
        if workspace is not None:
            ws_address, ws_bytes, _, ws_keep = describe_flat(workspace, "workspace", stream)
        elif needed:
            ws = self._workspace
            if ws is None or ws[1] < needed or ws[2] != (tq.device, tq.device_id):
                ws = (allocate_like(q, tq.device, tq.desc.dtype, nbytes=needed), needed,
                      (tq.device, tq.device_id))
                self._workspace = ws
            ws_address, ws_bytes, _, ws_keep = describe_flat(ws[0], "workspace", stream)
        else:
            ws_bytes = 0
        capi.psa_attention_forward(handle, tq.desc, tq.address, tk.desc, tk.address, tv.desc,
                                   tv.address, to.desc, to.address, lse_address or None,
                                   ws_address or None, ws_bytes, stream or None)
        del tq, tk, tv, ws_keep, lse_keep  # the capsules stay alive until the call returned
        return (out, lse_obj) if lse_obj is not None else out


def _is_cuda_object(obj):
    # DLPack first: PyTorch's __cuda_array_interface__ raises TypeError for bfloat16.
    try:
        if hasattr(obj, "__dlpack_device__"):
            return is_cuda_device(obj.__dlpack_device__()[0])
        return hasattr(obj, "__cuda_array_interface__")
    except Exception:  # a property that refuses this tensor: not ours to decide here
        return False
