# bindings/python/psa/__init__.py -- the Python package of libpsa: psa.Config, psa.Context,
# psa.Error over the SWIG module psa.capi (generated from bindings/psa.i). The version below
# must equal PSA_VERSION_* in include/psa.h (checked by the packaging.versions test).
"""Pyramid Sparse Attention for video diffusion transformers (libpsa bindings).

    import numpy as np, psa

    cfg = psa.Config.load("Wan2.1_1.3b", "psa_balanced")
    with psa.Context(cfg, backend="cpu") as ctx:
        ctx.set_video_grid(4, 16, 16)
        out = ctx.forward(q, k, v)          # [B, H, L, D] arrays
        print(ctx.stats().density)

Every failing library call raises psa.Error, carrying .status and the library's .message.
"""

__version__ = "0.1.0"

from ._errors import Error  # noqa: E402  (before capi: the error hook imports it)
from . import capi  # noqa: E402
from ._config import (Backend, Config, DType, Layout, Method, Param, Status,  # noqa: E402
                      TextPosition, param_info)
from ._context import Context, Stats  # noqa: E402


def library_version():
    """Version string of the loaded libpsa ("MAJOR.MINOR.PATCH")."""
    return capi.psa_version_string()


def header_version():
    """Version of the psa.h the extension was built from."""
    return capi.PSA_VERSION_STRING


def presets(path=None, yaml=None):
    """{model: [preset, ...]} of the embedded attention_config.yaml (or `path` / `yaml`)."""
    return Config.presets(path=path, yaml=yaml)


__all__ = ["Backend", "Config", "Context", "DType", "Error", "Layout", "Method", "Param",
           "Stats", "Status", "TextPosition", "capi", "header_version", "library_version",
           "param_info", "presets"]
