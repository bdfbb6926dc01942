# bindings/python/psa/diffusers.py -- Pyramid Sparse Attention inside diffusers pipelines:
# enable_psa() swaps the self-attention processors of WanTransformer3DModel (Wan2.1/2.2,
# the A14B pair) and CogVideoXTransformer3DModel for ones that call the psa::attention
# torch op; a forward pre-hook on each transformer derives the video grid from the latent
# shape and counts denoising steps for the preset's warm-up. disable_psa() undoes it all.
# Imported on demand only (`import psa.diffusers`): `import psa` imports neither torch nor
# diffusers.
"""Pyramid Sparse Attention for diffusers' Wan and CogVideoX transformers.

One call to turn it on, one to turn it off::

    import psa.diffusers
    pipe = diffusers.WanPipeline.from_pretrained(...)
    psa.diffusers.enable_psa(pipe)                 # or enable_psa(pipe.transformer, ...)
    video = pipe(prompt, ...).frames
    psa.diffusers.disable_psa(pipe)                # the original processors, exactly

What it changes: the self-attention (``attn1``) of every transformer block runs through
libpsa (the op ``psa::attention`` of :mod:`psa.torch`); cross-attention, Wan I2V's
image-context attention and everything else run the diffusers code unchanged. Queries, keys
and values are computed exactly as diffusers' ``WanAttnProcessor`` and
``CogVideoXAttnProcessor2_0`` compute them (projections, q/k norms, RoPE); only the
attention call differs. With a dense preset (``baseline``) the output equals the default
processors' up to float rounding.

The video grid comes from each forward's latent shape and the transformer's patch size:
Wan ``hidden_states`` [B, C, F, H, W] give ``(F/p_t, H/p_h, W/p_w)``; CogVideoX
``hidden_states`` [B, F, C, H, W] give ``(F/p_t, H/p, W/p)`` (``p_t`` = ``patch_size_t``,
1 when unset), and its text tokens (``encoder_hidden_states.shape[1]``, 226 for
CogVideoX-5B) lead the sequence. A latent shape that the patch size does not divide raises
ValueError naming the shape before the transformer runs. The grid lives for one forward: it
is set when the transformer's forward starts and cleared when it ends (also when it
raises), so a PSA processor called outside its transformer's forward raises RuntimeError.

Warm-up counts denoising steps, not calls: while a transformer's step is below the preset's
``warmup_steps`` its attention runs dense (in libpsa), then sparse. Each transformer keeps
its own counter (the A14B high- and low-noise transformers each start at step 0 when they
first run). How steps are counted (``step_source``):

* ``"scheduler"`` (default for a pipeline): a step ends when the pipeline calls
  ``scheduler.step``; ``scheduler.set_timesteps`` (called at the start of every generation)
  starts again at step 0. Nothing is read from the GPU, and a compiled transformer
  (``torch.compile``) sees only a dense/sparse flag (one recompile when it flips).
* ``"timestep"`` (default for a bare transformer): a forward whose timestep (its largest
  value, for Wan2.2's per-token timesteps) differs from the previous forward's starts a new
  step; a larger timestep than the previous one starts a new generation (step 0). Classifier
  -free guidance as a batch of 2 or as two passes with the same timestep is one step. Reads
  the timestep on the host once per forward (a graph break under torch.compile: use
  "scheduler" or "manual" there). A forward without a timestep raises TypeError, one whose
  timestep is not finite (NaN, inf) ValueError, both naming ``timestep``.
* ``"manual"``: :func:`set_step` sets the step; nothing is counted.

:func:`stats` reports each transformer's step, grid and dense/sparse call counts (the call
counts cover eager forwards only: a compiled transformer does not update them).

The state (grid, step counter, original processors) hangs on the transformer, and the hooks
and processors find it there: ``copy.deepcopy`` of an enabled transformer (or pipeline)
gives an enabled copy with its own state, which counts its own steps and never touches the
original's.

Sequence parallelism: ``enable_psa(..., parallel={"ulysses_degree": 2, "ring_degree": 2})``
or :func:`psa.distributed.enable_sequence_parallel` shard the tokens after the patch
embedding (Wan: RoPE tables, hidden states, a per-token timestep; CogVideoX: the joint text +
video sequence, split back into the rank's text and video tokens, and the RoPE tables) in
the preset's token order, run the blocks on each rank's share with self-attention through
:class:`psa.distributed.SequenceParallel`, and gather the output of ``proj_out`` before
unpatchify: every rank returns the single-process output. Under torch.compile the parallel
attention and the gathers are custom ops (``psa::sp_attention``, ``psa::sp_gather``): run
one eager forward per latent grid first (it builds the grid's SequenceParallel, which
creates process groups).

Supported versions: diffusers 0.42 (tested with 0.42.1, torch 2.15.0); the processors
mirror that version's ``WanAttnProcessor`` and ``CogVideoXAttnProcessor2_0``, and
:func:`enable_psa` refuses attention processors of any other class, subclasses of these two
included (a subclass may compute something else, which PSA would silently drop). Causal
presets (the Qwen ones: type ``psa_causal``, or ``causal: true``) are refused: these
transformers' self-attention is bidirectional. Versions before 0.35 (no ``WanAttention``
class) are not supported.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import torch as psa_torch
from ._config import Method, Value
from ._errors import Error

try:
    from diffusers.models.attention_processor import CogVideoXAttnProcessor2_0
    from diffusers.models.transformers import transformer_wan as _wan
    from diffusers.models.transformers.cogvideox_transformer_3d import (
        CogVideoXTransformer3DModel)
    from diffusers.models.transformers.transformer_wan import (WanAttnProcessor,
                                                               WanTransformer3DModel)
except ImportError as e:  # pragma: no cover - depends on the installed diffusers
    raise ImportError("psa.diffusers needs diffusers >= 0.35 with WanTransformer3DModel and "
                      "CogVideoXTransformer3DModel (tested: 0.42.1): %s" % e) from e

__all__ = ["enable_psa", "disable_psa", "set_step", "reset_steps", "stats", "is_enabled",
           "SUPPORTED_DIFFUSERS"]

SUPPORTED_DIFFUSERS = "0.42"
"""The diffusers minor version the processors mirror (tested: 0.42.1)."""

_STEP_SOURCES = ("auto", "scheduler", "timestep", "manual")
_STATE_ATTR = "_psa_state"


# ---- per-transformer state ---------------------------------------------------------------
class _State:
    """One transformer's PSA state: config key, grid of the current forward, step counter,
    the original processors and the hook."""

    def __init__(self, kind: str, model: str, key: str, warmup_steps: int,
                 step_source: str) -> None:
        self.kind = kind                      # "wan" or "cogvideox"
        self.model = model
        self.key = key                        # psa.torch config key
        self.text_first = kind == "cogvideox"
        self.warmup_steps = warmup_steps
        self.step_source = step_source
        self.grid: Optional[Tuple[int, int, int]] = None  # set during a forward only
        self.last_grid: Optional[Tuple[int, int, int]] = None  # the last forward's (stats)
        self.step = 0                         # the step of the current forward
        self.dense = warmup_steps > 0         # step < warmup_steps, kept with step
        self.last_timestep: Optional[float] = None
        self.ran = False                      # ran since the last scheduler.step
        self.dense_calls = 0
        self.sparse_calls = 0
        self.forwards = 0
        self.originals: Dict[str, Any] = {}   # attention module name -> original processor
        self.hook: Any = None                 # forward pre-hook: grid and step
        self.post_hook: Any = None            # forward hook: clears the grid
        # sequence parallelism (enable_psa(parallel=...)): the SequenceParallel arguments,
        # one SequenceParallel per grid, the one of the current forward, the shard hooks
        self.parallel: Optional[Dict[str, Any]] = None
        self.sp_by_grid: Dict[Tuple[int, ...], Any] = {}
        self.sp: Any = None
        self.cog_layout: Optional[_CogShard] = None  # CogVideoX: this forward's token split
        self.cog_layouts: Dict[Tuple[int, ...], _CogShard] = {}
        self.parallel_hooks: List[Any] = []
        # CFG parallelism (psa.xdit): where this rank's batch items sit in the whole batch
        self.batch_offset = 0

    def set_step(self, step: int) -> None:
        self.step = step
        self.dense = step < self.warmup_steps

    def observe_timestep(self, value: float) -> None:
        last = self.last_timestep
        if last is None or value > last:
            self.set_step(0)                  # first forward, or a new generation
        elif value != last:
            self.set_step(self.step + 1)
        self.last_timestep = value

    def reset(self) -> None:
        self.set_step(0)
        self.last_timestep = None
        self.ran = False


def _state_of(module: Any) -> Optional[_State]:
    state = getattr(module, _STATE_ATTR, None)
    return state if isinstance(state, _State) else None


def _kind_of(transformer: Any) -> str:
    if isinstance(transformer, WanTransformer3DModel):
        return "wan"
    if isinstance(transformer, CogVideoXTransformer3DModel):
        return "cogvideox"
    raise TypeError("%s is not supported: psa.diffusers handles WanTransformer3DModel (Wan2.1, "
                    "Wan2.2) and CogVideoXTransformer3DModel" % type(transformer).__name__)


def _default_model(kind: str, transformer: Any, pair: bool) -> str:
    cfg = transformer.config
    if kind == "cogvideox":
        return "CogVideo1.5_5b" if getattr(cfg, "patch_size_t", None) else "CogVideo_5b"
    if pair:
        return "Wan2.2_A14B"
    if int(getattr(cfg, "in_channels", 16)) == 48:
        return "Wan2.2_5B"
    if int(cfg.num_attention_heads) * int(cfg.attention_head_dim) == 1536:
        return "Wan2.1_1.3b"
    return "Wan2.1_14b"


def _patch(kind: str, transformer: Any) -> Tuple[int, int, int]:
    cfg = transformer.config
    if kind == "wan":
        p_t, p_h, p_w = (int(x) for x in cfg.patch_size)
        return p_t, p_h, p_w
    p = int(cfg.patch_size)
    return int(cfg.patch_size_t or 1), p, p


def latent_grid(transformer: Any, latent_shape: Tuple[int, ...]) -> Tuple[int, int, int]:
    """The (t, h, w) token grid of a latent of `latent_shape` ([B, C, F, H, W] for Wan,
    [B, F, C, H, W] for CogVideoX); ValueError naming the shape when the transformer's patch
    size does not divide it."""
    kind = _kind_of(transformer)
    if len(latent_shape) != 5:
        raise ValueError("hidden_states: shape %r; expected a 5-D latent (%s)"
                         % (tuple(latent_shape), "[B, C, F, H, W]" if kind == "wan"
                            else "[B, F, C, H, W]"))
    frames, height, width = ((latent_shape[2], latent_shape[3], latent_shape[4])
                             if kind == "wan" else
                             (latent_shape[1], latent_shape[3], latent_shape[4]))
    p_t, p_h, p_w = _patch(kind, transformer)
    if frames % p_t or height % p_h or width % p_w:
        raise ValueError("hidden_states: latent shape %r (frames, height, width = %d, %d, %d) "
                         "is not divisible by %s's patch size (p_t, p_h, p_w) = (%d, %d, %d)"
                         % (tuple(int(x) for x in latent_shape), frames, height, width,
                            type(transformer).__name__, p_t, p_h, p_w))
    return frames // p_t, height // p_h, width // p_w


_WAN_ARGS = ("hidden_states", "timestep", "encoder_hidden_states")
_COG_ARGS = ("hidden_states", "encoder_hidden_states", "timestep")


def _argument(args: Tuple[Any, ...], kwargs: Dict[str, Any], names: Tuple[str, ...],
              name: str) -> Any:
    if name in kwargs:
        return kwargs[name]
    index = names.index(name)
    return args[index] if index < len(args) else None


def _timestep_value(timestep: Any) -> float:
    """The step_source "timestep" value of a forward's timestep: its largest value."""
    if timestep is None:
        raise TypeError("timestep: None; step_source = 'timestep' counts denoising steps "
                        "from the transformer's timestep argument: pass it, or enable PSA "
                        "with step_source = 'manual' (psa.diffusers.set_step)")
    if isinstance(timestep, torch.Tensor):
        if timestep.numel() == 0:
            raise ValueError("timestep: an empty tensor (shape %r); expected the denoising "
                             "timestep" % (tuple(timestep.shape),))
        try:
            value = float(timestep.max())
        except (TypeError, RuntimeError) as e:
            raise TypeError("timestep: a %s tensor; expected a real one (%s)"
                            % (timestep.dtype, e)) from None
    elif isinstance(timestep, numbers.Real):
        value = float(timestep)
    else:
        raise TypeError("timestep = %r: expected a number or a tensor" % (timestep,))
    if not math.isfinite(value):
        raise ValueError("timestep: largest value %r is not finite; step_source = "
                         "'timestep' needs a finite timestep to count denoising steps"
                         % (value,))
    return value


