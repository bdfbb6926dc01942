# bindings/python/psa/distributed.py -- sequence parallelism with libpsa over
# torch.distributed (NCCL on GPUs, gloo on CPUs): Ulysses (all-to-all from sequence shards
# to head shards), ring (sequence shards of the queries against every key block) and USP
# (ulysses_degree x ring_degree), each giving every rank the rows the single-process
# psa.attention would give it. Imported on demand only (`import psa.distributed`).
"""Sequence-parallel Pyramid Sparse Attention over torch.distributed.

::

    import psa.distributed as psd
    sp = psd.SequenceParallel(grid=(21, 30, 52), model="Wan2.1_1.3b",
                              ulysses_degree=2, ring_degree=2)   # 4 ranks
    q_local = sp.shard(q, dim=1)          # [B, L, H, D] -> this rank's tokens ("blhd")
    ...                                   # the model runs on its local tokens
    out_local = sp.attention(q_local, k_local, v_local)
    out = sp.gather(out_local, dim=1)     # every rank: the whole sequence again

Order and shards. A preset that rearranges tokens (Gilbert) computes in the curve order;
:meth:`SequenceParallel.shard` permutes a whole sequence once into that order
(:func:`psa.sequence_order`) and cuts it into this rank's piece, :meth:`gather` undoes both.
Per-token layers (projections, norms, MLPs) do not care about the order; only the final
output must be gathered (or permuted back) before position-dependent steps such as
unpatchify. Ring shards hold whole query blocks (block_size.m tokens) so no block straddles
two ranks; Ulysses pieces inside a ring shard are equal up to the last one.

Ulysses: the ulysses group exchanges sequence pieces for head groups (all_to_all), runs
libpsa on H / ulysses_degree heads with ``head_offset`` (the importance samples of the whole
tensor's heads), and exchanges back. Without a ring the heads go in ``ulysses_chunks`` chunks
(default 2): chunk c is computed while the later chunks' inputs are still arriving and chunk
c - 1's output is leaving. Besides the transfers a forward copies q, k, v once each (into
their send buffers; libpsa reads what arrives in place, strided) and the output once (libpsa
writes it into the buffer that is sent back; the copy puts the heads in order).

Ring, ``ring_impl="allgather"`` (the default up to ring_degree 4, and the only ring for
ada_bsa and for block sizes where p2p does not apply): K and V are all-gathered once per
forward and each rank runs its query shard against the whole K/V, bit-exact with one
process. ``ring_impl="p2p"`` (the default from ring_degree 5 on, for types psa and dense):
the mask of a query block needs its importance against every key block of the sequence,
so the ring group first all-gathers K only (not V) and each rank builds the level map of
its query shard against every key block (:meth:`psa.Context.compute_level_map`: the same
ranking, levels, text rules and similarity cap as one process), then drops the gathered K.
The K/V shards then travel round the ring (batch_isend_irecv; on GPUs the next shard's
transfer overlaps the current shard's attention), each shard is attended at its columns of
the map with pyramids pooled from the shard itself (:meth:`psa.Context.shard_attention`),
and the partial results are merged through their float32 log-sum-exps
(:func:`psa.merge_attention`). Memory per rank: the whole K for the map (L * Hkv/U * D
elements, transient) plus two K/V shards (4 * L/R * Hkv/U * D), against 2 * L * Hkv/U * D
for the all-gather of K and V: less only from R = 5 on. Traffic: the K all-gather
((R-1)/R * L * Hkv/U * D) plus R-1 shard passes of K and V (2 * (R-1)/R * L * Hkv/U * D),
1.5x the all-gather ring's volume. On two H200s the p2p ring was 11-22% slower than the
all-gather ring (every row's kept blocks split over R attention calls, the LSE merge;
BENCHMARKS.md). (The importance reads only block_size.n / sample_divisor sampled keys of
each block, a quarter with the default divisor 4, but the similarity cap compares every
token of neighbouring key blocks; the whole K keeps the map equal to the single-process
one for every preset.) Key shards start at key block boundaries, so ring shards of whole
query blocks need block_size.m to be a multiple of block_size.n. The p2p ring runs on CPU
and CUDA tensors alike (the CUDA backend enqueues the level map and the shard attentions on
the tensors' stream). The dense method's p2p ring passes shards and merges the same way,
without a map.

Agreement: a forward or gather first checks collectively (one all_gather of three int64 per
rank, waiting `timeout` seconds at most) that every rank has the same config, grid, degrees,
dtypes, devices and shapes (q, k and v alike), and that each rank's own input is valid (its
local tokens are its shard); a mismatch, a rank whose input is bad, or a rank that does not
arrive, raises SequenceParallelError on every rank that arrived, before any transfer of the
forward starts, instead of aborting or hanging the group. With ``agree="first"`` (the
default) the check runs on the first call of each input signature of a rank and later calls
with that signature skip it: no host synchronisation or extra collective in the steady
state, so the forward stays stream-ordered. A rank that then changes only its own input (the
others repeating theirs) raises its own error, or runs a check the others skip; the others
wait in the forward's transfers until the process group's timeout. ``agree="always"``
checks every call (one small all_gather and a host synchronisation per call), which turns
that case into SequenceParallelError on every rank too. Bad argument values raise subclasses
of SequenceParallelError that are also ValueError / TypeError, naming the argument.

torch.compile: traced, :meth:`SequenceParallel.attention` and :meth:`SequenceParallel.gather`
are one custom op each (``psa::sp_attention``, ``psa::sp_gather``; the SequenceParallel is a
constant handle of the graph), so ``torch.compile(fullgraph=True)`` needs no graph break for
them. Construct the SequenceParallel outside the compiled code (it creates process groups)
and give it a grid (without one, the ranks' lengths are gathered by a collective: eager).
"""

from __future__ import annotations

import datetime
import hashlib
import itertools
import math
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from . import _api
from ._api import DEFAULT_MODEL, ConfigLike
from ._config import Config, Method
from ._parallel import merge_attention, sequence_order

__all__ = ["SequenceParallel", "SequenceParallelError", "shard_bounds",
           "enable_sequence_parallel"]


