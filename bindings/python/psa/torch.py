# bindings/python/psa/torch.py -- libpsa's forward as a PyTorch custom op (psa::attention,
# psa::attention_lse) with fake (meta) implementations, so torch.compile(fullgraph=True)
# traces models that call it; the real implementation is the one-call layer (psa.attention):
# current CUDA stream, out/lse/workspace from torch's caching allocator, cached plans.
# Imported on demand only (`import psa.torch`): `import psa` never imports torch.
"""PyTorch custom op for Pyramid Sparse Attention.

::

    import psa.torch
    out = psa.torch.attention(q, k, v, model="Wan2.1_1.3b", grid=(21, 30, 52))
    out = torch.ops.psa.attention(q, k, v, psa.torch.config_key("Wan2.1_1.3b"),
                                  [21, 30, 52], 0, False, "bhld", False, None, None)

:func:`attention` takes the keyword arguments of :func:`psa.attention` and calls the op
``psa::attention`` (``psa::attention_lse`` with ``return_lse=True``). Everything that changes
the result is an argument of the op: the config as a string key (:func:`config_key`: the
model, the preset and the overrides, or every parameter of a ``psa.Config``; the key
describes the config completely, so a compiled graph that holds it needs no other state),
the grid, the text tokens and their position, the layout, causal, the scale and the step.

The op works on CPU tensors (CPU backend) and CUDA tensors (CUDA backend, the current
stream; inside ``torch.cuda.graph`` capture once the same shapes ran outside it). It is
inference only: inputs that require grad with grad mode on, and inputs that carry a
forward-mode tangent (``torch.func.jvp``, ``torch.autograd.forward_ad``), raise a RuntimeError
saying so.

The op checks its arguments the same way in its real and its fake (meta) implementation
(one function): q, k, v on one device, a dtype libpsa runs (float32, float16, bfloat16), 4-D,
the head dim contiguous, no empty dimension, the shapes of one attention, the grid against
the sequence length; so torch.compile fails when it traces a call that would fail eagerly,
with the same message (what only libpsa knows, such as a backend's dtype or head_dim
limits, is still checked when the op runs).
"""

from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
import torch.autograd.forward_ad as _forward_ad

from . import _api, capi
from ._errors import Error
from ._keys import ConfigArg, config_from_key, make_key
from ._tensors import check_torch_strided, parse_layout

__all__ = ["attention", "config_key", "config_from_key", "OP_NAME", "OP_LSE_NAME"]

OP_NAME = "psa::attention"
OP_LSE_NAME = "psa::attention_lse"

_INFERENCE_ONLY = ("%s is inference only (libpsa has no backward): run it under "
                   "torch.no_grad() / torch.inference_mode(), or pass tensors that do not "
                   "require grad")
_NO_FORWARD_AD = ("%s is inference only (libpsa has no derivative): forward-mode AD "
                  "(torch.func.jvp / jacfwd, torch.autograd.forward_ad dual tensors) is not "
                  "supported; pass tensors without tangents")


# ---- config keys: psa._keys (shared with psa.jax) -----------------------------------------
_make_key = make_key


def _constant_key_impl(model: Optional[str], preset: Optional[str],
                  config: ConfigArg) -> Tuple[str, bool]:
    """(key, whether the key's model is a CogVideoX one: text first by default)."""
    key = _make_key(model, preset, config)
    return key, key.lower().startswith("model=cogvideo")


# Under torch.compile the key is computed once, when the graph is traced, and held as a
# constant (a psa.Config argument is guarded by identity).
_constant_key: Callable[[Optional[str], Optional[str], ConfigArg], Tuple[str, bool]] = \
    torch.compiler.assume_constant_result(_constant_key_impl)


def config_key(model: Optional[str] = None, preset: Optional[str] = None,
               config: ConfigArg = None) -> str:
    """The op's string key for a config: ``model`` / ``preset`` (default: psa.DEFAULT_MODEL's
    default preset) with `config` a dict of overrides (``{"mask_ratios.1": 0.2}``), or
    `config` a psa.Config (every parameter is written into the key), or `config` an existing
    key. The key is validated (psa.Error for an unknown model, preset or key)."""
    return _make_key(model, preset, config)


