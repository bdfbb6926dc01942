# bindings/python/psa/xdit.py -- Pyramid Sparse Attention for xDiT (the xfuser package):
# enable_psa() runs the self-attention of xfuser's Wan transformer (xFuserWanTransformer3D-
# Wrapper, in a diffusers WanPipeline or xfuser's Wan runner) through
# psa.distributed.SequenceParallel under the degrees xDiT set up (ulysses_degree x
# ring_degree of xfuser's sequence-parallel group), so every rank returns the output of the
# single-process PSA transformer. Imported on demand only (`import psa.xdit`).
"""Pyramid Sparse Attention inside xDiT's sequence parallelism.

::

    # under torchrun, after xfuser set up its groups (xFuserArgs(...).create_config(),
    # initialize_runtime_state(...)) and built its Wan pipeline
    import psa.xdit
    psa.xdit.enable_psa(pipe, model="Wan2.1_14b", preset="psa_balanced")
    video = pipe(prompt, ...).frames          # every rank: the single-process PSA video
    psa.xdit.disable_psa(pipe)

What changes. xDiT's Wan transformer cuts the patch-embedded sequence into equal pieces
in its natural order (zero-padded to a multiple of the group size) and runs its USP
attention (yunchang) on them. A PSA mask row needs the importance of its query block
against every key block, and Gilbert order needs whole query blocks per rank, so
:func:`enable_psa` replaces both: the transformer's ``_chunk_and_pad_sequence`` /
``_gather_and_unpad`` cut and gather with :meth:`psa.distributed.SequenceParallel.shard` /
``gather`` (the preset's token order, whole query blocks per ring shard, no padding), and
the self-attention of every block (``attn1``) runs libpsa through that SequenceParallel
(the processor of :mod:`psa.diffusers`: Ulysses all-to-all over xDiT's ulysses group,
K/V gathered over its ring group). Cross-attention and everything else run xfuser's code.

Degrees and groups come from xfuser's parallel state (``get_ulysses_parallel_world_size``,
``get_ring_parallel_world_size``, ``get_sp_group``): libpsa uses xDiT's own Ulysses and
ring process groups, so nothing is created and CFG / data-parallel ranks (other sequence-
parallel groups) need no extra collective. Warm-up counting, :func:`psa.diffusers.stats`
and the disable call work as in :mod:`psa.diffusers`.

CFG parallelism (xfuser's ``use_cfg_parallel``, CFG degree 2, alone or times the sequence-
parallel degrees): xDiT's pipelines give CFG rank 0 the uncond items and rank 1 the cond
items of the step's [uncond, cond] batch; each rank's libpsa samples its items at their
place in the whole batch (the batch offset), so every rank's output is its half of the one-
process forward of the whole batch (``cfg_batch="whole"``: the caller passes the whole batch,
every rank returns all of it). See :func:`enable_psa`.

Supported: xfuser 0.7 (tested with 0.7.0, yunchang 0.6.4, diffusers 0.42.1) and its Wan
transformer; other xfuser transformers raise TypeError (xfuser's CogVideoX cuts the latent
by height inside its pipeline; CogVideoX runs sequence-parallel through
:func:`psa.distributed.enable_sequence_parallel` on diffusers' pipeline instead).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from . import diffusers as psa_diffusers
from . import distributed as psd
from ._config import Value

__all__ = ["enable_psa", "disable_psa", "parallel_degrees", "cfg_degree", "CfgParallelError",
           "SUPPORTED_XFUSER"]

SUPPORTED_XFUSER = "0.7"
"""The xfuser minor version the hooks follow (tested: 0.7.0)."""


def _parallel_state() -> Any:
    try:
        from xfuser.core.distributed import parallel_state
    except ImportError as e:
        raise ImportError("psa.xdit needs xfuser (pip install xfuser; tested: %s.0): %s"
                          % (SUPPORTED_XFUSER, e)) from e
    if not parallel_state.model_parallel_is_initialized():
        raise RuntimeError("psa.xdit: xfuser's parallel groups are not set up; call "
                           "xfuser's init_distributed_environment and "
                           "initialize_model_parallel (xFuserArgs(...).create_config() does "
                           "both) on every rank first")
    return parallel_state


def parallel_degrees() -> Tuple[int, int, Any]:
    """``(ulysses_degree, ring_degree, group)`` of xfuser's sequence-parallel group on this
    rank (group: its torch.distributed process group)."""
    ps = _parallel_state()
    sp_group = ps.get_sp_group()
    return (int(ps.get_ulysses_parallel_world_size()), int(ps.get_ring_parallel_world_size()),
            sp_group.device_group)


def cfg_degree() -> Tuple[int, int, Any]:
    """``(degree, rank, group)`` of xfuser's CFG group on this rank (degree 2 under
    ``use_cfg_parallel``: CFG rank 0 runs the uncond items, rank 1 the cond items)."""
    ps = _parallel_state()
    group = ps.get_cfg_group()
    return (int(ps.get_classifier_free_guidance_world_size()),
            int(ps.get_classifier_free_guidance_rank()), group.device_group)


def _adopt_xdit_subgroups(sp_group: Any, U: int, R: int) -> None:
    """Lets psa.distributed use xDiT's Ulysses and ring groups (the same ranks in the same
    order) instead of creating its own: new_group is collective over the world, and the
    ranks of other sequence-parallel groups (CFG, data parallel) would not call it alike."""
    ranks = list(dist.get_process_group_ranks(sp_group.device_group))
    key = (tuple(ranks), U, R, id(dist.distributed_c10d._get_default_group()))
    me = ranks.index(dist.get_rank())
    ring_index, ulysses_index = divmod(me, U)
    if U == 1 or R == 1:  # one degree: the sequence-parallel group is the other's group
        whole = sp_group.device_group
        psd._SUBGROUPS[key] = ([whole] * R, [whole] * U)
        return
    want_u = [ranks[ring_index * U + u] for u in range(U)]
    want_r = [ranks[r * U + ulysses_index] for r in range(R)]
    ulysses_group = getattr(sp_group, "ulysses_group", None)
    ring_group = getattr(sp_group, "ring_group", None)
    if ulysses_group is None or ring_group is None:
        raise RuntimeError("psa.xdit: xfuser's sequence-parallel group has no ulysses/ring "
                           "groups (yunchang missing?); psa.xdit needs them for "
                           "ulysses_degree x ring_degree = %d x %d" % (U, R))
    got_u = list(dist.get_process_group_ranks(ulysses_group))
    got_r = list(dist.get_process_group_ranks(ring_group))
    if got_u != want_u or got_r != want_r:
        raise RuntimeError("psa.xdit: xfuser's Ulysses group %r / ring group %r on rank %d "
                           "are not the consecutive-Ulysses layout psa.distributed uses "
                           "(%r / %r)" % (got_u, got_r, dist.get_rank(), want_u, want_r))
    ulysses_groups: List[Any] = [None] * R
    ring_groups: List[Any] = [None] * U
    ulysses_groups[ring_index] = ulysses_group
    ring_groups[ulysses_index] = ring_group
    psd._SUBGROUPS[key] = (ulysses_groups, ring_groups)


_CFG_BATCH = ("split", "whole")
_WAN_FORWARD = ("hidden_states", "timestep", "encoder_hidden_states",
                "encoder_hidden_states_image")


class _Cfg:
    """CFG parallelism of one transformer: xDiT's CFG group (degree 2: CFG rank 0 holds the
    uncond items, rank 1 the cond items of the whole [uncond, cond] batch), the mode and
    the shapes already checked across the group."""

    def __init__(self, degree: int, rank: int, group: Any, mode: str, timeout: float) -> None:
        self.degree = degree
        self.rank = rank
        self.group = group
        self.mode = mode
        self.timeout = timeout
        self.checked: Dict[Tuple[Any, ...], bool] = {}

    def check(self, key: Tuple[Any, ...], local_error: Optional[str]) -> None:
        """Every rank of the CFG group has the same shapes (and no local error), else a
        CfgParallelError on every rank that arrived; waits `timeout` seconds at most."""
        if key in self.checked and local_error is None:
            return
        backend = str(dist.get_backend(self.group)).lower()
        device = (torch.device("cuda", torch.cuda.current_device()) if backend == "nccl"
                  else torch.device("cpu"))

        def timed_out(detail: Optional[str]) -> Exception:
            if detail is None:
                return CfgParallelError("psa.xdit: the CFG agreement check timed out after "
                                        "%.0f s" % self.timeout)
            return CfgParallelError(
                "psa.xdit: the CFG agreement check timed out after %.0f s: the other CFG "
                "rank did not reach this forward (%s)" % (self.timeout, detail))

        values = psd._gather_agreement(repr((self.mode, key)), local_error, self.group,
                                      self.degree, device, self.timeout, timed_out)
        if local_error:
            raise CfgParallelError(local_error)
        if any(v[1] for v in values):
            raise CfgParallelError("psa.xdit: CFG rank(s) %s rejected their input (see their "
                                   "error)" % [i for i, v in enumerate(values) if v[1]])
        if any(v[0] != values[0][0] for v in values):
            raise CfgParallelError(
                "psa.xdit: the CFG ranks disagree on the transformer's input shapes (here: "
                "%r); with cfg_batch = %r every CFG rank must get %s"
                % (key, self.mode, "its half of the [uncond, cond] batch, the same shapes"
                   if self.mode == "split" else "the same whole [uncond, cond] batch"))
        self.checked[key] = True


class CfgParallelError(RuntimeError):
    """Bad CFG-parallel input (a batch that is not [uncond, cond], ranks that disagree)."""


def _shapes(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Any, ...]:
    out = []
    for i, name in enumerate(_WAN_FORWARD):
        x = kwargs.get(name, args[i] if i < len(args) else None)
        out.append(tuple(x.shape) if isinstance(x, torch.Tensor) else None)
    return tuple(out)


def _cfg_enter(cfg: _Cfg, state: Any, args: Tuple[Any, ...],
               kwargs: Dict[str, Any]) -> Any:
    """Sets this rank's batch offset; in "whole" mode cuts this rank's half of the batch."""
    hidden = psa_diffusers._argument(args, kwargs, _WAN_FORWARD, "hidden_states")
    batch = int(hidden.shape[0])
    key = _shapes(args, kwargs)
    if cfg.mode == "split":
        cfg.check(key, None)
        state.batch_offset = cfg.rank * batch
        return None
    error = None
    if batch % cfg.degree:
        error = ("hidden_states: batch %d with CFG degree %d and cfg_batch = 'whole': the "
                 "batch must be the whole [uncond, cond] batch, a multiple of %d (or pass "
                 "each CFG rank its half with cfg_batch = 'split')"
                 % (batch, cfg.degree, cfg.degree))
    cfg.check(key, error)
    half = batch // cfg.degree
    state.batch_offset = cfg.rank * half
    positional = list(args)
    kwargs = dict(kwargs)
    for i, name in enumerate(_WAN_FORWARD):
        x = kwargs.get(name, positional[i] if i < len(positional) else None)
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] != batch:
            continue  # a timestep shared by the batch, no image context
        local = x.narrow(0, cfg.rank * half, half)
        if name in kwargs:
            kwargs[name] = local
        else:
            positional[i] = local
    return tuple(positional), kwargs


def _cfg_leave(cfg: _Cfg, output: Any) -> Any:
    """"whole" mode: every CFG rank's half of the output, all-gathered along the batch."""
    if cfg.mode != "whole":
        return None
    sample = output[0] if isinstance(output, tuple) else output.sample
    parts = [torch.empty_like(sample) for _ in range(cfg.degree)]
    dist.all_gather(parts, sample.contiguous(), group=cfg.group)
    whole = torch.cat(parts, dim=0)
    if isinstance(output, tuple):
        return (whole,) + tuple(output[1:])
    output.sample = whole
    return output