def _gather_agreement(text: str, local_error: Optional[str], group: Any, size: int,
                     device: torch.device, timeout: float,
                     timed_out: Callable[[Optional[str]], Exception],
                     extra: int = 0) -> List[Tuple[int, int, int]]:
    """(digest of `text`, 1 if that rank had a local error else 0, its `extra` int: a local
    length) of every rank of `group` (`size` ranks), by one all_gather on `device` that waits
    `timeout` seconds at most; when it does not finish, raises timed_out(the backend's
    message, or None when the wait only returned False). The caller compares the digests and
    names what disagrees."""
    digest = int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "little")
    mine = torch.tensor([digest, 1 if local_error else 0, int(extra)], dtype=torch.int64,
                        device=device)
    rows = [torch.zeros_like(mine) for _ in range(size)]
    work = dist.all_gather(rows, mine, group=group, async_op=True)
    try:
        ok = work.wait(timeout=datetime.timedelta(seconds=timeout))
    except Exception as e:  # gloo raises on timeout; NCCL may too
        raise timed_out(str(e)) from None
    if ok is False:
        raise timed_out(None)
    return [(int(r[0]), int(r[1]), int(r[2])) for r in rows]


class SequenceParallelError(RuntimeError):
    """Bad sequence-parallel input (degrees, shapes, disagreement between ranks). A bad
    argument value raises SequenceParallelValueError / SequenceParallelTypeError, which are
    also ValueError / TypeError."""


class SequenceParallelValueError(SequenceParallelError, ValueError):
    """An argument of psa.distributed has a bad value (named in the message)."""


class SequenceParallelTypeError(SequenceParallelError, TypeError):
    """An argument of psa.distributed has a bad type (named in the message)."""


_INT64_MAX = 2**63 - 1
# A local error: (exception class, message); raised on the rank that found it, the other
# ranks raise SequenceParallelError naming that rank.
LocalError = Optional[Tuple[type, str]]
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _is_count(value: Any, low: int) -> bool:
    """An int (not a bool) in [low, 2^63)."""
    return (not isinstance(value, bool) and isinstance(value, int)
            and low <= value <= _INT64_MAX)


def _dim_error(x: torch.Tensor, dim: Any) -> Optional[str]:
    if isinstance(dim, bool) or not isinstance(dim, int) or not -x.dim() <= dim < x.dim():
        return ("dim = %r: x has %d dimensions (shape %r); expected an int in [%d, %d)"
                % (dim, x.dim(), tuple(x.shape), -x.dim(), x.dim()))
    return None


def _dim_of(x: torch.Tensor, dim: Any) -> int:
    """`dim` as an index of x's dimensions (negative dims count from the end)."""
    error = _dim_error(x, dim)
    if error:
        raise SequenceParallelValueError(error)
    return int(dim) % int(x.dim())


def _check_timeout(timeout: Any) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
            not math.isfinite(timeout) or not timeout > 0:
        raise SequenceParallelValueError("timeout = %r: expected a finite number of seconds "
                                         "> 0" % (timeout,))
    try:
        datetime.timedelta(seconds=timeout)
    except OverflowError:
        raise SequenceParallelValueError("timeout = %r: too long for a timedelta" % (timeout,)
                                         ) from None
    return float(timeout)