# ---- argument checks (shared by the real and the fake implementation) -----------------------
_INT64_MAX = 2**63 - 1
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_ITEMSIZE = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2}
_DIM_NAMES = ("batch", "heads", "seq_len", "head_dim")


def _check_tensor(x: Any, name: str, layout: str) -> None:
    """TypeError/ValueError naming `name` when x is not a 4-D torch tensor of a dtype libpsa
    runs, on a device it runs on (meta: shape inference, the fake implementation only)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError("%s: %s is not a torch.Tensor: psa.torch takes torch tensors "
                        "(psa.attention also takes NumPy and DLPack arrays)"
                        % (name, type(x).__name__))
    check_torch_strided(x, name)
    if x.dtype not in _DTYPES:
        raise TypeError("%s: dtype %s is not supported: expected torch.float32, "
                        "torch.float16 or torch.bfloat16" % (name, x.dtype))
    if x.device.type not in ("cpu", "cuda", "meta"):
        raise ValueError("%s: device %s is not supported: expected cpu or cuda"
                         % (name, x.device))
    if x.dim() != 4:
        raise ValueError("%s: shape %r has %d dimensions; expected 4 in %s order"
                         % (name, tuple(x.shape), x.dim(), layout.upper()))


def _check_same(q: torch.Tensor, others: Sequence[Tuple[str, torch.Tensor]]) -> None:
    for name, x in others:
        if x.device != q.device:
            raise ValueError("%s is on %s but q is on %s; q, k, v and out must be on one "
                             "device" % (name, x.device, q.device))
        if x.dtype != q.dtype:
            raise TypeError("%s has dtype %s but q has %s; q, k, v and out must share one "
                            "dtype" % (name, str(x.dtype).replace("torch.", ""),
                                       str(q.dtype).replace("torch.", "")))


def _concrete(values: Sequence[Any]) -> bool:
    return all(type(x) is int for x in values)


def _check_desc(name: str, shape: Sequence[Any], strides: Sequence[Any], itemsize: int) -> None:
    """libpsa's check of one descriptor ([B, H, L, D] shape and strides), with its status and
    message (core/tensor.cpp check_one)."""
    for i in range(4):
        if shape[i] < 1:
            raise Error(int(capi.PSA_ERR_INVALID_SHAPE), "%s: shape[%d] (%s) = %d; must be >= 1"
                        % (name, i, _DIM_NAMES[i], shape[i]))
    if strides[3] != 1:
        raise Error(int(capi.PSA_ERR_INVALID_STRIDE), "%s: strides[3] (head_dim) = %d; the "
                    "head dim must be contiguous (stride 1)" % (name, strides[3]))
    if not (_concrete(shape) and _concrete(strides)):
        return  # symbolic (torch.compile dynamic shapes): libpsa checks the rest at run time
    elems = shape[0] * shape[1] * shape[2] * shape[3]
    if elems > _INT64_MAX:
        raise Error(int(capi.PSA_ERR_INVALID_SHAPE), "%s: shape = [%d, %d, %d, %d]: the "
                    "element count overflows int64" % ((name,) + tuple(shape)))
    if elems * itemsize > _INT64_MAX:
        raise Error(int(capi.PSA_ERR_INVALID_SHAPE), "%s: size in bytes overflows int64 (%d "
                    "elements)" % (name, elems))
    for i in range(4):
        if strides[i] < 0:
            raise Error(int(capi.PSA_ERR_INVALID_STRIDE), "%s: strides[%d] (%s) = %d; must be "
                        ">= 0" % (name, i, _DIM_NAMES[i], strides[i]))
    extent = 1 + sum((shape[i] - 1) * strides[i] for i in range(4))
    if extent > _INT64_MAX or extent * itemsize > _INT64_MAX:
        raise Error(int(capi.PSA_ERR_INVALID_STRIDE), "%s: strides = [%d, %d, %d, %d] address "
                    "%d elements; their size in bytes overflows int64"
                    % ((name,) + tuple(strides) + (extent,)))
    span = 0
    for i in sorted(range(4), key=lambda j: strides[j]):  # stable: libpsa's insertion sort
        if shape[i] == 1:
            continue
        if strides[i] <= span:
            raise Error(int(capi.PSA_ERR_INVALID_STRIDE), "%s: strides[%d] (%s) = %d; must "
                        "exceed %d, the largest offset the smaller strides reach (elements "
                        "would alias)" % (name, i, _DIM_NAMES[i], strides[i], span))
        span += (shape[i] - 1) * strides[i]


def _check_tensors(q: Any, k: Any, v: Any, layout: str) -> None:
    """q, k, v of one attention: what psa.attention checks in Python and libpsa checks of the
    descriptors, with the same exceptions and messages."""
    axes = parse_layout(layout)
    for name, x in (("q", q), ("k", k), ("v", v)):
        _check_tensor(x, name, layout)
    _check_same(q, (("k", k), ("v", v)))
    dims = {}
    for name, x in (("q", q), ("k", k), ("v", v)):
        shape = [x.shape[a] for a in axes]
        stride = x.stride()
        _check_desc(name, shape, [stride[a] for a in axes], _ITEMSIZE[x.dtype])
        dims[name] = shape
    sq, sk, sv = dims["q"], dims["k"], dims["v"]
    shape_error = int(capi.PSA_ERR_INVALID_SHAPE)
    if sk[0] != sq[0]:
        raise Error(shape_error, "k: shape[0] (batch) = %d; expected q's batch %d"
                    % (sk[0], sq[0]))
    if sk[3] != sq[3]:
        raise Error(shape_error, "k: shape[3] (head_dim) = %d; expected q's head_dim %d"
                    % (sk[3], sq[3]))
    for i in range(4):
        if sv[i] != sk[i]:
            raise Error(shape_error, "v: shape[%d] (%s) = %d; expected k's %d"
                        % (i, _DIM_NAMES[i], sv[i], sk[i]))
    if sq[1] % sk[1] != 0:
        raise Error(shape_error, "k: shape[1] (heads) = %d does not divide q's heads %d (GQA "
                    "needs Hq %% Hkv == 0)" % (sk[1], sq[1]))


def _check_out(q: torch.Tensor, out: Any, layout: str) -> None:
    """out of the friendly call: a torch tensor of exactly q's shape, dtype and device."""
    _check_tensor(out, "out", layout)
    _check_same(q, (("out", out),))
    if tuple(out.shape) != tuple(q.shape):
        raise ValueError("out: shape %r; expected q's shape %r"
                         % (tuple(out.shape), tuple(q.shape)))