class _Restore:
    """A removable handle (as torch's hooks) that deletes instance attributes."""

    def __init__(self, module: Any, names: Tuple[str, ...]) -> None:
        self.module = module
        self.names = names

    def remove(self) -> None:
        for name in self.names:
            self.module.__dict__.pop(name, None)


def _is_xdit_wan(transformer: Any) -> bool:
    from diffusers.models.transformers.transformer_wan import WanTransformer3DModel

    return (isinstance(transformer, WanTransformer3DModel)
            and hasattr(transformer, "_chunk_and_pad_sequence")
            and hasattr(transformer, "_gather_and_unpad"))


def _install_xdit_hooks(state: Any, transformer: Any, cfg: Optional[_Cfg]) -> None:
    chunk = transformer._chunk_and_pad_sequence
    gather = transformer._gather_and_unpad

    def enter(module: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        state.sp = None
        state.batch_offset = 0
        changed = None
        if cfg is not None:
            changed = _cfg_enter(cfg, state, args, kwargs)
        if state.grid is not None:
            state.sp = psa_diffusers._sequence_parallel(state, state.grid)
        return changed

    def leave(module: Any, args: Tuple[Any, ...], output: Any) -> Any:
        state.sp = None
        state.batch_offset = 0
        if cfg is not None:
            return _cfg_leave(cfg, output)
        return None

    def shard(x: torch.Tensor, sp_world_rank: int, sp_world_size: int, pad_amount: int,
              dim: int) -> torch.Tensor:
        if state.sp is None:
            out: torch.Tensor = chunk(x, sp_world_rank, sp_world_size, pad_amount, dim)
            return out
        local: torch.Tensor = state.sp.shard(x, dim=dim % x.dim())
        return local

    def unshard(x: torch.Tensor, pad_amount: int, dim: int) -> torch.Tensor:
        if state.sp is None:
            out: torch.Tensor = gather(x, pad_amount, dim)
            return out
        full: torch.Tensor = state.sp.gather(x, dim=dim % x.dim())
        return full

    transformer.__dict__["_chunk_and_pad_sequence"] = shard
    transformer.__dict__["_gather_and_unpad"] = unshard
    state.parallel_hooks = [
        transformer.register_forward_pre_hook(enter, with_kwargs=True),
        transformer.register_forward_hook(leave),
        _Restore(transformer, ("_chunk_and_pad_sequence", "_gather_and_unpad")),
    ]


def _transformers(target: Any) -> List[Any]:
    pipe = getattr(target, "pipe", None)  # xfuser's model runners hold the pipeline
    if pipe is not None and not isinstance(target, torch.nn.Module):
        target = pipe
    return psa_diffusers._transformers(target)[0]


def enable_psa(target: Any, model: Optional[str] = None, preset: Optional[str] = None, *,
               step_source: str = "auto", timeout: float = 60.0, cfg_batch: str = "split",
               **overrides: Value) -> None:
    """Runs the self-attention of xfuser's Wan transformer(s) in `target` (a diffusers
    WanPipeline holding xFuserWanTransformer3DWrapper, the transformer itself, or an xfuser
    runner with ``.pipe``) through libpsa, sequence-parallel under xDiT's degrees.

    model, preset, overrides, step_source: as :func:`psa.diffusers.enable_psa`.
    timeout: seconds the first forward's agreement checks wait for every rank.
    cfg_batch: under xDiT's CFG parallelism (``use_cfg_parallel``, CFG degree 2), what the
        transformer gets on each CFG rank. "split" (default; xDiT's pipelines): its half of
        the [uncond, cond] batch, uncond on CFG rank 0, cond on rank 1; libpsa samples these
        items as the items ``cfg_rank * batch ...`` of the whole batch (the batch offset),
        so each rank's output is its half of the one-process forward of the whole batch.
        "whole" (pipelines that batch CFG themselves, e.g. diffusers' CogVideoX-style
        ``torch.cat([latents] * 2)``): every CFG rank gets the whole batch, runs its half
        and all-gathers the output, so every rank returns the one-process output of the
        whole batch; a batch that CFG degree does not divide raises CfgParallelError on
        every rank. Without CFG parallelism cfg_batch is not used.
    Every rank calls it after xfuser set up its groups. Raises ImportError without
    xfuser, RuntimeError before xfuser's groups exist, TypeError for a transformer that is
    not xfuser's Wan transformer; nothing is changed then."""
    ps = _parallel_state()
    pipe = getattr(target, "pipe", None)
    if pipe is not None and not isinstance(target, torch.nn.Module):
        target = pipe
    transformers = _transformers(target)
    for t in transformers:
        if not _is_xdit_wan(t):
            hint = ""
            if "CogVideoX" in type(t).__name__:
                hint = ("; xfuser's CogVideoX pipeline cuts the latent by height before the "
                        "transformer, which a PSA mask row cannot use: run diffusers' "
                        "CogVideoXPipeline with psa.distributed.enable_sequence_parallel "
                        "(Ulysses / ring / USP, the same output as one process)")
            raise TypeError("%s is not xfuser's Wan transformer (xFuserWanTransformer3D"
                            "Wrapper); psa.xdit supports xfuser %s's Wan, psa.diffusers "
                            "covers diffusers' own transformers%s"
                            % (type(t).__name__, SUPPORTED_XFUSER, hint))
    if cfg_batch not in _CFG_BATCH:
        raise ValueError("cfg_batch = %r: expected 'split' or 'whole'" % (cfg_batch,))
    U, R, group = parallel_degrees()
    degree, cfg_rank, cfg_group = cfg_degree()
    _adopt_xdit_subgroups(ps.get_sp_group(), U, R)
    psa_diffusers.enable_psa(target, model, preset, step_source=step_source,
                             parallel={"ulysses_degree": U, "ring_degree": R, "group": group,
                                       "timeout": timeout}, **overrides)
    for t in transformers:
        state = psa_diffusers._state_of(t)
        assert state is not None
        for hook in state.parallel_hooks:  # diffusers' Wan sharding: xfuser shards itself
            hook.remove()
        cfg = (_Cfg(degree, cfg_rank, cfg_group, cfg_batch, float(timeout)) if degree > 1
               else None)
        _install_xdit_hooks(state, t, cfg)


def disable_psa(target: Any) -> None:
    """Restores xfuser's processors and sequence split (:func:`psa.diffusers.disable_psa`)."""
    pipe = getattr(target, "pipe", None)
    if pipe is not None and not isinstance(target, torch.nn.Module):
        target = pipe
    psa_diffusers.disable_psa(target)
