# bindings/python/psa/transformers.py -- causal PSA (type psa_causal, spec App. A) for the
# prefill of Hugging Face transformers vision-language models (Qwen2.5-VL, Qwen2-VL): the
# text decoder's attention modules get a view of their config whose attention implementation
# is libpsa's; prefill calls (query length == key length, plain causal mask) run through
# psa.attention, every other call (decode steps, chunked prefill, padded batches, training)
# through the model's own attention function. The KV cache is never touched: the modules
# update it before the attention function is called. Imported on demand only
# (`import psa.transformers`): `import psa` never imports torch or transformers.
"""Causal PSA for the prefill of Qwen2.5-VL / Qwen2-VL in Hugging Face transformers.

::

    import psa.transformers
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(...)
    psa.transformers.enable_psa(model)              # preset Qwen2.5-VL-7B / psa_balanced
    out = model.generate(**inputs)                   # prefill sparse, decode unchanged
    psa.transformers.disable_psa(model)

The vision tower is not touched (its attention is bidirectional over image patches).
libpsa is inference only: a call where any of q, k and v requires grad with grad mode on
(training, fine-tuning only some projections such as a LoRA on ``v_proj``) runs the model's
own attention, as decode steps do.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import _api
from ._config import Config

__all__ = ["enable_psa", "disable_psa", "psa_stats", "ATTN_IMPLEMENTATION", "SUPPORTED_CLASSES"]

ATTN_IMPLEMENTATION = "libpsa_causal"
# Text-decoder attention classes whose forward updates the cache, then calls
# ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager) with
# (module, q [B,H,L,D], k/v [B,Hkv,L,D], mask, dropout=, scaling=, ...).
SUPPORTED_CLASSES = ("Qwen2_5_VLAttention", "Qwen2VLAttention")
_DEFAULT_MODEL = {"Qwen2VLAttention": "Qwen2-VL-7B", "Qwen2_5_VLAttention": "Qwen2.5-VL-7B"}


class _Hook:
    """What enable_psa attached to one attention module."""

    def __init__(self, base_config: Any, model: Optional[str], preset: Optional[str],
                 config: Any) -> None:
        self.base_config = base_config
        self.original_impl = getattr(base_config, "_attn_implementation", None) or "eager"
        self.model = model
        self.preset = preset
        self.config = config
        self.prefill_calls = 0
        self.fallback_calls = 0


class _ConfigView:
    """The module's config with only the attention implementation replaced."""

    def __init__(self, base: Any) -> None:
        object.__setattr__(self, "_base", base)

    @property
    def _attn_implementation(self) -> str:
        return ATTN_IMPLEMENTATION

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_base"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_base"), name, value)


def _plain_causal(mask: Optional[torch.Tensor], length: int) -> bool:
    """True when `mask` (None, bool or additive float, [B, 1|H, L, L]) is the causal mask."""
    if mask is None:
        return True
    if mask.dim() != 4 or mask.shape[-1] != length or mask.shape[-2] != length:
        return False
    keep = mask if mask.dtype == torch.bool else mask == 0
    tril = torch.ones(length, length, dtype=torch.bool, device=mask.device).tril()
    return bool(torch.equal(keep, tril.expand_as(keep)))


def _fallback(module: Any, hook: _Hook) -> Callable[..., Any]:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward")
    if hook.original_impl == "eager":
        return eager  # type: ignore[no-any-return]
    return ALL_ATTENTION_FUNCTIONS.get_interface(hook.original_impl, eager)  # type: ignore[no-any-return]