def _pre_hook(module: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
    """The transformer's forward pre-hook: the grid of this forward and the step. The state
    is the one of `module` (a deep copy of an enabled transformer has its own)."""
    state = _state_of(module)
    if state is None:
        return
    state.grid = None
    names = _WAN_ARGS if state.kind == "wan" else _COG_ARGS
    hidden_states = _argument(args, kwargs, names, "hidden_states")
    if not isinstance(hidden_states, torch.Tensor):
        raise TypeError("hidden_states: %s; expected the latent tensor"
                        % type(hidden_states).__name__)
    grid = latent_grid(module, tuple(hidden_states.shape))
    if state.step_source == "timestep":
        state.observe_timestep(_timestep_value(_argument(args, kwargs, names, "timestep")))
    elif state.step_source == "scheduler":
        state.ran = True
    if not torch.compiler.is_compiling():
        state.forwards += 1
    state.grid = state.last_grid = grid


def _post_hook(module: Any, args: Tuple[Any, ...], output: Any) -> None:
    """The transformer's forward hook (always called, also when the forward raises): the
    grid belongs to one forward, so a processor called outside one raises."""
    state = _state_of(module)
    if state is not None:
        state.grid = None


class _Bound:
    """A hook bound to its state as an attribute, not a closure: copy.deepcopy of the
    transformer copies the hook with the state (closures would keep the original's)."""

    def __init__(self, fn: Any, state: _State) -> None:
        self.fn = fn
        self.state = state

    def __call__(self, *args: Any) -> Any:
        return self.fn(self.state, *args)


# ---- the attention call ------------------------------------------------------------------
def _psa(state: _State, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
         layout: str, text_length: int) -> torch.Tensor:
    grid = state.grid
    if grid is None:
        raise RuntimeError("psa.diffusers: no video grid (the processor ran outside its "
                           "transformer's forward: the grid is set by the transformer's "
                           "forward from the latent shape and cleared when it ends)")
    seq = query.shape[1] if layout == "blhd" else query.shape[2]
    if state.sp is not None:
        seq = state.sp.seq_len  # the local shard's length is checked by SequenceParallel
    if grid[0] * grid[1] * grid[2] + text_length != seq:
        raise ValueError("psa.diffusers: the self-attention sequence has %d tokens but the "
                         "latent grid %r%s gives %d (sequence split or changed by another "
                         "hook?)" % (seq, grid, " plus %d text tokens" % text_length
                                     if text_length else "",
                                     grid[0] * grid[1] * grid[2] + text_length))
    if not torch.compiler.is_compiling():  # a counter read in a graph would be guarded on
        if state.dense:
            state.dense_calls += 1
        else:
            state.sparse_calls += 1
    if state.sp is not None:  # this rank's tokens of the whole sequence (psa.distributed)
        parallel_out: torch.Tensor = state.sp.attention(
            query, key, value, layout=layout, step=0 if state.dense else None,
            batch_offset=state.batch_offset)
        return parallel_out
    out: torch.Tensor = psa_torch.attention(
        query, key, value, config=state.key, grid=grid, text_length=text_length,
        text_first=state.text_first, layout=layout, step=0 if state.dense else None)
    return out


def _wan_rotary(hidden_states: torch.Tensor, freqs_cos: torch.Tensor,
                freqs_sin: torch.Tensor) -> torch.Tensor:
    # diffusers 0.42 WanAttnProcessor.__call__'s apply_rotary_emb
    x1, x2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
    cos = freqs_cos[..., 0::2]
    sin = freqs_sin[..., 1::2]
    out = torch.empty_like(hidden_states)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out.type_as(hidden_states)


def _wan_qkv(attn: Any, hidden_states: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    get = getattr(_wan, "_get_qkv_projections", None)
    if get is not None:
        q, k, v = get(attn, hidden_states, None)
        return q, k, v
    return attn.to_q(hidden_states), attn.to_k(hidden_states), attn.to_v(hidden_states)


class PsaWanAttnProcessor(WanAttnProcessor):  # type: ignore[misc]
    """WanAttnProcessor whose self-attention runs through libpsa (other calls: `original`)."""

    def __init__(self, state: _State, original: Any) -> None:
        super().__init__()
        self.psa_state = state
        self.original = original

    def __call__(self, attn: Any, hidden_states: torch.Tensor,
                 encoder_hidden_states: Optional[torch.Tensor] = None,
                 attention_mask: Optional[torch.Tensor] = None,
                 rotary_emb: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
                 **kwargs: Any) -> torch.Tensor:
        if (encoder_hidden_states is not None or attention_mask is not None or kwargs
                or attn.add_k_proj is not None):
            out: torch.Tensor = self.original(attn, hidden_states, encoder_hidden_states,
                                              attention_mask, rotary_emb, **kwargs)
            return out
        query, key, value = _wan_qkv(attn, hidden_states)
        query = attn.norm_q(query)
        key = attn.norm_k(key)
        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))
        if rotary_emb is not None:
            query = _wan_rotary(query, *rotary_emb)
            key = _wan_rotary(key, *rotary_emb)
        hidden_states = _psa(self.psa_state, query, key, value, "blhd", 0)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class PsaCogVideoXAttnProcessor(CogVideoXAttnProcessor2_0):  # type: ignore[misc]
    """CogVideoXAttnProcessor2_0 whose joint text+video attention runs through libpsa
    (text tokens first)."""

    def __init__(self, state: _State, original: Any) -> None:
        super().__init__()
        self.psa_state = state
        self.original = original

    def __call__(self, attn: Any, hidden_states: torch.Tensor,
                 encoder_hidden_states: torch.Tensor,
                 attention_mask: Optional[torch.Tensor] = None,
                 image_rotary_emb: Optional[torch.Tensor] = None
                 ) -> Tuple[torch.Tensor, torch.Tensor]:
        if attention_mask is not None:
            result: Tuple[torch.Tensor, torch.Tensor] = self.original(
                attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb)
            return result
        text_seq_length = encoder_hidden_states.size(1)
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        batch_size, sequence_length, _ = hidden_states.shape
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)
        inner_dim = key.shape[-1]
        head_dim = inner_dim // attn.heads
        query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)
        if image_rotary_emb is not None and sequence_length > text_seq_length:
            # (a sequence-parallel rank may hold text tokens only)
            from diffusers.models.embeddings import apply_rotary_emb

            query[:, :, text_seq_length:] = apply_rotary_emb(query[:, :, text_seq_length:],
                                                             image_rotary_emb)
            if not attn.is_cross_attention:
                key[:, :, text_seq_length:] = apply_rotary_emb(key[:, :, text_seq_length:],
                                                               image_rotary_emb)
        layout = self.psa_state.cog_layout
        if layout is not None and not layout.text_first_in_shard:
            # sequence parallel, text after the video in this rank's shard (Gilbert order
            # moves the text last): the shard's order is [video, text]
            query, key, value = (torch.cat([x[:, :, text_seq_length:], x[:, :, :text_seq_length]],
                                           dim=2) for x in (query, key, value))
        text_length = layout.text_length if layout is not None else text_seq_length
        hidden_states = _psa(self.psa_state, query, key, value, "bhld", text_length)
        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1,
                                                              attn.heads * head_dim)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        if layout is not None and not layout.text_first_in_shard:
            hidden_states, encoder_hidden_states = hidden_states.split(
                [hidden_states.size(1) - text_seq_length, text_seq_length], dim=1)
            return hidden_states, encoder_hidden_states
        encoder_hidden_states, hidden_states = hidden_states.split(
            [text_seq_length, hidden_states.size(1) - text_seq_length], dim=1)
        return hidden_states, encoder_hidden_states


