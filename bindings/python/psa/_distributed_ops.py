# bindings/python/psa/_distributed_ops.py -- the sequence-parallel forward and the gather of
# psa.distributed as PyTorch custom ops (psa::sp_attention, psa::sp_gather), so that
# torch.compile traces a model whose attention runs sequence-parallel without tracing
# torch.distributed calls: each op is one opaque node of the graph (no graph break); its
# real implementation is the eager SequenceParallel code (all_to_all, all_gather, libpsa).
"""Custom ops behind :class:`psa.distributed.SequenceParallel` under torch.compile.

A SequenceParallel is named in the graph by an int handle (``sp._psa_op_handle``, given by
its constructor, read as a constant when the graph is traced); the ops look it up when they
run. Both ops return new contiguous tensors, as their fake (meta) implementations say."""

from __future__ import annotations

from typing import Any, List, Optional

import torch

SP_ATTENTION = "psa::sp_attention"
SP_GATHER = "psa::sp_gather"


def _lookup(handle: int) -> Any:
    from .distributed import _BY_HANDLE

    sp = _BY_HANDLE.get(int(handle))
    if sp is None:
        raise RuntimeError("psa.distributed: SequenceParallel handle %d no longer exists (a "
                           "compiled graph outlived the SequenceParallel it was traced with)"
                           % handle)
    return sp


def _sp_attention_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, handle: int,
                       layout: str, step: Optional[int], head_offset: int,
                       batch_offset: int) -> torch.Tensor:
    out: torch.Tensor = _lookup(handle).attention(q, k, v, layout=layout, step=step,
                                                  head_offset=head_offset,
                                                  batch_offset=batch_offset)
    return out.contiguous()


def _sp_attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, handle: int,
                       layout: str, step: Optional[int], head_offset: int,
                       batch_offset: int) -> torch.Tensor:
    return q.new_empty(q.shape)


def _sp_gather_impl(x: torch.Tensor, handle: int, dim: int,
                    lengths: List[int]) -> torch.Tensor:
    # The ranks agree on their pieces first (each its rank's length of `lengths`), as the
    # eager gather does: a wrong piece raises on every rank instead of being zero-filled.
    out: torch.Tensor = _lookup(handle)._gather_checked(x, dim, list(lengths))
    return out.contiguous() if len(lengths) > 1 else out.clone(
        memory_format=torch.contiguous_format)


def _sp_gather_fake(x: torch.Tensor, handle: int, dim: int,
                    lengths: List[int]) -> torch.Tensor:
    shape = list(x.shape)
    shape[dim] = sum(lengths)
    return x.new_empty(shape)


_sp_attention_op: Any = torch.library.custom_op(SP_ATTENTION, mutates_args=())(
    _sp_attention_impl)
_sp_attention_op.register_fake(_sp_attention_fake)
_sp_gather_op: Any = torch.library.custom_op(SP_GATHER, mutates_args=())(_sp_gather_impl)
_sp_gather_op.register_fake(_sp_gather_fake)


def attention(sp: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: str,
              step: Optional[int], head_offset: int, batch_offset: int) -> torch.Tensor:
    """``sp.attention`` as one node of a traced graph."""
    out: torch.Tensor = torch.ops.psa.sp_attention(q, k, v, sp._psa_op_handle, layout, step,
                                                   head_offset, batch_offset)
    return out


def gather_pieces(sp: Any, x: torch.Tensor, dim: int, lengths: List[int]) -> torch.Tensor:
    """The concatenation along `dim` of every rank's piece (piece i: lengths[i] entries) of
    sp's group, as one node of a traced graph."""
    if dim < 0:
        dim += x.dim()
    out: torch.Tensor = torch.ops.psa.sp_gather(x, sp._psa_op_handle, dim,
                                                [int(n) for n in lengths])
    return out
