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

Supported: xfuser 0.7 (tested with 0.7.0, yunchang 0.6.4, diffusers 0.42.1) and its Wan
transformer; other xfuser transformers raise TypeError.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist

from . import diffusers as psa_diffusers
from . import distributed as psd
from ._config import Value

__all__ = ["enable_psa", "disable_psa", "parallel_degrees", "SUPPORTED_XFUSER"]

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


def _adopt_xdit_subgroups(sp_group: Any, U: int, R: int) -> None:
    """Lets psa.distributed use xDiT's Ulysses and ring groups (the same ranks in the same
    order) instead of creating its own: new_group is collective over the world, and the
    ranks of other sequence-parallel groups (CFG, data parallel) would not call it alike."""
    ranks = list(dist.get_process_group_ranks(sp_group.device_group))
    if U == 1 or R == 1:
        return  # psa.distributed uses the sequence-parallel group itself
    me = ranks.index(dist.get_rank())
    ring_index, ulysses_index = divmod(me, U)
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
    key = (tuple(ranks), U, R, id(dist.distributed_c10d._get_default_group()))
    ulysses_groups: List[Any] = [None] * R
    ring_groups: List[Any] = [None] * U
    ulysses_groups[ring_index] = ulysses_group
    ring_groups[ulysses_index] = ring_group
    psd._SUBGROUPS[key] = (ulysses_groups, ring_groups)


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


def _install_xdit_hooks(state: Any, transformer: Any) -> None:
    chunk = transformer._chunk_and_pad_sequence
    gather = transformer._gather_and_unpad

    def enter(module: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        state.sp = None
        if state.grid is not None:
            state.sp = psa_diffusers._sequence_parallel(state, state.grid)

    def leave(module: Any, args: Tuple[Any, ...], output: Any) -> None:
        state.sp = None

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
               step_source: str = "auto", timeout: float = 60.0,
               **overrides: Value) -> None:
    """Runs the self-attention of xfuser's Wan transformer(s) in `target` (a diffusers
    WanPipeline holding xFuserWanTransformer3DWrapper, the transformer itself, or an xfuser
    runner with ``.pipe``) through libpsa, sequence-parallel under xDiT's degrees.

    model, preset, overrides, step_source: as :func:`psa.diffusers.enable_psa`.
    timeout: seconds the first forward's agreement check waits for every rank.
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
            raise TypeError("%s is not xfuser's Wan transformer (xFuserWanTransformer3D"
                            "Wrapper); psa.xdit supports xfuser %s's Wan, psa.diffusers "
                            "covers diffusers' own transformers"
                            % (type(t).__name__, SUPPORTED_XFUSER))
    U, R, group = parallel_degrees()
    _adopt_xdit_subgroups(ps.get_sp_group(), U, R)
    psa_diffusers.enable_psa(target, model, preset, step_source=step_source,
                             parallel={"ulysses_degree": U, "ring_degree": R, "group": group,
                                       "timeout": timeout}, **overrides)
    for t in transformers:
        state = psa_diffusers._state_of(t)
        assert state is not None
        for hook in state.parallel_hooks:  # diffusers' Wan sharding: xfuser shards itself
            hook.remove()
        _install_xdit_hooks(state, t)


def disable_psa(target: Any) -> None:
    """Restores xfuser's processors and sequence split (:func:`psa.diffusers.disable_psa`)."""
    pipe = getattr(target, "pipe", None)
    if pipe is not None and not isinstance(target, torch.nn.Module):
        target = pipe
    psa_diffusers.disable_psa(target)