def _check_scalars(grid: Any, text_length: Any, text_first: Any, layout: Any, causal: Any,
                   scale: Any, step: Any, return_lse: Any) -> Optional[Tuple[int, int, int]]:
    """The op's non-tensor arguments, as psa.attention checks them (bools must be bools):
    the grid as three ints (its agreement with the sequence length: _validate)."""
    parse_layout(layout)
    if isinstance(text_length, bool) or not isinstance(text_length, int) or \
            not 0 <= text_length <= _INT64_MAX:
        raise ValueError("text_length = %r: expected an int >= 0" % (text_length,))
    grid3: Optional[Tuple[int, int, int]] = None
    if grid is not None:
        try:
            items = tuple(grid)
        except TypeError:
            items = ()
        valid = len(items) == 3 and all(
            not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)
            and int(x) == x and 1 <= x <= _INT64_MAX for x in items)
        if not valid:
            raise ValueError("grid = %r: expected three ints (t, h, w) >= 1" % (grid,))
        grid3 = (int(items[0]), int(items[1]), int(items[2]))
    if text_first is not None and not isinstance(text_first, bool):
        raise TypeError("text_first = %r: expected a bool or None" % (text_first,))
    if not isinstance(causal, bool):
        raise TypeError("causal = %r: expected a bool" % (causal,))
    _api.check_scale(scale)
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or
                             not 0 <= step <= _INT64_MAX):
        raise ValueError("step = %r: expected None (sparse) or an int >= 0" % (step,))
    if not isinstance(return_lse, bool):
        raise TypeError("return_lse = %r: expected a bool" % (return_lse,))
    return grid3


def _validate(q: Any, k: Any, v: Any, config: str, grid: Optional[Sequence[int]],
              text_length: int, text_first: bool, layout: str, causal: bool,
              scale: Optional[float], step: Optional[int]) -> None:
    """Everything the op checks before libpsa runs, in its real and its fake implementation
    alike (so a traced call fails as the eager one would, with the same error)."""
    if not isinstance(config, str):
        raise TypeError("config = %r: expected a key from psa.torch.config_key()" % (config,))
    if text_first is None:
        raise TypeError("text_first = None: the op takes a bool")
    _check_scalars(grid, text_length, text_first, layout, causal, scale, step, False)
    config_from_key(config)
    _check_tensors(q, k, v, layout)
    seq_len = k.shape[parse_layout(layout)[2]]
    if grid is not None or text_length:
        _api._check_grid(grid, text_length, seq_len)


