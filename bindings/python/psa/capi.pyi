# bindings/python/psa/capi.pyi -- type stub of the SWIG-generated module psa.capi: its
# names mirror include/psa.h one to one and are untyped; the package's typed layer
# (psa.Config, psa.Context, psa.attention, ...) converts every value it reads from here.
from typing import Any

def __getattr__(name: str) -> Any: ...
