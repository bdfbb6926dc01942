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

import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from . import _api
from ._config import Config, Value, _WordEnum

__all__ = ["attention", "config_key", "config_from_key", "OP_NAME", "OP_LSE_NAME"]

OP_NAME = "psa::attention"
OP_LSE_NAME = "psa::attention_lse"

ConfigArg = Union[None, str, Config, Mapping[str, Value]]

_INFERENCE_ONLY = ("%s is inference only (libpsa has no backward): run it under "
                   "torch.no_grad() / torch.inference_mode(), or pass tensors that do not "
                   "require grad")


# ---- config keys ---------------------------------------------------------------------------
def _word(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _WordEnum):
        return value.word
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        if not value or any(c in value for c in ";= "):
            raise ValueError("config value %r: expected a word without ';', '=' or spaces"
                             % (value,))
        return value
    raise TypeError("config value %r: expected a bool, int, float or YAML word" % (value,))


def _parse_value(text: str) -> Value:
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


_KEYS: "Dict[str, Config]" = {}
_KEYS_LOCK = threading.Lock()
_KEYS_CAPACITY = 256


def config_from_key(key: str) -> Config:
    """The psa.Config a key describes (cached; do not modify it: copy it first). Raises
    ValueError for a malformed key and psa.Error for an unknown model/preset or a bad value.
    """
    with _KEYS_LOCK:
        cfg = _KEYS.get(key)
    if cfg is not None:
        return cfg
    if not isinstance(key, str) or not key:
        raise ValueError("config key %r: expected a string from psa.torch.config_key()" % (key,))
    fields = key.split(";")
    head, pairs = fields[0], fields[1:]
    overrides: Dict[str, Value] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError("config key %r: %r is not name=value" % (key, pair))
        overrides[name] = _parse_value(text)
    if head == "config":
        cfg = Config()
    else:
        model: Optional[str] = None
        preset: Optional[str] = None
        for part in head.split(","):
            name, sep, text = part.partition("=")
            if sep and name == "model" and text:
                model = text
            elif sep and name == "preset" and text:
                preset = text
            else:
                raise ValueError("config key %r: expected 'config' or 'model=M[,preset=P]' "
                                 "before the first ';'" % (key,))
        if model is None:
            raise ValueError("config key %r: names no model" % (key,))
        cfg = Config.load(model, preset)
    cfg.update(overrides)
    cfg.validate()
    with _KEYS_LOCK:
        if len(_KEYS) >= _KEYS_CAPACITY:
            _KEYS.pop(next(iter(_KEYS)))
        cfg = _KEYS.setdefault(key, cfg)
    return cfg


def _make_key(model: Optional[str], preset: Optional[str], config: ConfigArg) -> str:
    if isinstance(config, str):
        if model is not None or preset is not None:
            raise ValueError("config = %r is a key: pass it without model=/preset=" % (config,))
        config_from_key(config)
        return config
    if isinstance(config, Config):
        if model is not None or preset is not None:
            raise ValueError("config: pass either config=psa.Config(...) or model=/preset=, "
                             "not both (a dict config= holds overrides of the preset)")
        key = ";".join(["config"] + ["%s=%s" % (name, _word(value))
                                     for name, value in config.items()])
    else:
        if model is not None and not isinstance(model, str):
            raise TypeError("model = %r: expected a model name (str), e.g. %r"
                            % (model, _api.DEFAULT_MODEL))
        if preset is not None and not isinstance(preset, str):
            raise TypeError("preset = %r: expected a preset name (str)" % (preset,))
        if config is not None and not isinstance(config, Mapping):
            raise TypeError("config = %r: expected a key (str), a psa.Config or a dict of "
                            "parameter overrides" % (config,))
        for word, what in ((model, "model"), (preset, "preset")):
            if word is not None and (not word or any(c in word for c in ";=, ")):
                raise ValueError("%s = %r: not a %s name" % (what, word, what))
        head = "model=%s" % (model if model is not None else _api.DEFAULT_MODEL)
        if preset is not None:
            head += ",preset=%s" % preset
        items: List[Tuple[str, Value]] = sorted(dict(config or {}).items())
        for name, _ in items:
            if not isinstance(name, str) or not name or any(c in name for c in ";= "):
                raise ValueError("config key name %r: expected a parameter name" % (name,))
        key = ";".join([head] + ["%s=%s" % (name, _word(value)) for name, value in items])
    config_from_key(key)  # validates now: unknown model/preset/key raise here
    return key


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