# ---- targets -----------------------------------------------------------------------------
def _transformers(target: Any) -> Tuple[List[Any], Any, bool]:
    """(transformers, scheduler or None, is_pipeline)."""
    if isinstance(target, torch.nn.Module):
        return [target], None, False
    if hasattr(target, "transformer"):
        found = [t for t in (getattr(target, "transformer", None),
                             getattr(target, "transformer_2", None)) if t is not None]
        if not found:
            raise TypeError("%s has no transformer (transformer and transformer_2 are None)"
                            % type(target).__name__)
        return found, getattr(target, "scheduler", None), True
    raise TypeError("%s is not supported: pass a diffusers pipeline (with .transformer) or a "
                    "WanTransformer3DModel / CogVideoXTransformer3DModel"
                    % type(target).__name__)


def _self_attention_modules(transformer: Any, kind: str) -> List[Tuple[str, Any]]:
    blocks = transformer.blocks if kind == "wan" else transformer.transformer_blocks
    prefix = "blocks" if kind == "wan" else "transformer_blocks"
    found = []
    for i, block in enumerate(blocks):
        attn = block.attn1
        wanted = WanAttnProcessor if kind == "wan" else CogVideoXAttnProcessor2_0
        processor = attn.processor
        if isinstance(processor, (PsaWanAttnProcessor, PsaCogVideoXAttnProcessor)):
            raise RuntimeError("%s.%d.attn1 already runs a PSA processor" % (prefix, i))
        if type(processor) is not wanted:
            kind_of = ("a subclass of %s (its __call__ may compute something else)"
                       % wanted.__name__ if isinstance(processor, wanted) else "not %s"
                       % wanted.__name__)
            raise TypeError("%s.%d.attn1 uses %s.%s, %s; psa.diffusers replaces only "
                            "diffusers' default %s itself (diffusers %s)"
                            % (prefix, i, type(processor).__module__,
                               type(processor).__qualname__, kind_of, wanted.__name__,
                               SUPPORTED_DIFFUSERS))
        found.append(("%s.%d.attn1" % (prefix, i), attn))
    return found