# ---- the op --------------------------------------------------------------------------------
def _run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: str,
         grid: Optional[Sequence[int]], text_length: int, text_first: bool, layout: str,
         causal: bool, scale: Optional[float], step: Optional[int], return_lse: bool) -> Any:
    _validate(q, k, v, config, grid, text_length, text_first, layout, causal, scale, step)
    cfg = config_from_key(config)
    return _api.attention(q, k, v, config=cfg, grid=None if grid is None else list(grid),
                          text_length=text_length, text_first=text_first, layout=layout,
                          causal=causal, scale=scale, step=step, return_lse=return_lse)


def _attention_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: str,
                  grid: Optional[List[int]], text_length: int, text_first: bool, layout: str,
                  causal: bool, scale: Optional[float], step: Optional[int]) -> torch.Tensor:
    out: torch.Tensor = _run(q, k, v, config, grid, text_length, text_first, layout, causal,
                             scale, step, False)
    return out


def _attention_lse_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: str,
                      grid: Optional[List[int]], text_length: int, text_first: bool,
                      layout: str, causal: bool, scale: Optional[float],
                      step: Optional[int]) -> Tuple[torch.Tensor, torch.Tensor]:
    out, lse = _run(q, k, v, config, grid, text_length, text_first, layout, causal, scale,
                    step, True)
    return out, lse


def _lse_shape(q: torch.Tensor, layout: str) -> Tuple[Any, Any, Any]:
    if layout.lower() in ("blhd", "bsnd"):
        return q.shape[0], q.shape[2], q.shape[1]
    return q.shape[0], q.shape[1], q.shape[2]


def _attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: str,
                    grid: Optional[List[int]], text_length: int, text_first: bool, layout: str,
                    causal: bool, scale: Optional[float],
                    step: Optional[int]) -> torch.Tensor:
    _validate(q, k, v, config, grid, text_length, text_first, layout, causal, scale, step)
    return q.new_empty(q.shape)  # the real op returns a new contiguous tensor of q's shape


def _attention_lse_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: str,
                        grid: Optional[List[int]], text_length: int, text_first: bool,
                        layout: str, causal: bool, scale: Optional[float],
                        step: Optional[int]) -> Tuple[torch.Tensor, torch.Tensor]:
    _validate(q, k, v, config, grid, text_length, text_first, layout, causal, scale, step)
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q, layout), dtype=torch.float32)