def _psa_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attention_mask: Optional[torch.Tensor], scaling: Optional[float] = None,
                   dropout: float = 0.0, **kwargs: Any) -> Tuple[torch.Tensor, None]:
    hook: Optional[_Hook] = getattr(module, "_psa_hook", None)
    if hook is None:
        raise RuntimeError("%s: attention implementation %r is set on a module that "
                           "psa.transformers.enable_psa did not hook"
                           % (type(module).__name__, ATTN_IMPLEMENTATION))
    length = query.shape[2]
    # libpsa is inference only: any of q, k, v in an autograd graph (training, LoRA on
    # v_proj alone, inputs that require grad) goes to the model's own attention.
    needs_grad = torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in (query, key, value))
    prefill = (length == key.shape[2] and length > 1 and not dropout
               and kwargs.get("sliding_window") is None and not needs_grad
               and _plain_causal(attention_mask, length))
    if not prefill:
        hook.fallback_calls += 1
        return _fallback(module, hook)(module, query, key, value, attention_mask,  # type: ignore[no-any-return]
                                       scaling=scaling, dropout=dropout, **kwargs)
    hook.prefill_calls += 1
    out = _api.attention(query, key, value, model=hook.model, preset=hook.preset,
                         config=hook.config, causal=True, scale=scaling, layout="bhld")
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    from transformers import AttentionInterface
    AttentionInterface.register(ATTN_IMPLEMENTATION, _psa_attention)


def enable_psa(model: Any, preset_model: Optional[str] = None, preset: Optional[str] = None,
               config: Any = None) -> int:
    """Routes the prefill of `model`'s text-decoder attention through libpsa.

    preset_model, preset: a preset of the embedded attention_config.yaml (default: the
    model's family, ``Qwen2.5-VL-7B`` or ``Qwen2-VL-7B``, and its default preset
    ``psa_balanced``: type psa_causal, energybound). config: a psa.Config instead, or a dict
    of overrides of the preset (``{"mask_ratios.1": 0.5}``). The preset must be causal
    (psa_causal, or a dense preset with ``causal: true``). Returns the number of attention
    modules hooked; ValueError when the model has none of SUPPORTED_CLASSES. Calling it
    again replaces the settings.
    """
    if isinstance(config, Config) and (preset_model is not None or preset is not None):
        raise ValueError("config: pass either config=psa.Config(...) or preset_model=/preset=, "
                         "not both (a dict config= holds overrides of the preset)")
    modules = [m for m in model.modules() if type(m).__name__ in SUPPORTED_CLASSES]
    if not modules:
        raise ValueError("model: %s has no attention module of %s"
                         % (type(model).__name__, ", ".join(SUPPORTED_CLASSES)))
    _register()
    for m in modules:
        name = preset_model if preset_model is not None or isinstance(config, Config) \
            else _DEFAULT_MODEL[type(m).__name__]
        # Resolve once now, so that a bad preset or override fails here, not mid-forward.
        cfg = _api._resolve_config(name, preset, config)
        cfg.validate()
        if not bool(cfg["causal"]):
            raise ValueError("preset %s/%s: causal = false; the text decoder is causal (use a "
                             "psa_causal preset or a dense one with causal: true)"
                             % (name, preset or "default"))
        old: Optional[_Hook] = getattr(m, "_psa_hook", None)
        base = old.base_config if old is not None else m.config
        m._psa_hook = _Hook(base, name, preset, config)
        m.config = _ConfigView(base)
    return len(modules)


def disable_psa(model: Any) -> int:
    """Undoes enable_psa; returns the number of modules restored."""
    n = 0
    for m in model.modules():
        hook: Optional[_Hook] = getattr(m, "_psa_hook", None)
        if hook is None:
            continue
        m.config = hook.base_config
        del m._psa_hook
        n += 1
    return n


def psa_stats(model: Any) -> Dict[str, int]:
    """Calls since enable_psa: ``prefill`` (through libpsa) and ``fallback`` (the model's own
    attention: decode steps and the rest), summed over the hooked modules."""
    hooks: List[_Hook] = [m._psa_hook for m in model.modules() if hasattr(m, "_psa_hook")]
    return {"prefill": sum(h.prefill_calls for h in hooks),
            "fallback": sum(h.fallback_calls for h in hooks), "modules": len(hooks)}