def _wrap_scheduler(scheduler: Any, states: List[_State]) -> None:
    if getattr(scheduler, "_psa_wrapped", None) is not None:
        return
    saved = {name: scheduler.__dict__[name] for name in ("step", "set_timesteps")
             if name in scheduler.__dict__}
    scheduler.step = _SchedulerStep(scheduler.step, states)
    scheduler.set_timesteps = _SchedulerSetTimesteps(scheduler.set_timesteps, states)
    scheduler._psa_wrapped = saved


class _SchedulerStep:
    """scheduler.step, then the next step for every transformer that ran since the last one
    (an object, not a closure: a deep copy of the pipeline drives the copies' states)."""

    def __init__(self, wrapped: Any, states: List[_State]) -> None:
        self.wrapped = wrapped
        self.states = states
        self.__wrapped__ = wrapped  # inspect.signature: the scheduler's own

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.wrapped(*args, **kwargs)
        for state in self.states:
            if state.ran:
                state.set_step(state.step + 1)
                state.ran = False
        return result


class _SchedulerSetTimesteps:
    """scheduler.set_timesteps, after every transformer's step is set back to 0."""

    def __init__(self, wrapped: Any, states: List[_State]) -> None:
        self.wrapped = wrapped
        self.states = states
        self.__wrapped__ = wrapped  # inspect.signature: the scheduler's own

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for state in self.states:
            state.reset()
        return self.wrapped(*args, **kwargs)


