# bindings/python/psa/__init__.py -- the Python package of libpsa (distribution `libpsa`,
# import `psa`): the one-call API (psa.attention, psa.sparse_attention) and the context API
# (psa.Config, psa.Context) over the SWIG module psa.capi (generated from bindings/psa.i).
# The version below must equal PSA_VERSION_* in include/psa.h (packaging.versions test).
"""Pyramid Sparse Attention (arXiv 2512.04025) for video diffusion transformers.

One call, on NumPy arrays (CPU) or PyTorch / CuPy / DLPack tensors (CPU or CUDA)::

    import psa
    out = psa.attention(q, k, v, model="Wan2.1_1.3b", grid=(21, 30, 52))   # [B, H, L, D]
    out = psa.sparse_attention(q, k, v, sparse_type="rf_v2", sparsity=0.5,
                               latent_shape_q=(21, 30, 52))                # vendor call

The context API gives full control (warm-up steps, statistics, your own workspace)::

    cfg = psa.Config.load("Wan2.1_1.3b", "psa_balanced")
    with psa.Context(cfg, backend="cpu") as ctx:
        ctx.set_video_grid(4, 16, 16)
        out = ctx.forward(q, k, v)
        print(ctx.stats().density)

Every failing library call raises psa.Error, carrying .status and the library's .message;
bad Python arguments raise TypeError / ValueError naming the argument.
"""

__version__ = "0.1.0"

from ._errors import Error  # noqa: E402  (before capi: the error hook imports it)
from . import capi  # noqa: E402
from ._config import (Backend, Config, DType, Layout, MaskFormat, MaskMode,  # noqa: E402
                      Method, Param, Precision, Rearrange, Status, TextPosition, TextRule,
                      param_info)
from ._context import Context, Stats  # noqa: E402
from ._mask import TokenOrder, plot_mask  # noqa: E402
from ._api import (DEFAULT_MODEL, attention, cache_info, clear_cache,  # noqa: E402
                   set_cache_capacity, sparse_attention)
from ._parallel import merge_attention, sequence_order  # noqa: E402

from typing import Dict as _Dict, List as _List, Optional as _Optional  # noqa: E402


def library_version() -> str:
    """Version string of the loaded libpsa ("MAJOR.MINOR.PATCH")."""
    return str(capi.psa_version_string())


def header_version() -> str:
    """Version of the psa.h the extension was built from."""
    return str(capi.PSA_VERSION_STRING)


def presets(path: _Optional[str] = None,
            yaml: _Optional[str] = None) -> _Dict[str, _List[str]]:
    """``{model: [preset, ...]}`` of the embedded attention_config.yaml (or `path` / `yaml`)."""
    return Config.presets(path=path, yaml=yaml)


def cuda_available() -> bool:
    """True when libpsa was built with its CUDA backend and a CUDA device is usable."""
    try:
        Context(Config(), backend="cuda").close()
    except Error:
        return False
    return True


__all__ = ["Backend", "Config", "Context", "DEFAULT_MODEL", "DType", "Error", "Layout",
           "MaskFormat", "MaskMode", "Method", "Param", "Precision", "Rearrange", "Stats", "Status",
           "TextPosition", "TextRule", "TokenOrder", "attention", "cache_info", "capi",
           "clear_cache", "cuda_available", "header_version", "library_version",
           "merge_attention", "param_info", "plot_mask", "presets", "sequence_order",
           "set_cache_capacity", "sparse_attention"]
