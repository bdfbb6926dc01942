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
inference only: inputs that require grad with grad mode on raise a RuntimeError saying so.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch

from . import _api
from ._keys import ConfigArg, config_from_key, make_key

__all__ = ["attention", "config_key", "config_from_key", "OP_NAME", "OP_LSE_NAME"]

OP_NAME = "psa::attention"
OP_LSE_NAME = "psa::attention_lse"

_INFERENCE_ONLY = ("%s is inference only (libpsa has no backward): run it under "
                   "torch.no_grad() / torch.inference_mode(), or pass tensors that do not "
                   "require grad")


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


# ---- the op --------------------------------------------------------------------------------
def _run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: str,
         grid: Optional[Sequence[int]], text_length: int, text_first: bool, layout: str,
         causal: bool, scale: Optional[float], step: Optional[int], return_lse: bool) -> Any:
    cfg = config_from_key(config)
    return _api.attention(q, k, v, config=cfg, grid=None if grid is None else list(grid),
                          text_length=int(text_length), text_first=bool(text_first),
                          layout=layout, causal=bool(causal), scale=scale,
                          step=None if step is None else int(step), return_lse=return_lse)


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
    return q.new_empty(q.shape)  # the real op returns a new contiguous tensor of q's shape


def _attention_lse_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: str,
                        grid: Optional[List[int]], text_length: int, text_first: bool,
                        layout: str, causal: bool, scale: Optional[float],
                        step: Optional[int]) -> Tuple[torch.Tensor, torch.Tensor]:
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q, layout), dtype=torch.float32)


def _refuse_setup(name: str) -> Any:
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
        raise RuntimeError(_INFERENCE_ONLY % name)
    return setup_context


def _refuse_backward(name: str) -> Any:
    def backward(ctx: Any, *grads: Any) -> Any:
        raise RuntimeError(_INFERENCE_ONLY % name)
    return backward


_attention_op: Any = torch.library.custom_op(OP_NAME, mutates_args=())(_attention_impl)
_attention_lse_op: Any = torch.library.custom_op(OP_LSE_NAME, mutates_args=())(
    _attention_lse_impl)
_attention_op.register_fake(_attention_fake)
_attention_lse_op.register_fake(_attention_lse_fake)
_attention_op.register_autograd(_refuse_backward(OP_NAME), setup_context=_refuse_setup(OP_NAME))
_attention_lse_op.register_autograd(_refuse_backward(OP_LSE_NAME),
                                    setup_context=_refuse_setup(OP_LSE_NAME))


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
    q, k or v requiring grad with grad mode on raises RuntimeError ("inference only").
    """
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        raise RuntimeError(_INFERENCE_ONLY % OP_NAME)
    key, cogvideo = _constant_key(model, preset, config)
    if text_first is None:
        text_first = cogvideo
    grid_list = None if grid is None else list(grid)
    if stream is not None and q.device.type == "cuda":
        s = stream if isinstance(stream, torch.cuda.Stream) else torch.cuda.ExternalStream(
            int(stream), device=q.device)
        with torch.cuda.stream(s):
            return attention(q, k, v, config=key, grid=grid_list, text_length=text_length,
                             text_first=text_first, layout=layout, causal=causal, scale=scale,
                             step=step, out=out, return_lse=return_lse)
    op_args = (q, k, v, key, grid_list, text_length, bool(text_first), layout, bool(causal),
               None if scale is None else float(scale), step)
    if return_lse:
        result, lse = torch.ops.psa.attention_lse(*op_args)
    else:
        result, lse = torch.ops.psa.attention(*op_args), None
    if out is not None:
        out.copy_(result)
        result = out
    return (result, lse) if return_lse else result