def _unwrap_scheduler(scheduler: Any) -> None:
    saved = getattr(scheduler, "_psa_wrapped", None)
    if saved is None:
        return
    for name in ("step", "set_timesteps"):
        if name in saved:
            setattr(scheduler, name, saved[name])
        else:
            scheduler.__dict__.pop(name, None)
    del scheduler._psa_wrapped


# ---- sequence parallelism -----------------------------------------------------------------
_PARALLEL_KEYS = ("ulysses_degree", "ring_degree", "group", "ring_impl", "ulysses_chunks",
                  "timeout")


def _parallel_args(parallel: Any) -> Dict[str, Any]:
    if not isinstance(parallel, dict):
        raise TypeError("parallel = %r: expected a dict of psa.distributed.SequenceParallel "
                        "arguments (%s)" % (parallel, ", ".join(_PARALLEL_KEYS)))
    unknown = sorted(set(parallel) - set(_PARALLEL_KEYS))
    if unknown:
        raise TypeError("parallel: unknown key(s) %s; expected %s"
                        % (", ".join(unknown), ", ".join(_PARALLEL_KEYS)))
    return dict(parallel)


def _sequence_parallel(state: _State, grid: Tuple[int, int, int], text_length: int = 0) -> Any:
    """The SequenceParallel of `grid` (+ text tokens; one per shape: constructing one is
    collective, and every rank's forward sees the same latent shape)."""
    shape = tuple(grid) + (text_length,)
    sp = state.sp_by_grid.get(shape)
    if sp is None:
        from .distributed import SequenceParallel

        assert state.parallel is not None
        sp = SequenceParallel(grid=grid, config=psa_torch.config_from_key(state.key),
                              text_length=text_length, text_first=state.text_first,
                              **state.parallel)
        state.sp_by_grid[shape] = sp
    return sp


