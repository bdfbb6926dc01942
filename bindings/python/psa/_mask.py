# bindings/python/psa/_mask.py -- what a forward decided: the level map and token order of a
# context's last forward as NumPy arrays, and psa.plot_mask, which has libpsa draw the PNG
# (psa_context_write_mask_png / psa_mask_write_png): the same picture as `psa mask`.
"""Level maps, token orders and mask pictures."""

from __future__ import annotations

import os
from typing import Any, NamedTuple, Optional, Sequence, Union

from . import capi
from ._config import path_text

_VIEWS = {"blocks": int(capi.PSA_MASK_VIEW_BLOCKS), "video": int(capi.PSA_MASK_VIEW_VIDEO)}
_SEQUENCES = {"queries": 0, "keys": 1}


class TokenOrder(NamedTuple):
    """Which tokens the blocks of the last forward hold: position ``x`` of the rearranged
    sequence holds the caller's token ``order[x]`` (int64 NumPy array); block ``j`` holds
    positions ``[j * block, (j + 1) * block)``; text sits at ``[text_begin, text_end)``."""
    order: Any
    text_begin: int
    text_end: int


def level_map(handle: Any) -> Any:
    """The last forward's levels, int8 NumPy array ``[batch, heads, q_blocks, k_blocks]``
    with values 1, 2, 4, 8 (key block at full resolution or pooled) and 0 (skipped)."""
    import numpy as np

    shape = capi.psa_context_level_map_shape(handle)
    levels = np.empty(tuple(int(x) for x in shape), dtype=np.int8)
    capi.psa_context_get_level_map(handle, int(levels.ctypes.data), int(levels.nbytes))
    return levels


def token_order(handle: Any, sequence: str = "keys") -> TokenOrder:
    import numpy as np

    if not isinstance(sequence, str) or sequence not in _SEQUENCES:
        raise ValueError("sequence = %r: expected 'keys' or 'queries'" % (sequence,))
    which = _SEQUENCES[sequence]
    length, _, _ = capi.psa_context_get_token_order(handle, which, None, 0)
    order = np.empty((int(length),), dtype=np.int64)
    _, begin, end = capi.psa_context_get_token_order(handle, which, int(order.ctypes.data),
                                                     int(length))
    return TokenOrder(order, int(begin), int(end))


def plot_mask(source: Any, path: Union[str, "os.PathLike[str]"], view: str = "blocks",
              batch: int = 0, head: Optional[int] = None, query_block: Optional[int] = None,
              query_position: Optional[Sequence[int]] = None, cell: int = 0) -> str:
    """Writes a PNG picture of a level map and returns its path.

    `source` is a :class:`psa.Context` (its last forward; views ``"blocks"`` and
    ``"video"``) or a level map as an int8 NumPy array ``[heads, q_blocks, k_blocks]`` or
    ``[batch, heads, q_blocks, k_blocks]`` (blocks view only). `head`: one head, or None for
    all (blocks) / head 0 (video). `query_block` / `query_position` ``(t, h, w)``: the query
    block of the video view (default: the block of the grid's centre). `cell`: pixels per
    block or token, 0 = automatic. The picture is drawn by libpsa, as ``psa mask`` draws it.
    """
    if not isinstance(view, str) or view not in _VIEWS:
        raise ValueError("view = %r: expected 'blocks' or 'video'" % (view,))
    target = path_text("path", path)
    for name, value, low in (("batch", batch, 0), ("head", head, -1),
                             ("query_block", query_block, -1), ("cell", cell, 0)):
        if value is None and name in ("head", "query_block"):
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("%s = %r: expected an int" % (name, value))
        if not low <= value <= (64 if name == "cell" else 2**63 - 1):
            raise ValueError("%s = %r: out of range" % (name, value))
    if query_position is not None:
        position = list(query_position)
        if len(position) != 3 or any(isinstance(x, bool) or not isinstance(x, int) or
                                     not 0 <= x <= 2**63 - 1 for x in position):
            raise ValueError("query_position = %r: expected three ints (t, h, w) >= 0"
                             % (query_position,))
    if view != "video":
        for arg, given in (("query_block", query_block), ("query_position", query_position)):
            if given is not None:
                raise ValueError("%s = %r: only the video view has a query block; pass "
                                 "view='video' with a psa.Context, or leave it None"
                                 % (arg, given))
    handle = getattr(source, "handle", None)
    if handle is not None:
        h = head if head is not None else (0 if view == "video" else -1)
        try:
            capi.psa_context_write_mask_png(handle, target, _VIEWS[view], batch, h,
                                            -1 if query_block is None else query_block,
                                            None if query_position is None
                                            else list(query_position), cell)
        except TypeError:  # SWIG: the handle is not a native psa_context
            raise TypeError("source: a %s whose .handle (%s) is not a libpsa context; expected "
                            "a psa.Context or a level map array" % (type(source).__name__,
                                                                    type(handle).__name__)
                            ) from None
        return target
    import numpy as np

    if view != "blocks":
        raise ValueError("view = 'video' needs a psa.Context (the token order and video grid)")
    levels = _level_array(source)
    if levels.ndim == 4:
        if batch >= levels.shape[0]:
            raise ValueError("batch = %d: the level map has %d batch items"
                             % (batch, levels.shape[0]))
        levels = levels[batch]
    levels = np.ascontiguousarray(levels, dtype=np.int8)
    heads, mq, nk = (int(x) for x in levels.shape)
    capi.psa_mask_write_png(target, int(levels.ctypes.data), heads, mq, nk,
                            -1 if head is None else head, cell)
    return target


_LEVEL_VALUES = (0, 1, 2, 4, 8)


def _level_array(source: Any) -> Any:
    """`source` as a NumPy level map [heads, q_blocks, k_blocks] or [batch, heads, q_blocks,
    k_blocks] of integers 0, 1, 2, 4, 8 (integral floats accepted): TypeError for another
    dtype, ValueError naming the first other value and its index."""
    import numpy as np

    try:
        levels = np.asarray(source)
    except Exception as e:  # noqa: BLE001 -- any object NumPy cannot take
        raise TypeError("source: a %s is neither a psa.Context nor a level map array (%s)"
                        % (type(source).__name__, e)) from None
    if levels.ndim not in (3, 4):
        raise ValueError("levels: expected [heads, q_blocks, k_blocks] or [batch, heads, "
                         "q_blocks, k_blocks], got shape %r (source: a %s; expected a "
                         "psa.Context or a level map array)"
                         % (levels.shape, type(source).__name__))
    if levels.dtype.kind not in "iuf":
        raise TypeError("levels: dtype %s; expected integers 0 (skipped), 1, 2, 4 or 8"
                        % (levels.dtype,))
    bad = ~np.isin(levels, _LEVEL_VALUES)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError("levels: value %r at index %r; expected 0 (skipped), 1, 2, 4 or 8"
                         % (levels[index].item(), index))
    return levels