def _refuse_autodiff(name: str, args: Sequence[Any]) -> None:
    """RuntimeError "inference only" when a tensor argument requires grad (grad mode on) or
    carries a forward-mode tangent (a dual tensor of torch.autograd.forward_ad, or of
    torch.func.jvp, which makes its inputs dual at its level)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise RuntimeError(_INFERENCE_ONLY % name)
    if any(_forward_ad.unpack_dual(t).tangent is not None for t in tensors):
        raise RuntimeError(_NO_FORWARD_AD % name)


def _refuse_setup(name: str) -> Any:
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
        raise RuntimeError(_INFERENCE_ONLY % name)
    return setup_context


def _refuse_backward(name: str) -> Any:
    def backward(ctx: Any, *grads: Any) -> Any:
        raise RuntimeError(_INFERENCE_ONLY % name)
    return backward


def _autograd_kernel(name: str, op: Any) -> Any:
    """The op's kernel for the autograd keys of CPU, CUDA and meta tensors. custom_op's own
    autograd kernel (register_autograd) sees only requires_grad: a dual tensor (forward-mode
    AD) went below autograd and came back without a tangent (torch.func.jvp: a zero
    derivative). This one refuses both, then runs the op below autograd as custom_op's
    does; being registered for these keys, it takes precedence over the alias
    registration without replacing it."""

    def kernel(keyset: Any, *args: Any) -> Any:
        _refuse_autodiff(name, args)
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, *args)

    return kernel


_attention_op: Any = torch.library.custom_op(OP_NAME, mutates_args=())(_attention_impl)
_attention_lse_op: Any = torch.library.custom_op(OP_LSE_NAME, mutates_args=())(
    _attention_lse_impl)
_attention_op.register_fake(_attention_fake)
_attention_lse_op.register_fake(_attention_lse_fake)
_attention_op.register_autograd(_refuse_backward(OP_NAME), setup_context=_refuse_setup(OP_NAME))
_attention_lse_op.register_autograd(_refuse_backward(OP_LSE_NAME),
                                    setup_context=_refuse_setup(OP_LSE_NAME))
_AUTOGRAD_LIB = torch.library.Library("psa", "FRAGMENT")
for _name, _op in ((OP_NAME, torch.ops.psa.attention.default),
                   (OP_LSE_NAME, torch.ops.psa.attention_lse.default)):
    for _key in ("AutogradCPU", "AutogradCUDA", "AutogradMeta"):
        _AUTOGRAD_LIB.impl(_name.split("::")[1], _autograd_kernel(_name, _op), _key,
                           with_keyset=True)


# ---- the friendly call ---------------------------------------------------------------------
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
              model: Optional[str] = None, preset: Optional[str] = None,
              config: ConfigArg = None, grid: Optional[Sequence[int]] = None,
              text_length: int = 0, text_first: Optional[bool] = None, layout: str = "bhld",
              causal: bool = False, scale: Optional[float] = None, step: Optional[int] = None,
              out: Optional[torch.Tensor] = None, return_lse: bool = False,
              stream: Any = None) -> Any:
    """:func:`psa.attention` through the torch op (traceable by torch.compile).

    The arguments are psa.attention's, and `config` may also be a key from
    :func:`config_key`. Under torch.compile the config is resolved when the graph is traced
    (a psa.Config is read then: changing it later needs a new Config object; with torch
    older than 2.15, Dynamo cannot fold a psa.Config argument into a constant: pass
    ``config=psa.torch.config_key(cfg)``, computed outside the compiled code). `out`: the
    result is copied into it (the op itself returns a new tensor). `stream`: the op runs on
    the current stream; a stream given here is made current for the call. Inference only:
    q, k or v requiring grad with grad mode on, or carrying a forward-mode tangent, raises
    RuntimeError ("inference only"). The arguments are checked as psa.attention checks
    them: TypeError/ValueError naming the argument (bools must be bools; `out` must be a
    torch tensor of exactly q's shape, dtype and device), psa.Error with libpsa's message
    for tensors libpsa would reject; nothing is written on error.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError("%s: %s is not a torch.Tensor: psa.torch.attention takes torch "
                            "tensors (psa.attention also takes NumPy and DLPack arrays)"
                            % (name, type(x).__name__))
        check_torch_strided(x, name)  # before the dispatcher (no nested / sparse kernels)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        raise RuntimeError(_INFERENCE_ONLY % OP_NAME)
    key, cogvideo = _constant_key(model, preset, config)
    if not torch.compiler.is_compiling():
        # Traced, the op's fake implementation checks what reaches the op (and the schema
        # its types); eagerly, every argument is checked here, as psa.attention does, before
        # anything runs.
        _check_scalars(grid, text_length, text_first, layout, causal, scale, step, return_lse)
        if out is not None:
            _check_tensors(q, k, v, layout)
    if out is not None:
        _check_out(q, out, layout)
    if text_first is None:
        text_first = cogvideo
    grid_list = None if grid is None else [int(x) for x in grid]
    if stream is not None and q.device.type == "cuda":
        s = stream if isinstance(stream, torch.cuda.Stream) else torch.cuda.ExternalStream(
            int(stream), device=q.device)
        with torch.cuda.stream(s):
            return attention(q, k, v, config=key, grid=grid_list, text_length=text_length,
                             text_first=text_first, layout=layout, causal=causal, scale=scale,
                             step=step, out=out, return_lse=return_lse)
    op_args = (q, k, v, key, grid_list, text_length, text_first, layout, causal,
               None if scale is None else float(scale), step)
    if return_lse:
        result, lse = torch.ops.psa.attention_lse(*op_args)
    else:
        result, lse = torch.ops.psa.attention(*op_args), None
    if out is not None:
        out.copy_(result)
        result = out
    return (result, lse) if return_lse else result