def shard_bounds(seq_len: int, ulysses_degree: int, ring_degree: int,
                 block_m: int) -> List[Tuple[int, int]]:
    """``[(start, end), ...]`` of every rank's tokens (rank = ring_index * ulysses_degree +
    ulysses_index) in the sequence order: ring shards of ceil(Mq / ring_degree) whole query
    blocks, each cut into ulysses_degree pieces of ceil(shard / ulysses_degree) tokens (the
    last pieces may be shorter, or empty for tiny sequences). Raises SequenceParallelError
    when a ring shard would be empty, SequenceParallelValueError (a ValueError) for an
    argument that is not an int in range."""
    for name, value, low in (("seq_len", seq_len, 0), ("ulysses_degree", ulysses_degree, 1),
                             ("ring_degree", ring_degree, 1), ("block_m", block_m, 1)):
        if not _is_count(value, low):
            raise SequenceParallelValueError("%s = %r: expected an int >= %d"
                                             % (name, value, low))
    U, R = ulysses_degree, ring_degree
    if R > 1:
        mq = -(-seq_len // block_m)
        shard = -(-mq // R) * block_m
        if (R - 1) * shard >= seq_len:
            raise SequenceParallelError(
                "ring_degree = %d: the sequence of %d tokens has %d query blocks of %d "
                "(block_size.m); %d ring shards of %d whole blocks leave the last one empty. "
                "Use a smaller ring_degree" % (R, seq_len, mq, block_m, R, shard // block_m))
    else:
        shard = seq_len
    piece = -(-shard // U)
    bounds = []
    for r in range(R):
        r0, r1 = r * shard, min((r + 1) * shard, seq_len)
        for u in range(U):
            a = min(r0 + u * piece, r1)
            b = min(r0 + (u + 1) * piece, r1)
            bounds.append((a, b))
    return bounds


_SUBGROUPS: Dict[Tuple[Any, ...], Tuple[List[Any], List[Any]]] = {}
# Every SequenceParallel by its handle (the custom ops of torch.compile look it up).
_HANDLE_LOCK = threading.Lock()
_NEXT_HANDLE = itertools.count(1)
_BY_HANDLE: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()


def _rank_list(group: Any) -> List[int]:
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise SequenceParallelTypeError(
            "group = %r: expected None (the world) or a torch.distributed ProcessGroup "
            "(dist.new_group(...))" % (group,))
    if group is None or group == dist.group.WORLD:
        return list(range(dist.get_world_size()))
    return list(dist.get_process_group_ranks(group))


class SequenceParallel:
    """One attention layout spread over the ranks of `group` (default: the world), with the
    output of the single-process :func:`psa.attention` on every rank's tokens.

    grid, text_length, text_first, model, preset, config: as psa.attention (the whole
        sequence: t*h*w + text_length tokens). Without a grid there is no rearrangement and
        no text handling.
    ulysses_degree, ring_degree: their product must be the group's size (default:
        ulysses_degree = size / ring_degree). The query heads and the K/V heads must be
        divisible by ulysses_degree.
    permute: True (default): sequences are sharded in the preset's order (use
        :meth:`shard` / :meth:`gather`). False: the caller's own order; allowed when
        ring_degree is 1 (each rank then sees the whole sequence of its heads and libpsa
        rearranges it itself).
    ring_impl: "auto" (default: "allgather" up to ring_degree 4, "p2p" beyond where it
        applies), "p2p" (types psa and dense: K/V shards passed round the ring, results
        merged by LSE; psa builds its level map against the all-gathered K first) or
        "allgather" (any method: K and V gathered once per forward, one forward of the
        rank's query shard; bit-exact with one process). The p2p ring holds less only from
        ring_degree 5 on (the module doc); on two H200s allgather was 11-22% faster.
    ulysses_chunks: with ring_degree 1, the heads of a rank's group are exchanged and
        computed in this many chunks (fewer where the query and K/V heads do not divide), so
        that the transfers can overlap libpsa's work (default 2); 1: one exchange each way.
        The result is the same. On two H200s (BENCHMARKS.md) 2 chunks were 2-5% faster than
        1 at Wan2.1-14B 720p and even at CogVideoX-5B; 4 chunks were no faster at Wan2.1-14B
        and 25% slower at CogVideoX-5B (libpsa's persistent attention kernel holds every
        SM, so NCCL's transfer kernels mostly wait for it).
    timeout: seconds the agreement check of a forward or gather waits for every rank (a
        finite number > 0).
    agree: "first" (default: the agreement runs on the first call of each input signature)
        or "always" (every call; see the module doc).
    Bad argument values raise SequenceParallelValueError / SequenceParallelTypeError (also
    ValueError / TypeError) naming the argument, before anything collective happens.
    Constructing it is collective (it creates the ulysses and ring subgroups): every rank
    of the world must construct its SequenceParallel in the same order.
    """

    def __init__(self, *, grid: Optional[Sequence[int]] = None, text_length: int = 0,
                 text_first: Optional[bool] = None, model: Optional[str] = None,
                 preset: Optional[str] = None, config: ConfigLike = None,
                 ulysses_degree: Optional[int] = None, ring_degree: int = 1,
                 group: Any = None, permute: bool = True, ring_impl: str = "auto",
                 ulysses_chunks: int = 2, timeout: float = 60.0,
                 agree: str = "first") -> None:
        if not dist.is_available() or not dist.is_initialized():
            raise SequenceParallelError(
                "psa.distributed: no default process group; call "
                "torch.distributed.init_process_group (e.g. under torchrun) on every rank "
                "before SequenceParallel")
        timeout = _check_timeout(timeout)
        if not isinstance(agree, str) or agree not in ("first", "always"):
            raise SequenceParallelValueError("agree = %r: expected 'first' or 'always'"
                                             % (agree,))
        if not _is_count(text_length, 0):
            raise SequenceParallelValueError("text_length = %r: expected an int >= 0"
                                             % (text_length,))
        if text_first is not None and not isinstance(text_first, bool):
            raise SequenceParallelTypeError("text_first = %r: expected a bool or None"
                                            % (text_first,))
        if not isinstance(permute, bool):
            raise SequenceParallelTypeError("permute = %r: expected a bool" % (permute,))
        grid3: Optional[Tuple[int, int, int]] = None
        if grid is not None:
            try:
                grid3 = _api._grid_triple(grid)
            except ValueError as e:
                raise SequenceParallelValueError(str(e)) from None
        ranks = _rank_list(group)
        size = len(ranks)
        me = dist.get_rank()
        if me not in ranks:
            raise SequenceParallelError("rank %d is not in the group %r" % (me, ranks))
        for name, value in (("ring_degree", ring_degree), ("ulysses_degree", ulysses_degree),
                            ("ulysses_chunks", ulysses_chunks)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise SequenceParallelValueError("%s = %r: expected an int >= 1"
                                                 % (name, value))
        if ulysses_degree is None:
            if size % ring_degree:
                raise SequenceParallelError(
                    "ring_degree = %d does not divide the group size %d" % (ring_degree, size))
            ulysses_degree = size // ring_degree
        if ulysses_degree * ring_degree != size:
            raise SequenceParallelError(
                "ulysses_degree x ring_degree = %d x %d = %d, but the group has %d ranks"
                % (ulysses_degree, ring_degree, ulysses_degree * ring_degree, size))
        if not isinstance(ring_impl, str) or ring_impl not in ("auto", "allgather", "p2p"):
            raise SequenceParallelValueError("ring_impl = %r: expected 'auto', 'allgather' "
                                             "or 'p2p'" % (ring_impl,))
        if not permute and ring_degree > 1:
            raise SequenceParallelError(
                "permute = False with ring_degree = %d: ring shards must be cut in the "
                "preset's token order (permute = True)" % ring_degree)
        self.group = group
        self.ranks = ranks
        self.size = size
        self.index = ranks.index(me)
        self.ulysses_degree = U = ulysses_degree
        self.ring_degree = R = ring_degree
        self.ring_index, self.ulysses_index = divmod(self.index, U)
        self.permute = permute
        self.ring_impl = ring_impl
        self.ulysses_chunks = ulysses_chunks
        self.timeout = timeout
        self.agree = agree
        # Signatures this rank has agreed on (agree="first"), with every rank's `extra`.
        self._agreed: Dict[Tuple[Any, ...], List[int]] = {}
        # Subgroups: every rank creates every subgroup in the same order (new_group is
        # collective over the world); a later SequenceParallel of the same ranks and degrees
        # (e.g. one per video grid) reuses them, on every rank alike.
        groups_key = (tuple(ranks), U, R, id(dist.distributed_c10d._get_default_group()))
        cached = _SUBGROUPS.get(groups_key)
        if cached is None:
            ulysses_groups = []
            for r in range(R):
                members = [ranks[r * U + u] for u in range(U)]
                ulysses_groups.append(dist.new_group(members)
                                      if U > 1 and U < dist.get_world_size() else group)
            ring_groups = []
            for u in range(U):
                members = [ranks[r * U + u] for r in range(R)]
                ring_groups.append(dist.new_group(members)
                                   if R > 1 and R < dist.get_world_size() else group)
            cached = (ulysses_groups, ring_groups)
            _SUBGROUPS[groups_key] = cached
        self._ulysses_group = cached[0][self.ring_index]
        self._ring_group = cached[1][self.ulysses_index]
        self._ulysses_ranks = [ranks[self.ring_index * U + u] for u in range(U)]
        self._ring_ranks = [ranks[r * U + self.ulysses_index] for r in range(R)]

        # The config, the grid and the order the shards use.
        self.config = _api._resolve_config(model, preset, config)
        self.grid: Optional[Tuple[int, int, int]] = None
        self.text_length = text_length
        if grid3 is not None:
            t, h, w = grid3
            self.grid = grid3
            self.seq_len: Optional[int] = t * h * w + self.text_length
            _api._check_grid(grid, self.text_length, self.seq_len)
            if text_first is None:
                name = model if model is not None else ("" if isinstance(config, Config)
                                                        else DEFAULT_MODEL)
                text_first = name.lower().startswith("cogvideo")
            self.text_first = bool(text_first)
        else:
            if text_length:
                raise SequenceParallelError("text_length = %d needs grid=(t, h, w)"
                                            % text_length)
            self.seq_len = None
            self.text_first = False
            self.config["use_rearrange"] = False
        self.order: Optional[torch.Tensor] = None
        self._inner = self.config.copy()
        position = "none"
        if self.grid is not None:
            position = "first" if self.text_first and self.text_length else (
                "last" if self.text_length else "none")
            if permute:
                order, begin, end = sequence_order(self.grid, text_length=self.text_length,
                                                   text_first=self.text_first,
                                                   config=self.config)
                self.order = torch.from_numpy(order)
                if self.text_length:
                    position = "first" if begin == 0 else "last"
                self._inner["use_rearrange"] = False
        self._position = position
        method = int(self.config["type"])
        if R > 1:
            if bool(self.config["causal"]):
                raise SequenceParallelError(
                    "causal = true with ring_degree = %d: causal sequence sharding is not "
                    "supported (use ulysses_degree only)" % R)
            if bool(self.config["text_rows_dense"]) and self.text_length:
                raise SequenceParallelError(
                    "text_rows_dense = true with ring_degree = %d: not supported (use "
                    "ulysses_degree only)" % R)
            if method == int(Method.RF_V2):
                raise SequenceParallelError(
                    "type = rf_v2 with ring_degree = %d: rf_v2 orders tokens itself; use "
                    "ulysses_degree only" % R)
            p2p_ok = method == int(Method.DENSE) or (
                method == int(Method.PSA) and
                int(self.config["block_size.m"]) % int(self.config["block_size.n"]) == 0)
            if ring_impl == "p2p" and not p2p_ok:
                raise SequenceParallelError(
                    "ring_impl = 'p2p' needs type psa with block_size.m a multiple of "
                    "block_size.n (key shards start at key block boundaries), or type dense; "
                    "use ring_impl = 'allgather'")
            if ring_impl == "auto":  # p2p holds less only from 5 ranks on (class doc)
                self.ring_impl = "p2p" if p2p_ok and R > 4 else "allgather"
        self.block_m = int(self.config["block_size.m"])
        self._ring_contexts: Dict[Any, Any] = {}
        self.last_levels: Any = None
        self.last_chunks = 1  # head chunks of the last Ulysses forward without a ring
        self._fingerprint = self._inner.fingerprint()
        # The handle torch.compile's graphs name it by (psa/_distributed_ops.py): given here,
        # eagerly, so that a traced graph only reads an int attribute.
        with _HANDLE_LOCK:
            self._psa_op_handle = next(_NEXT_HANDLE)
            _BY_HANDLE[self._psa_op_handle] = self

    # ---- sequence layout -------------------------------------------------------------------
    def bounds(self, seq_len: Optional[int] = None) -> List[Tuple[int, int]]:
        """Every rank's [start, end) in the (permuted) sequence."""
        n = seq_len if seq_len is not None else self.seq_len
        if n is None:
            raise SequenceParallelError("seq_len: needed when no grid was given")
        return shard_bounds(n, self.ulysses_degree, self.ring_degree, self.block_m)

    def shard(self, x: torch.Tensor, dim: int = 1) -> torch.Tensor:
        """This rank's tokens of a whole sequence `x` (sequence along `dim`): permuted into the
        preset's order (permute=True), then cut (:meth:`bounds`)."""
        if not isinstance(x, torch.Tensor):
            raise SequenceParallelTypeError("x: %s is not a torch.Tensor" % type(x).__name__)
        dim = _dim_of(x, dim)
        n = x.shape[dim]
        if self.seq_len is not None and n != self.seq_len:
            raise SequenceParallelError("x: %d tokens along dim %d; the grid has %d"
                                        % (n, dim, self.seq_len))
        if self.order is not None:
            x = x.index_select(dim, self.order.to(x.device))
        a, b = self.bounds(n)[self.index]
        return x.narrow(dim, a, b - a).contiguous()

    def gather(self, x: torch.Tensor, dim: int = 1) -> torch.Tensor:
        """The whole sequence from every rank's piece `x` (all_gather), in the caller's order
        (the inverse of :meth:`shard`). Collective: the ranks first agree that every piece
        has its rank's length along `dim` and the same other dimensions, dtype and device
        type (else SequenceParallelError on every rank)."""
        if torch.compiler.is_compiling():  # one custom op node (psa::sp_gather)
            from . import _distributed_ops

            dim = _dim_of(x, dim)
            lengths = ([b - a for a, b in self.bounds()] if self.seq_len is not None
                       else self._agree_gather(x, dim, None))
            full = _distributed_ops.gather_pieces(self, x, dim, lengths)
        else:
            if isinstance(x, torch.Tensor) and _dim_error(x, dim) is None:
                dim %= x.dim()  # else the agreement names the bad dim on every rank
            full = self._gather_checked(x, dim, None)
        if self.order is None:
            return full
        out = torch.empty_like(full)
        out.index_copy_(dim, self.order.to(full.device), full)
        return out

    def _gather_checked(self, x: Any, dim: Any, lengths: Optional[List[int]]) -> torch.Tensor:
        """The gather's collective part (eager, and the real implementation of psa::sp_gather
        with the lengths it was traced with): agreement, then the all_gather of the pieces."""
        lengths = self._agree_gather(x, dim, lengths)
        return _gather_pieces(x, dim, lengths, self.group)

    def _agree_gather(self, x: Any, dim: Any, lengths: Optional[List[int]]) -> List[int]:
        """Every rank's piece length along `dim` (from the grid, or from the agreement itself
        without one), after the ranks agreed on the pieces."""
        error: LocalError = None
        n = -1
        if not isinstance(x, torch.Tensor):
            error = (SequenceParallelTypeError, "x: %s is not a torch.Tensor"
                     % type(x).__name__)
            text: Tuple[Any, ...] = ("gather",)
        elif _dim_error(x, dim) is not None or dim < 0:
            error = (SequenceParallelValueError, _dim_error(x, dim) or "dim = %r" % (dim,))
            text = ("gather",)
        else:
            n = int(x.shape[dim])
            others = tuple(int(e) for i, e in enumerate(x.shape) if i != dim)
            text = ("gather", dim, x.dim(), others, str(x.dtype), x.device.type)
            if lengths is None and self.seq_len is not None:
                lengths = [b - a for a, b in self.bounds()]
            if lengths is not None and n != lengths[self.index]:
                error = (SequenceParallelError,
                         "x: %d tokens along dim %d; rank %d's piece of the %d-token sequence "
                         "holds %d (the pieces of SequenceParallel.shard, in order)"
                         % (n, dim, self.ranks[self.index], sum(lengths),
                            lengths[self.index]))
        device = x.device if isinstance(x, torch.Tensor) else torch.device("cpu")
        agreed = self._agree(text, error, n, device, "gather",
                             " (dim, ndim, the other dims, dtype, device type)")
        if lengths is None:
            lengths = agreed
            self._bounds_from_lengths(lengths)  # ring shards of whole query blocks
        return lengths

    # ---- agreement --------------------------------------------------------------------------
    def _check(self, key: Tuple[Any, ...], local_error: Optional[str]) -> None:
        """The agreement of one forward: `key` is what every rank must share, its last item
        this rank's device (where the collective runs; each rank of a multi-GPU group has its
        own device index, so it is not compared)."""
        error: LocalError = None if not local_error else (SequenceParallelError, local_error)
        self._agree(key[:-1], error, 0, key[-1], "forward")

    def _agree(self, key: Tuple[Any, ...], error: LocalError, extra: int, device: Any,
               what: str, names: str = "") -> List[int]:
        """One agreement (all_gather of a digest, an error flag and `extra`, with the
        timeout): raises on every rank when a rank had a local `error` (that rank: the
        error's class and message), when the ranks' keys differ, or when a rank does not
        arrive; else returns every rank's `extra`."""
        signature = (what, key, extra, str(device))
        if self.agree == "first":
            if error is None and signature in self._agreed:
                return self._agreed[signature]
            if error is not None and self._agreed:
                # The other ranks may skip this check (their signatures are agreed): entering
                # it would pair this all_gather with their transfers.
                raise error[0](error[1])
        text = repr((self._fingerprint, self.grid, self.text_length, self._position,
                     self.ulysses_degree, self.ring_degree, self.permute, self.ring_impl,
                     self.ulysses_chunks, key))

        def timed_out(detail: Optional[str]) -> Exception:
            if detail is None:
                return SequenceParallelError(
                    "psa.distributed: the agreement check timed out after %g s (group %r)"
                    % (self.timeout, self.ranks))
            return SequenceParallelError(
                "psa.distributed: the agreement check timed out after %g s: not every rank "
                "of the group %r reached this %s (%s)"
                % (self.timeout, self.ranks, what, detail))

        values = _gather_agreement(text, error[1] if error else None, self.group, self.size,
                                   self._device_for_comm(device), self.timeout, timed_out,
                                   extra)
        if error:
            raise error[0](error[1])
        failed = [self.ranks[i] for i, v in enumerate(values) if v[1]]
        if failed:
            raise SequenceParallelError("psa.distributed: rank(s) %s rejected their input "
                                        "(see their error)" % failed)
        differ = [self.ranks[i] for i, v in enumerate(values) if v[0] != values[0][0]]
        if differ:
            raise SequenceParallelError(
                "psa.distributed: ranks disagree on the config, grid, degrees or shapes: "
                "rank(s) %s differ from rank %d (here: grid %r + %d text tokens, "
                "ulysses %d x ring %d, %s%s = %r)"
                % (differ, self.ranks[0], self.grid, self.text_length,
                   self.ulysses_degree, self.ring_degree, what, names, key))
        extras = [v[2] for v in values]
        if self.agree == "first":
            if len(self._agreed) >= 64:  # shapes of one pipeline are few; never unbounded
                self._agreed.clear()
            self._agreed[signature] = extras
        return extras

    def _device_for_comm(self, device: Any) -> torch.device:
        backend = dist.get_backend(self.group)
        if str(backend).lower() == "nccl":
            return device if device.type == "cuda" else torch.device(
                "cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def _validate(self, q: Any, k: Any, v: Any, step: Any = None, head_offset: Any = 0,
                  batch_offset: Any = 0) -> LocalError:
        """What this rank alone can tell is wrong with its input ([B, L, H, D] tensors), as
        (exception class, message); checked before any collective."""
        for name, x in (("q", q), ("k", k), ("v", v)):
            if not isinstance(x, torch.Tensor):
                return (SequenceParallelTypeError, "%s: %s is not a torch.Tensor"
                        % (name, type(x).__name__))
        if step is not None and not _is_count(step, 0):
            return (SequenceParallelValueError,
                    "step = %r: expected None (sparse) or an int >= 0" % (step,))
        for name, value in (("head_offset", head_offset), ("batch_offset", batch_offset)):
            if not _is_count(value, 0):
                return (SequenceParallelValueError, "%s = %r: expected an int >= 0"
                        % (name, value))
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            return (SequenceParallelValueError,
                    "q, k, v: expected 4-D [B, L, H, D] tensors; got shapes %r, %r, %r"
                    % (tuple(q.shape), tuple(k.shape), tuple(v.shape)))
        for name, x in (("q", q), ("k", k), ("v", v)):
            if x.dtype not in _DTYPES:
                return (SequenceParallelTypeError, "%s: dtype %s is not supported: expected "
                        "torch.float32, torch.float16 or torch.bfloat16" % (name, x.dtype))
            if x.device.type not in ("cpu", "cuda"):
                return (SequenceParallelValueError, "%s: device %s is not supported: expected "
                        "cpu or cuda" % (name, x.device))
        for name, x in (("k", k), ("v", v)):
            if x.dtype != q.dtype:
                return (SequenceParallelTypeError, "%s has dtype %s but q has %s; q, k and v "
                        "must share one dtype" % (name, x.dtype, q.dtype))
            if x.device != q.device:
                return (SequenceParallelValueError, "%s is on %s but q is on %s; q, k and v "
                        "must be on one device" % (name, x.device, q.device))
        if k.shape != v.shape:
            return (SequenceParallelError, "k %r and v %r: shapes differ"
                    % (tuple(k.shape), tuple(v.shape)))
        B, n, H, D = q.shape
        Hkv = k.shape[2]
        if k.shape[0] != B or k.shape[3] != D:
            return (SequenceParallelError, "k %r: batch and head_dim must be q's %r"
                    % (tuple(k.shape), tuple(q.shape)))
        U = self.ulysses_degree
        if H % U:
            return (SequenceParallelError, "heads: q has %d heads, not divisible by "
                    "ulysses_degree = %d" % (H, U))
        if Hkv % U:
            return (SequenceParallelError, "heads: k/v have %d heads (GQA), not divisible by "
                    "ulysses_degree = %d" % (Hkv, U))
        if Hkv < 1 or H % Hkv:
            return (SequenceParallelError, "heads: k/v have %d heads, which does not divide "
                    "q's %d (GQA)" % (Hkv, H))
        if self.seq_len is not None:
            a, b = self.bounds()[self.index]
            if n != b - a or k.shape[1] != b - a:
                return (SequenceParallelError,
                        "q/k: %d/%d local tokens; rank %d's shard of the %d-token sequence "
                        "holds %d (shard with SequenceParallel.shard)"
                        % (n, k.shape[1], self.ranks[self.index], self.seq_len, b - a))
        elif k.shape[1] != n:
            return (SequenceParallelError, "q/k: %d/%d local tokens; they must be the same "
                    "tokens" % (n, k.shape[1]))
        return None

    # ---- the forward ------------------------------------------------------------------------
    def attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                  layout: str = "blhd", step: Optional[int] = None,
                  head_offset: int = 0, batch_offset: int = 0) -> torch.Tensor:
        """This rank's rows of the whole forward: q, k, v are this rank's tokens (as
        :meth:`shard` gives them) with every head, [B, L_local, H, D] ("blhd") or
        [B, H, L_local, D] ("bhld"); returns the output in the same layout. step: as
        psa.attention. head_offset / batch_offset: where these heads / batch items sit in a
        larger tensor (CFG parallelism: the uncond rank passes its batch offset).
        Collective: the ranks first agree on their inputs (the module doc), so a bad input
        on any rank raises on every rank before anything is transferred."""
        if not isinstance(layout, str) or layout not in ("blhd", "bhld"):
            raise SequenceParallelValueError("layout = %r: expected 'blhd' or 'bhld'"
                                             % (layout,))
        if torch.compiler.is_compiling():  # one custom op node (psa::sp_attention)
            from . import _distributed_ops

            return _distributed_ops.attention(self, q, k, v, layout, step, head_offset,
                                              batch_offset)
        qv, kv, vv = ((x.transpose(1, 2) if isinstance(x, torch.Tensor) and x.dim() == 4 and
                       layout == "bhld" else x) for x in (q, k, v))
        error = self._validate(qv, kv, vv, step=step, head_offset=head_offset,
                               batch_offset=batch_offset)
        if error is None and layout == "bhld":
            q, k, v = (x.transpose(1, 2) for x in (q, k, v))
        # What every rank must agree on: the global shapes (local lengths may differ), the
        # dtypes and device types of q, k and v, and the arguments.
        if error is None:
            common: Tuple[Any, ...] = (
                q.shape[0], q.shape[2], q.shape[3], k.shape[0], k.shape[2],
                k.shape[3], v.shape[0], v.shape[2], v.shape[3],
                tuple(str(x.dtype) for x in (q, k, v)),
                tuple(x.device.type for x in (q, k, v)), step, (head_offset, batch_offset))
            device = q.device
        else:
            common = ("rejected",)
            device = q.device if isinstance(q, torch.Tensor) else torch.device("cpu")
        lengths = self._agree(common, error, q.shape[1] if error is None else -1, device,
                              "forward", " (q's B, H, D, k's B, H, D, v's B, H, D, "
                              "dtypes, device types, step, (head_offset, batch_offset))")
        bounds = self.bounds() if self.seq_len is not None else \
            self._bounds_from_lengths(lengths)
        out = self._forward(q, k, v, step, head_offset, batch_offset, bounds)
        return out.transpose(1, 2) if layout == "bhld" else out

    def _forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 step: Optional[int], head_offset: int, batch_offset: int,
                 bounds: List[Tuple[int, int]]) -> torch.Tensor:
        U, R = self.ulysses_degree, self.ring_degree
        H = q.shape[2]
        r0 = self.ring_index * U
        piece_lengths = [b - a for a, b in bounds[r0:r0 + U]]
        h0 = head_offset + self.ulysses_index * (H // U)
        cfg = self._inner.copy()
        if h0:
            cfg["head_offset"] = h0
        if batch_offset:
            cfg["batch_offset"] = batch_offset
        if U > 1 and R == 1:
            return self._ulysses(q, k, v, cfg, step, piece_lengths, h0)
        # 1. Ulysses: sequence pieces -> head groups (the ring shard of H/U heads).
        if U > 1:
            q, k, v = _seq_to_heads_all((q, k, v), piece_lengths, U, self._ulysses_group)
        # 2. Ring: the queries of this ring shard against every key block.
        if R > 1:
            ring_lengths = [sum(b - a for a, b in bounds[r * U:(r + 1) * U]) for r in range(R)]
            if self.ring_impl == "p2p":
                out = self._ring_p2p(q, k, v, cfg, ring_lengths, step)
            else:
                k = _gather_pieces(k, 1, ring_lengths, self._ring_group)
                v = _gather_pieces(v, 1, ring_lengths, self._ring_group)
                out = self._local(q, k, v, cfg, step)
        else:
            out = self._local(q, k, v, cfg, step)
        # 3. Ulysses back: head groups -> sequence pieces.
        if U > 1:
            out = _heads_to_seq(out, piece_lengths, U, self._ulysses_group)
        return out

    def _ulysses(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cfg: Config,
                 step: Optional[int], lengths: List[int], h0: int) -> torch.Tensor:
        """Ulysses without a ring, in C head chunks (ulysses_chunks, as far as the query and
        K/V heads of a group divide): every chunk's q, k, v exchanges are started at once;
        chunk c is computed as soon as its exchanges arrive, while the later chunks' are
        still on the wire, and its output leaves while chunk c + 1 is computed. libpsa reads
        the received pieces in place and writes into the buffer that is sent back; each
        chunk runs with its heads' head_offset, so every head is computed as by one process.
        """
        U, g = self.ulysses_degree, self._ulysses_group
        B, _, H, D = q.shape
        C = self.last_chunks = _head_chunks(self.ulysses_chunks, H // U, k.shape[2] // U)
        cap = max(lengths)
        sends = [_send_buffer(x, cap, U, C) for x in (q, k, v)]
        recvs = [torch.empty_like(x) for x in sends]
        arrivals = [[dist.all_to_all_single(r[c], x[c], group=g, async_op=True)
                     for r, x in zip(recvs, sends)] for c in range(C)]
        h = H // (U * C)
        out_send = q.new_empty(C, U, cap, B, h, v.shape[3])
        out_recv = torch.empty_like(out_send)
        departures = []
        for c in range(C):
            for work in arrivals[c]:
                work.wait()
            qc, kc, vc = (_pieces_as_sequence(r[c], lengths) for r in recvs)
            if c:
                cfg = cfg.copy()
                cfg["head_offset"] = h0 + c * h
            view = _sequence_view(out_send[c], lengths)
            out = self._local(qc, kc, vc, cfg, step, out=view)
            if view is None:
                _into_pieces(out, out_send[c], lengths)
            departures.append(dist.all_to_all_single(out_recv[c], out_send[c], group=g,
                                                     async_op=True))
        for work in departures:
            work.wait()
        n = lengths[self.ulysses_index]
        # [chunk, source rank, position, B, h, D] -> [B, position, H = (rank, chunk, h), D]
        return out_recv[:, :, :n].permute(3, 2, 1, 0, 4, 5).reshape(B, n, H, v.shape[3])

    def _local(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cfg: Config,
               step: Optional[int], return_lse: bool = False,
               out: Optional[torch.Tensor] = None) -> Any:
        full_grid = None
        if self.grid is not None and (k.shape[1] == self.seq_len):
            positions = {"none": 0, "first": 1, "last": 2}
            full_grid = (self.grid[0], self.grid[1], self.grid[2], self.text_length,
                         positions[self._position])
        if full_grid is None:
            cfg = cfg.copy()
            cfg["use_rearrange"] = False
        fingerprint = cfg.fingerprint()
        return _api._run(("attention", fingerprint, full_grid), lambda: cfg, q, k, v, "blhd",
                         out, return_lse, None, step, full_grid)

    def _ring_p2p(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cfg: Config,
                  lengths: List[int], step: Optional[int]) -> torch.Tensor:
        R, me = self.ring_degree, self.ring_index
        ctx = levels = None
        if int(cfg["type"]) == int(Method.PSA):
            # The level map of this query shard against every key block: K only is gathered
            # (the map never needs V), and dropped once the map is built.
            ctx = self._ring_context(cfg, q)
            k_full = _gather_pieces(k, 1, lengths, self._ring_group)
            ctx.set_step(step if step is not None else int(cfg["warmup_steps"]))
            levels = ctx.compute_level_map(q, k_full, layout="blhd")
            del k_full
            self.last_levels = levels
            block_n = int(cfg["block_size.n"])
        cap = max(lengths)
        kv = torch.stack([_pad_seq(k, cap), _pad_seq(v, cap)])
        outs, lses = [], []
        for s in range(R):
            src = (me - s) % R
            n = lengths[src]
            incoming = None
            if s + 1 < R:
                incoming, reqs = self._pass_kv(kv)
            if n and ctx is not None:
                begin = sum(lengths[:src]) // block_n
                o, lse = ctx.shard_attention(q, kv[0, :, :n], kv[1, :, :n], levels, begin,
                                             layout="blhd")
                outs.append(o)
                lses.append(lse)
            elif n:
                o, lse = self._local(q, kv[0, :, :n], kv[1, :, :n], cfg, step, True)
                outs.append(o)
                lses.append(lse)
            if incoming is not None:
                for req in reqs:
                    req.wait()
                kv = incoming
        # lse is [B, H, L] (bhld order); out "blhd" -> merge in blhd layout.
        merged = merge_attention(outs, [x.contiguous() for x in lses], layout="blhd",
                                 return_lse=False)
        return merged

    def _pass_kv(self, kv: torch.Tensor) -> Tuple[torch.Tensor, List[Any]]:
        """Starts sending `kv` to the next rank of the ring and receiving the previous rank's
        into a buffer of the same shape; returns (that buffer, the requests to wait for)."""
        R, me = self.ring_degree, self.ring_index
        incoming = torch.empty_like(kv)
        ops = [dist.P2POp(dist.isend, kv, self._ring_ranks[(me + 1) % R], self._ring_group),
               dist.P2POp(dist.irecv, incoming, self._ring_ranks[(me - 1) % R],
                          self._ring_group)]
        return incoming, dist.batch_isend_irecv(ops)

    def _ring_context(self, cfg: Config, q: torch.Tensor) -> Any:
        """The context of this rank's level maps and shard attentions (the whole grid, no
        rearrangement: the shards are in the computing order), one per config and device."""
        from ._context import Context

        device = q.device
        key = (cfg.fingerprint(), device.type, device.index)
        ctx = self._ring_contexts.get(key)
        if ctx is None:
            ctx = Context(cfg, backend="cuda" if device.type == "cuda" else "cpu",
                          device=device.index if device.index is not None else -1)
            if self.grid is not None:
                ctx.set_video_grid(self.grid[0], self.grid[1], self.grid[2],
                                   self.text_length, self._position)
            self._ring_contexts[key] = ctx
        return ctx

    def _bounds_from_lengths(self, lengths: List[int]) -> List[Tuple[int, int]]:
        """Every rank's [start, end) from the ranks' agreed local lengths (no grid). The same
        on every rank, so is a SequenceParallelError for ring shards that are not whole
        query blocks."""
        bounds, start = [], 0
        for m in lengths:
            bounds.append((start, start + m))
            start += m
        if self.ring_degree > 1:
            expected = shard_bounds(start, self.ulysses_degree, self.ring_degree, self.block_m)
            if bounds != expected:
                raise SequenceParallelError(
                    "ring_degree = %d: the ranks hold %r tokens; ring shards must be whole "
                    "query blocks, %r (shard with SequenceParallel.shard)"
                    % (self.ring_degree, lengths, [b - a for a, b in expected]))
        return bounds


# ---- collectives on uneven pieces ----------------------------------------------------------
def _pad_seq(x: torch.Tensor, cap: int, dim: int = 1) -> torch.Tensor:
    n = x.shape[dim]
    if n == cap:
        return x.contiguous()
    shape = list(x.shape)
    shape[dim] = cap - n
    return torch.cat([x, x.new_zeros(shape)], dim=dim).contiguous()


def _gather_pieces(x: torch.Tensor, dim: int, lengths: List[int], group: Any) -> torch.Tensor:
    """Concatenation along `dim` of every rank's piece (piece i has lengths[i] entries)."""
    if len(lengths) == 1:
        return x
    cap = max(lengths)
    padded = _pad_seq(x, cap, dim)
    parts = [torch.empty_like(padded) for _ in lengths]
    dist.all_gather(parts, padded, group=group)
    return torch.cat([p.narrow(dim, 0, n) for p, n in zip(parts, lengths)], dim=dim)


def _sequence_view(buf: torch.Tensor, lengths: List[int]) -> Optional[torch.Tensor]:
    """[U, cap, B, h, D] pieces of an exchange (piece i: its first lengths[i] positions) as a
    [B, sum(lengths), h, D] strided view, or None when they do not lie end to end (a piece
    before the last one is short: only for tiny sequences)."""
    U, cap, B, h, D = buf.shape
    if any(n != cap for n in lengths[:-1]):
        return None
    return buf.view(U * cap, B, h, D)[:sum(lengths)].permute(1, 0, 2, 3)


def _pieces_as_sequence(buf: torch.Tensor, lengths: List[int]) -> torch.Tensor:
    """The [B, sum(lengths), h, D] sequence of the pieces in `buf` ([U, cap, B, h, D]): a view
    (_sequence_view), else a copy."""
    view = _sequence_view(buf, lengths)
    if view is not None:
        return view
    return torch.cat([buf[i, :n] for i, n in enumerate(lengths)], dim=0).permute(1, 0, 2, 3)


def _head_chunks(wanted: int, heads: int, kv_heads: int) -> int:
    """The largest chunk count <= wanted that divides a rank's query heads and K/V heads."""
    for c in range(min(wanted, kv_heads), 0, -1):
        if heads % c == 0 and kv_heads % c == 0:
            return c
    return 1


def _send_buffer(x: torch.Tensor, cap: int, U: int, C: int) -> torch.Tensor:
    """A rank's sequence piece x ([B, n, H, D]) copied into the send buffer of a Ulysses
    exchange, [C, U, cap, B, H/(U C), D]: head chunk, destination rank (its head group),
    position, batch. What rank i receives from every rank, [U, cap, B, h, D] per chunk, is
    then the sequence piece after piece, readable in place (_sequence_view)."""
    B, n, H, D = x.shape
    h = H // (U * C)
    send = x.new_empty(C, U, cap, B, h, D)
    send[:, :, :n].copy_(x.unflatten(2, (U, C, h)).permute(3, 2, 1, 0, 4, 5))
    return send


def _seq_to_heads_all(xs: Sequence[torch.Tensor], lengths: List[int], U: int,
                      group: Any) -> List[torch.Tensor]:
    """[B, n_me, H, D] sequence pieces -> [B, sum(lengths), H/U, D] each (all_to_all): one
    copy into the send buffer, the result a strided view of the receive buffer. The exchanges
    run asynchronously one after the other (the next copy overlaps the previous transfer)."""
    pending = []
    for x in xs:
        send = _send_buffer(x, max(lengths), U, 1)[0]
        recv = torch.empty_like(send)
        pending.append((recv, dist.all_to_all_single(recv, send, group=group, async_op=True)))
    out = []
    for recv, work in pending:
        work.wait()
        out.append(_pieces_as_sequence(recv, lengths))
    return out


def _heads_buffer(like: torch.Tensor, lengths: List[int], U: int) -> torch.Tensor:
    """The send buffer [U, cap, B, h, D] of _heads_to_seq (an output computed into its
    _sequence_view is sent as it is); `like`: a [B, L, h, D] tensor."""
    B, _, h, D = like.shape
    return like.new_empty(U, max(lengths), B, h, D)


def _into_pieces(x: torch.Tensor, send: torch.Tensor, lengths: List[int]) -> None:
    """Copies the [B, sum(lengths), h, D] sequence x into the pieces of `send` ([U, cap, B, h,
    D])."""
    start = 0
    for i, n in enumerate(lengths):
        send[i, :n].copy_(x.narrow(1, start, n).transpose(0, 1))
        start += n


def _heads_to_seq(x: torch.Tensor, lengths: List[int], U: int, group: Any,
                  send: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Inverse of _seq_to_heads_all: [B, sum(lengths), H/U, D] -> [B, n_me, H, D]
    (all_to_all). send: the _heads_buffer that x is a view of (sent as it is), else x is
    copied into one."""
    B, _, Hu, D = x.shape
    if send is None:
        send = _heads_buffer(x, lengths, U)
        _into_pieces(x, send, lengths)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    n = lengths[dist.get_rank(group)]
    # [source rank, position, B, h, D] -> [B, position, source rank x h = H, D]: one copy.
    return recv[:, :n].permute(2, 1, 0, 3, 4).reshape(B, n, U * Hu, D)


# ---- diffusers -----------------------------------------------------------------------------
def enable_sequence_parallel(target: Any, ulysses_degree: Optional[int] = None,
                             ring_degree: int = 1, *, model: Optional[str] = None,
                             preset: Optional[str] = None, group: Any = None,
                             ring_impl: str = "auto", ulysses_chunks: int = 2,
                             timeout: float = 60.0,
                             step_source: str = "auto", **overrides: Any) -> None:
    """One call for a diffusers Wan or CogVideoX pipeline (or WanTransformer3DModel /
    CogVideoXTransformer3DModel): PSA self-attention
    (:func:`psa.diffusers.enable_psa` with `model`, `preset`, `step_source`, `overrides`)
    run sequence-parallel over `group` with ``ulysses_degree x ring_degree`` ranks.

    Every rank calls it (after ``init_process_group``), then runs the same pipeline with the
    same inputs (same seed); the transformer shards its tokens after the patch embedding
    (the RoPE tables and a per-token timestep alike, in the preset's token order; CogVideoX:
    the joint text + video sequence, each rank's text and video tokens), runs its
    blocks, output norm and projection on this rank's share, and gathers the tokens before
    unpatchify, so every rank returns the whole output: the single-process PSA output.
    ``psa.diffusers.disable_psa`` undoes it."""
    from . import diffusers as psa_diffusers

    psa_diffusers.enable_psa(target, model, preset, step_source=step_source,
                             parallel={"ulysses_degree": ulysses_degree,
                                       "ring_degree": ring_degree, "group": group,
                                       "ring_impl": ring_impl,
                                       "ulysses_chunks": ulysses_chunks, "timeout": timeout},
                             **overrides)