class _CogShard:
    """CogVideoX under sequence parallelism: which of the whole sequence's text and video
    tokens (text first, then t*h*w video tokens) this rank holds, in the shard's order.

    The blocks keep text and video in two streams (``encoder_hidden_states``,
    ``hidden_states``); every layer but self-attention is per token (the norms' text and
    video gates alike). A rank's shard of the preset's token order (Gilbert: text moved
    last; :meth:`SequenceParallel.shard`) splits into its text tokens (``text_index``) and
    its video tokens (``video_index``); the text is one contiguous run of the order, so it
    sits either before or after the shard's video tokens (``text_first_in_shard``), which
    is how the processor lays the shard out for the attention."""

    def __init__(self, sp: Any, text_length: int) -> None:
        T = text_length
        assert sp.order is not None
        order = sp.order
        self.text_length = T
        bounds = sp.bounds()
        a, b = bounds[sp.index]
        mine = order[a:b]
        self.text_index = mine[mine < T].contiguous()
        self.video_index = (mine[mine >= T] - T).contiguous()
        n_text = int(self.text_index.numel())
        self.text_first_in_shard = bool(n_text == 0 or int(mine[0]) < T)
        # the video tokens of every rank, concatenated in rank order (the gather's order)
        self.video_order = (order[order >= T] - T).contiguous()
        self.video_lengths = [int((order[x:y] >= T).sum()) for x, y in bounds]
        self._on: Dict[Any, Tuple[torch.Tensor, torch.Tensor]] = {}

    def indices(self, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        found = self._on.get(device)
        if found is None:
            found = (self.text_index.to(device), self.video_index.to(device))
            self._on[device] = found
        return found

    def gather_video(self, x: torch.Tensor, sp: Any) -> torch.Tensor:
        """The whole video sequence (dim 1, the caller's order) from every rank's video
        tokens."""
        if torch.compiler.is_compiling():
            from . import _distributed_ops

            full = _distributed_ops.gather_pieces(sp, x, 1, self.video_lengths)
        else:
            from .distributed import _gather_pieces

            full = _gather_pieces(x, 1, self.video_lengths, sp.group)
        out = torch.empty_like(full)
        out.index_copy_(1, self.video_order.to(full.device), full)
        return out


_COG_ROPE_INDEX = 5  # CogVideoXTransformer3DModel.forward's image_rotary_emb


def _install_cogvideox_parallel_hooks(state: _State, transformer: Any) -> None:
    """CogVideoX: the rank's text and video tokens are cut out at the input of
    ``transformer_blocks.0`` (the RoPE tables, a forward argument, at the transformer's
    input), the blocks, ``norm_final``, ``norm_out`` and ``proj_out`` run on them, and the
    video tokens of ``proj_out``'s output are gathered before unpatchify."""
    def enter(state: _State, module: Any, args: Tuple[Any, ...],
              kwargs: Dict[str, Any]) -> Any:
        state.sp = None
        state.cog_layout = None
        if state.grid is None:
            return None
        text = _argument(args, kwargs, _COG_ARGS, "encoder_hidden_states")
        text_length = int(text.shape[1])
        sp = _sequence_parallel(state, state.grid, text_length)
        shape = tuple(state.grid) + (text_length,)
        layout = state.cog_layouts.get(shape)
        if layout is None:
            layout = _CogShard(sp, text_length)
            state.cog_layouts[shape] = layout
        state.sp = sp
        state.cog_layout = layout
        name = "image_rotary_emb"
        rope = (kwargs[name] if name in kwargs else
                args[_COG_ROPE_INDEX] if len(args) > _COG_ROPE_INDEX else None)
        if rope is None:
            return None
        _, video_index = layout.indices(rope[0].device)
        local = tuple(x.index_select(-2, video_index) for x in rope)
        if name in kwargs:
            return args, dict(kwargs, image_rotary_emb=local)
        return args[:_COG_ROPE_INDEX] + (local,) + args[_COG_ROPE_INDEX + 1:], kwargs

    def leave(state: _State, module: Any, args: Tuple[Any, ...], output: Any) -> None:
        state.sp = None
        state.cog_layout = None

    def first_block(state: _State, module: Any, args: Tuple[Any, ...],
                    kwargs: Dict[str, Any]) -> Any:
        layout = state.cog_layout
        if layout is None:
            return None
        names = ("hidden_states", "encoder_hidden_states")
        values = [kwargs[n] if n in kwargs else args[i] for i, n in enumerate(names)]
        text_index, video_index = layout.indices(values[0].device)
        video = values[0].index_select(1, video_index)
        text = values[1].index_select(1, text_index)
        kwargs = dict(kwargs)
        positional = list(args)
        for i, (n, x) in enumerate(zip(names, (video, text))):
            if n in kwargs:
                kwargs[n] = x
            else:
                positional[i] = x
        return tuple(positional), kwargs

    def proj_out(state: _State, module: Any, args: Tuple[Any, ...], output: Any) -> Any:
        if state.cog_layout is None:
            return None
        return state.cog_layout.gather_video(output, state.sp)

    state.parallel_hooks = [
        transformer.register_forward_pre_hook(_Bound(enter, state), with_kwargs=True),
        transformer.register_forward_hook(_Bound(leave, state)),
        transformer.transformer_blocks[0].register_forward_pre_hook(
            _Bound(first_block, state), with_kwargs=True),
        transformer.proj_out.register_forward_hook(_Bound(proj_out, state)),
    ]


def _install_parallel_hooks(state: _State, transformer: Any) -> None:
    """Wan: the sequence is sharded where it first exists as tokens (the RoPE tables at the
    output of ``rope``, the patch embedding at the input of ``blocks.0``, a per-token timestep
    at the transformer's input) and gathered at the output of ``proj_out``, before
    unpatchify: the blocks, the output norm and the projection run on this rank's tokens in
    the preset's token order, and self-attention runs through SequenceParallel."""
    def enter(state: _State, module: Any, args: Tuple[Any, ...],
              kwargs: Dict[str, Any]) -> Any:
        state.sp = None
        if state.grid is None:
            return None
        sp = _sequence_parallel(state, state.grid)
        state.sp = sp
        name = "timestep"
        timestep = _argument(args, kwargs, _WAN_ARGS, name)
        if isinstance(timestep, torch.Tensor) and timestep.dim() == 2:  # per token (Wan2.2)
            local = sp.shard(timestep, dim=1)
            if name in kwargs:
                kwargs = dict(kwargs, timestep=local)
            else:
                index = _WAN_ARGS.index(name)
                args = args[:index] + (local,) + args[index + 1:]
            return args, kwargs
        return None

    def leave(state: _State, module: Any, args: Tuple[Any, ...], output: Any) -> None:
        state.sp = None

    def rope(state: _State, module: Any, args: Tuple[Any, ...], output: Any) -> Any:
        if state.sp is None:
            return None
        return tuple(state.sp.shard(x, dim=1) for x in output)

    def first_block(state: _State, module: Any, args: Tuple[Any, ...],
                    kwargs: Dict[str, Any]) -> Any:
        if state.sp is None:
            return None
        if "hidden_states" in kwargs:
            return args, dict(kwargs, hidden_states=state.sp.shard(kwargs["hidden_states"],
                                                                    dim=1))
        return (state.sp.shard(args[0], dim=1),) + args[1:], kwargs

    def proj_out(state: _State, module: Any, args: Tuple[Any, ...], output: Any) -> Any:
        if state.sp is None:
            return None
        return state.sp.gather(output, dim=1)

    state.parallel_hooks = [
        transformer.register_forward_pre_hook(_Bound(enter, state), with_kwargs=True),
        transformer.register_forward_hook(_Bound(leave, state)),
        transformer.rope.register_forward_hook(_Bound(rope, state)),
        transformer.blocks[0].register_forward_pre_hook(_Bound(first_block, state),
                                                        with_kwargs=True),
        transformer.proj_out.register_forward_hook(_Bound(proj_out, state)),
    ]


def enable_psa(target: Any, model: Optional[str] = None, preset: Optional[str] = None, *,
               step_source: str = "auto", parallel: Optional[Dict[str, Any]] = None,
               **overrides: Value) -> None:
    """Runs the self-attention of `target` (a pipeline with ``transformer`` and, for Wan2.2
    A14B, ``transformer_2``; or one transformer) through libpsa.

    model, preset: a model and preset of libpsa's attention_config.yaml (``psa.presets()``);
        model default: from the transformer (``Wan2.2_A14B`` for a pipeline with two
        transformers, ``Wan2.2_5B`` for in_channels 48, ``Wan2.1_1.3b`` for width 1536,
        else ``Wan2.1_14b``; ``CogVideo1.5_5b`` with patch_size_t, else ``CogVideo_5b``);
        preset default: the model's default (``psa_balanced``).
    overrides: parameters set on the preset (``warmup_steps=0``, or
        ``**{"mask_ratios.1": 0.3}`` for dotted names).
    step_source: "auto", "scheduler", "timestep" or "manual" (see the module doc).
    parallel: runs the transformer sequence-parallel over torch.distributed (Wan and
        CogVideoX):
        a dict of :class:`psa.distributed.SequenceParallel` arguments (``ulysses_degree``,
        ``ring_degree``, ``group``, ``ring_impl``, ``ulysses_chunks``, ``timeout``); every
        rank of the group calls enable_psa and the transformer with the same inputs and
        gets the whole output, the one a single process gives (see :func:`psa.distributed.
        enable_sequence_parallel`).

    Raises before any forward: TypeError for an unsupported pipeline, transformer or
    processor class (an attention processor must be diffusers' default class itself, not a
    subclass), psa.Error naming an unknown model, preset or parameter, ValueError for a
    causal preset (type psa_causal, or causal: true: these transformers attend both ways).
    Calling it on an enabled target re-enables it with the new settings.
    """
    if step_source not in _STEP_SOURCES:
        raise ValueError("step_source = %r: expected one of %s"
                         % (step_source, ", ".join(repr(s) for s in _STEP_SOURCES)))
    transformers, scheduler, is_pipeline = _transformers(target)
    kinds = [_kind_of(t) for t in transformers]
    parallel_args = None
    if parallel is not None:
        parallel_args = _parallel_args(parallel)
        for transformer, kind in zip(transformers, kinds):
            if getattr(transformer, "_parallel_config", None) is not None:
                raise RuntimeError("parallel: %s already runs diffusers' context "
                                   "parallelism (enable_parallelism); use one or the other"
                                   % type(transformer).__name__)
    source = step_source
    if source == "auto":
        source = "scheduler" if is_pipeline and scheduler is not None else "timestep"
    if source == "scheduler" and scheduler is None:
        raise ValueError("step_source = 'scheduler' needs a pipeline with a scheduler; pass "
                         "the pipeline, or use 'timestep' or 'manual'")
    plans = []
    for transformer, kind in zip(transformers, kinds):
        name = model if model is not None else _default_model(kind, transformer,
                                                              len(transformers) == 2)
        try:
            key = psa_torch.config_key(name, preset, dict(overrides))
        except Error as e:
            raise Error(e.status, "enable_psa(model=%r, preset=%r, overrides=%r): %s"
                        % (name, preset, dict(overrides), e.message)) from None
        cfg = psa_torch.config_from_key(key)
        if cfg["type"] == Method.PSA_CAUSAL or bool(cfg["causal"]):
            raise ValueError("enable_psa(model=%r, preset=%r, overrides=%r): a causal "
                             "preset (type %s, causal = %s); the self-attention of %s is "
                             "bidirectional over the video (and text) tokens: use a video "
                             "model's preset (psa.presets())"
                             % (name, preset, dict(overrides), cfg["type"],
                                str(bool(cfg["causal"])).lower(), type(transformer).__name__))
        warmup = int(cfg["warmup_steps"])
        plans.append((transformer, kind, name, key, warmup))
    if parallel_args is not None:  # degrees and the process group, checked on every rank
        from .distributed import SequenceParallel

        for _, _, _, key, _ in plans:
            SequenceParallel(config=psa_torch.config_from_key(key), **parallel_args)
    disable_psa(target)
    # Check every transformer's processors before changing any.
    modules = [_self_attention_modules(t, kind) for t, kind, _, _, _ in plans]
    states = []
    for (transformer, kind, name, key, warmup), attns in zip(plans, modules):
        state = _State(kind, name, key, warmup, source)
        cls = PsaWanAttnProcessor if kind == "wan" else PsaCogVideoXAttnProcessor
        for path, attn in attns:
            state.originals[path] = attn.processor
            attn.set_processor(cls(state, attn.processor))
        state.hook = transformer.register_forward_pre_hook(_pre_hook, with_kwargs=True)
        state.post_hook = transformer.register_forward_hook(_post_hook, always_call=True)
        if parallel_args is not None:
            state.parallel = parallel_args
            if kind == "wan":
                _install_parallel_hooks(state, transformer)
            else:
                _install_cogvideox_parallel_hooks(state, transformer)
        transformer.__dict__[_STATE_ATTR] = state
        states.append(state)
    if source == "scheduler":
        _wrap_scheduler(scheduler, states)


def disable_psa(target: Any) -> None:
    """Restores the original attention processors (the same objects), removes the hooks and
    the scheduler wrappers. A no-op for a target that is not enabled."""
    transformers, scheduler, _ = _transformers(target)
    for transformer in transformers:
        state = _state_of(transformer)
        if state is None:
            continue
        for path, original in state.originals.items():
            transformer.get_submodule(path).set_processor(original)
        for handle in (state.hook, state.post_hook):
            if handle is not None:
                handle.remove()
        for hook in state.parallel_hooks:
            hook.remove()
        del transformer.__dict__[_STATE_ATTR]
    if scheduler is not None:
        _unwrap_scheduler(scheduler)


def is_enabled(target: Any) -> bool:
    """True when any transformer of `target` runs PSA."""
    return any(_state_of(t) is not None for t in _transformers(target)[0])


def _states(target: Any) -> List[_State]:
    states = [_state_of(t) for t in _transformers(target)[0]]
    found = [s for s in states if s is not None]
    if not found:
        raise RuntimeError("%s: PSA is not enabled (call psa.diffusers.enable_psa first)"
                           % type(target).__name__)
    return found


def set_step(target: Any, step: int) -> None:
    """Sets the denoising step of every transformer of `target` (for step_source
    "manual"; with the other sources counting goes on from it)."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError("step = %r: expected an int >= 0" % (step,))
    for state in _states(target):
        state.set_step(step)


def reset_steps(target: Any) -> None:
    """Starts counting again at step 0 and zeroes the call counters."""
    for state in _states(target):
        state.reset()
        state.dense_calls = state.sparse_calls = state.forwards = 0


def stats(target: Any) -> List[Dict[str, Any]]:
    """Per transformer: model, config key, step, dense (the current step is a warm-up step),
    warmup_steps, grid of the last forward, forwards, dense_calls and sparse_calls (self-
    attention calls), step_source."""
    return [{"model": s.model, "config": s.key, "step": s.step, "dense": s.dense,
             "warmup_steps": s.warmup_steps, "grid": s.last_grid, "forwards": s.forwards,
             "dense_calls": s.dense_calls, "sparse_calls": s.sparse_calls,
             "step_source": s.step_source,
             "parallel": None if s.parallel is None else
             {k: v for k, v in s.parallel.items() if k != "group"}} for s in _states(target)]

