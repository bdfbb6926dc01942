# bindings/python/psa/_tensors.py -- turns array objects (NumPy, PyTorch, anything exporting
# DLPack or __cuda_array_interface__) into a psa_tensor_desc plus a data address. Reads
# shapes, strides, dtype and device from the object itself; never copies and never imports
# a framework that the caller did not already use.
"""Tensor adapters: object -> (psa_tensor_desc, address, device)."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Optional, Sequence, Tuple

from . import capi
from ._errors import Error

# DLPack device types (dlpack.h DLDeviceType).
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
# DLPack type codes.
_DL_FLOAT, _DL_BFLOAT = 2, 4

F32, F16, BF16 = int(capi.PSA_DTYPE_F32), int(capi.PSA_DTYPE_F16), int(capi.PSA_DTYPE_BF16)
_DLPACK_DTYPES = {(_DL_FLOAT, 32): F32, (_DL_FLOAT, 16): F16, (_DL_BFLOAT, 16): BF16}
# Array-interface typestrs (native little-endian or "not applicable" byte order).
_TYPESTR_DTYPES = {"f4": F32, "f2": F16}
_TORCH_DTYPES = {"torch.float32": F32, "torch.float16": F16, "torch.bfloat16": BF16}
_DTYPE_NAMES = {F32: "float32", F16: "float16", BF16: "bfloat16"}
_ITEMSIZE = {F32: 4, F16: 2, BF16: 2}

# Logical order inside libpsa is [B, H, L, D]; `layout` names the caller's dimension order.
LAYOUT_AXES: Dict[str, Tuple[int, int, int, int]] = {
    "bhld": (0, 1, 2, 3), "bnsd": (0, 1, 2, 3), "blhd": (0, 2, 1, 3), "bsnd": (0, 2, 1, 3)}

Shape = Tuple[int, ...]


class Tensor:
    """One described tensor.

    desc: capi.psa_tensor_desc ([B, H, L, D] order); address: int; device: "cpu" or
    "cuda"; device_id: CUDA ordinal (-1 when unknown, 0 on the CPU); shape/strides: in the
    caller's order; dtype: psa dtype int; writable: False for read-only NumPy arrays;
    framework: "numpy", "torch", "cupy" or "other"; keep: objects that must stay alive while
    libpsa uses the memory (the DLPack capsule).
    """

    __slots__ = ("desc", "address", "device", "device_id", "shape", "strides", "dtype",
                 "writable", "framework", "keep")

    def __init__(self, desc: Any, address: int, device: str, device_id: int, shape: Shape,
                 strides: Shape, dtype: int, writable: bool, framework: str,
                 keep: Tuple[Any, ...]) -> None:
        self.desc, self.address, self.device, self.device_id = desc, address, device, device_id
        self.shape, self.strides, self.dtype = shape, strides, dtype
        self.writable, self.framework, self.keep = writable, framework, keep


def framework_of(obj: object) -> str:
    """"numpy", "torch", "cupy", "jax" or "other", from the object's type's module."""
    module = type(obj).__module__.split(".")[0]
    if module in ("numpy", "torch", "cupy"):
        return module
    if module in ("jax", "jaxlib"):
        return "jax"
    return "other"


def is_cuda_device(device_type: int) -> bool:
    """True for DLPack's CUDA and CUDA-managed device types."""
    return device_type in (DL_CUDA, DL_CUDA_MANAGED)


def dlpack_stream_arg(stream: Optional[int]) -> int:
    """DLPack's stream argument for the CUDA stream libpsa will run on: 1 means the legacy
    default stream (0 is not allowed by the protocol)."""
    return 1 if not stream else int(stream)


def contiguous_strides(shape: Sequence[int]) -> Shape:
    """Row-major strides, in elements, of `shape`."""
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.append(acc)
        acc *= max(int(extent), 1)
    return tuple(reversed(strides))


def dtype_name(dtype: int) -> str:
    """"float32", "float16" or "bfloat16" for a psa dtype."""
    return _DTYPE_NAMES.get(dtype, str(dtype))


def _from_array_interface(name: str, iface: Dict[str, Any]) -> Tuple[int, Shape, Shape, int]:
    typestr = str(iface["typestr"])
    if typestr[0] not in "<|=" or typestr[1:] not in _TYPESTR_DTYPES:
        raise TypeError("%s: dtype %r is not supported: expected float32 or float16 (bfloat16 "
                        "through PyTorch or DLPack)" % (name, typestr))
    dtype = _TYPESTR_DTYPES[typestr[1:]]
    itemsize = _ITEMSIZE[dtype]
    shape = tuple(int(x) for x in iface["shape"])
    if iface.get("strides") is None:
        strides = contiguous_strides(shape)
    else:
        byte_strides = tuple(int(x) for x in iface["strides"])
        if any(s % itemsize for s in byte_strides):
            raise ValueError("%s: strides %r bytes are not multiples of the element size %d"
                             % (name, byte_strides, itemsize))
        strides = tuple(s // itemsize for s in byte_strides)
    return dtype, shape, strides, int(iface["data"][0])


Read = Tuple[int, Shape, Shape, int, str, int, bool, str, Tuple[Any, ...]]


def check_torch_strided(obj: Any, name: str) -> None:
    """TypeError naming `name` for a torch tensor without plain strided storage (nested,
    sparse or other layouts): libpsa reads elements at base + strides."""
    if getattr(obj, "is_nested", False):
        raise TypeError("%s: a nested tensor is not supported: expected a dense (strided) "
                        "torch.Tensor" % (name,))
    torch = sys.modules.get("torch")
    if torch is not None and obj.layout != torch.strided:
        raise TypeError("%s: layout %s is not supported: expected torch.strided (a dense "
                        "tensor)" % (name, obj.layout))


def read(obj: Any, name: str, stream: Optional[int] = None) -> Read:
    """``(dtype, shape, strides in elements, address, device, device_id, writable,
    framework, keep)`` of an array object. TypeError when it is not one, or its dtype is not
    float32/float16/bfloat16."""
    framework = framework_of(obj)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        # NumPy through its array interface: no capsule, works for every NumPy version.
        dtype, shape, strides, address = _from_array_interface(name, obj.__array_interface__)
        return (dtype, shape, strides, address, "cpu", 0, bool(obj.flags.writeable), "numpy",
                (obj,))
    if framework == "torch" and hasattr(obj, "data_ptr"):
        # PyTorch directly: cheaper than a DLPack capsule per call, and bfloat16 works.
        check_torch_strided(obj, name)
        torch_dtype = _TORCH_DTYPES.get(str(obj.dtype))
        if torch_dtype is None:
            raise TypeError("%s: dtype %s is not supported: expected torch.float32, "
                            "torch.float16 or torch.bfloat16" % (name, obj.dtype))
        dev = obj.device
        if dev.type == "cuda":
            device, device_id = "cuda", int(dev.index if dev.index is not None else -1)
        elif dev.type == "cpu":
            device, device_id = "cpu", 0
        else:
            raise ValueError("%s: device %s is not supported: expected cpu or cuda"
                             % (name, dev))
        return (torch_dtype, tuple(int(x) for x in obj.shape),
                tuple(int(x) for x in obj.stride()),
                int(obj.data_ptr()), device, device_id, True, "torch", (obj,))
    if hasattr(obj, "__dlpack__"):
        device_type, device_id = (obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__")
                                  else (DL_CPU, 0))
        if is_cuda_device(device_type):
            capsule = obj.__dlpack__(stream=dlpack_stream_arg(stream))
        else:
            capsule = obj.__dlpack__()
        (address, device_type, device_id, code, bits, lanes, shape,
         strides) = capi.psa_py_dlpack_info(capsule)
        if lanes != 1 or (code, bits) not in _DLPACK_DTYPES:
            raise TypeError("%s: DLPack dtype (code %d, bits %d, lanes %d) is not supported: "
                            "expected float32, float16 or bfloat16" % (name, code, bits, lanes))
        if strides is None:
            strides = contiguous_strides(shape)
        if device_type in (DL_CPU, DL_CUDA_HOST):
            device = "cpu"
        elif is_cuda_device(device_type):
            device = "cuda"
        else:
            raise ValueError("%s: DLPack device type %d is not supported: expected CPU (1), "
                             "CUDA (2), CUDA host (3) or CUDA managed (13)" % (name, device_type))
        return (_DLPACK_DTYPES[(code, bits)], tuple(shape), tuple(strides), int(address), device,
                int(device_id), framework != "jax", framework, (obj, capsule))
    if hasattr(obj, "__cuda_array_interface__"):
        iface = obj.__cuda_array_interface__
        dtype, shape, strides, address = _from_array_interface(name, iface)
        # The interface carries no device id; libpsa checks the pointer's device itself.
        return (dtype, shape, strides, address, "cuda", -1, not iface["data"][1], framework,
                (obj,))
    if hasattr(obj, "__array_interface__"):
        iface = obj.__array_interface__
        dtype, shape, strides, address = _from_array_interface(name, iface)
        return (dtype, shape, strides, address, "cpu", 0, not iface["data"][1], framework,
                (obj,))
    raise TypeError("%s: %s is not an array: expected a NumPy array, a torch.Tensor, or an "
                    "object with __dlpack__ or __cuda_array_interface__"
                    % (name, type(obj).__name__))


def parse_layout(layout: str, name: str = "layout") -> Tuple[int, int, int, int]:
    """The axes that take the caller's `layout` order to [B, H, L, D]."""
    axes = LAYOUT_AXES.get(layout.lower()) if isinstance(layout, str) else None
    if axes is None:
        raise ValueError("%s = %r: expected 'bhld' (= 'bnsd', [B, H, L, D]) or 'blhd' "
                         "(= 'bsnd', [B, L, H, D])" % (name, layout))
    return axes


def describe(obj: Any, name: str, layout: str, stream: Optional[int] = None) -> Tensor:
    """Describes a 4-D attention tensor whose dimensions are in `layout` order."""
    axes = parse_layout(layout)
    dtype, shape, strides, address, device, device_id, writable, framework, keep = read(
        obj, name, stream)
    if len(shape) != 4:
        raise ValueError("%s: shape %r has %d dimensions; expected 4 in %s order"
                         % (name, shape, len(shape), layout.upper()))
    desc = capi.psa_tensor_desc()
    desc.dtype = dtype
    desc.set_shape(*(shape[a] for a in axes))
    desc.set_strides(*(strides[a] for a in axes))
    return Tensor(desc, address, device, device_id, shape, strides, dtype, writable, framework,
                  keep)


class Flat:
    """One described flat buffer (workspace, lse, levels).

    address: int; nbytes: its size; device: "cpu" or "cuda"; device_id: CUDA ordinal (-1
    when unknown, 0 on the CPU); shape: in the caller's order; dtype: a NumPy-style name
    ("float32", "int8", "uint8", "bfloat16", ...) or the array interface's typestr when it
    names no such type; keep: objects that must stay alive while libpsa uses the memory.
    """

    __slots__ = ("address", "nbytes", "device", "device_id", "shape", "dtype", "keep")

    def __init__(self, address: int, nbytes: int, device: str, device_id: int, shape: Shape,
                 dtype: str, keep: Tuple[Any, ...]) -> None:
        self.address, self.nbytes, self.device, self.device_id = address, nbytes, device, device_id
        self.shape, self.dtype, self.keep = shape, dtype, keep


_TYPESTR_KINDS = {"f": "float", "i": "int", "u": "uint"}
_DLPACK_KINDS = {0: "int", 1: "uint", 2: "float", 4: "bfloat"}


def _typestr_name(typestr: str) -> str:
    """"float32", "int8", ... for an array-interface typestr ("<f4", "|i1"); the typestr
    itself for other byte orders and kinds."""
    kind = _TYPESTR_KINDS.get(typestr[1:2])
    if typestr[:1] in "<|=" and kind is not None and typestr[2:].isdigit():
        return "%s%d" % (kind, 8 * int(typestr[2:]))
    if typestr[1:] == "b1":
        return "bool"
    return typestr


def _itemsize(name: str, typestr: str) -> int:
    try:
        itemsize = int(typestr[2:])
    except ValueError:
        itemsize = 0
    if itemsize < 1:
        raise TypeError("%s: dtype %r has no fixed element size" % (name, typestr))
    return itemsize


def _count(shape: Sequence[int]) -> int:
    count = 1
    for extent in shape:
        count *= int(extent)
    return count


def _is_contiguous(shape: Sequence[int], strides: Sequence[int], unit: int) -> bool:
    """Row-major contiguity of `strides` (in units of `unit` per element) for `shape`;
    dimensions of extent 1 may have any stride, and an empty buffer is contiguous."""
    if len(strides) != len(shape):
        return False
    if any(int(extent) == 0 for extent in shape):
        return True
    expected = unit
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if int(extent) != 1 and int(stride) != expected:
            return False
        expected *= int(extent)
    return True


def _not_contiguous(name: str, shape: Sequence[int], strides: Sequence[int],
                    unit: str) -> ValueError:
    return ValueError("%s: must be contiguous (shape %r, strides %r %s); pass a contiguous "
                      "buffer (e.g. a copy)" % (name, tuple(int(x) for x in shape),
                                                tuple(int(x) for x in strides), unit))


def _interface_data(name: str, iface: Dict[str, Any]) -> Tuple[int, bool]:
    data = iface.get("data")
    if not isinstance(data, tuple) or len(data) != 2:
        raise TypeError("%s: the array interface's data is %r; expected a (pointer, "
                        "read-only) tuple" % (name, data))
    return int(data[0]), bool(data[1])


def _interface_flat(name: str, iface: Dict[str, Any], device: str, device_id: int,
                    obj: Any) -> Tuple[Flat, bool]:
    """The buffer an __array_interface__ / __cuda_array_interface__ describes, and whether
    it is read-only; ValueError naming `name` when its strides are not row-major."""
    typestr = str(iface["typestr"])
    itemsize = _itemsize(name, typestr)
    shape = tuple(int(x) for x in iface["shape"])
    strides = iface.get("strides")
    if strides is not None and not _is_contiguous(shape, strides, itemsize):
        raise _not_contiguous(name, shape, strides, "bytes")
    address, readonly = _interface_data(name, iface)
    return (Flat(address, _count(shape) * itemsize, device, device_id, shape,
                 _typestr_name(typestr), (obj,)), readonly)


def flat(obj: Any, name: str, stream: Optional[int] = None) -> Flat:
    """Describes a contiguous buffer (workspace, lse, levels) of any dtype and dimension.
    ValueError naming `name` when it is not contiguous (any stride that is not row-major,
    1-D included: a reversed or stepped view), read-only (NumPy / array interface), or on
    a device other than the CPU or CUDA; TypeError when it is not a buffer."""
    if framework_of(obj) == "torch" and hasattr(obj, "data_ptr"):
        dev = obj.device
        if dev.type not in ("cpu", "cuda"):
            raise ValueError("%s: device %s is not supported: expected cpu or cuda" % (name, dev))
        shape = tuple(int(x) for x in obj.shape)
        if not obj.is_contiguous():
            raise _not_contiguous(name, shape, obj.stride(), "elements")
        device_id = (int(dev.index if dev.index is not None else -1) if dev.type == "cuda"
                     else 0)
        return Flat(int(obj.data_ptr()), int(obj.numel() * obj.element_size()), dev.type,
                    device_id, shape, str(obj.dtype).replace("torch.", ""), (obj,))
    if hasattr(obj, "__array_interface__"):
        buffer, readonly = _interface_flat(name, obj.__array_interface__, "cpu", 0, obj)
        if readonly:
            raise ValueError("%s: is read-only" % name)
        return buffer
    if hasattr(obj, "__dlpack__"):
        device_type, _ = (obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__")
                          else (DL_CPU, 0))
        capsule = (obj.__dlpack__(stream=dlpack_stream_arg(stream))
                   if is_cuda_device(device_type) else obj.__dlpack__())
        (address, device_type, device_id, code, bits, lanes, shape,
         strides) = capi.psa_py_dlpack_info(capsule)
        shape = tuple(int(x) for x in shape)
        if strides is not None and not _is_contiguous(shape, strides, 1):
            raise _not_contiguous(name, shape, strides, "elements")
        if device_type in (DL_CPU, DL_CUDA_HOST):
            device, device_id = "cpu", 0
        elif is_cuda_device(device_type):
            device = "cuda"
        else:
            raise ValueError("%s: DLPack device type %d is not supported: expected CPU (1), "
                             "CUDA (2), CUDA host (3) or CUDA managed (13)" % (name, device_type))
        kind = _DLPACK_KINDS.get(int(code))
        dtype = ("%s%d" % (kind, bits) if kind is not None and lanes == 1
                 else "dlpack(code %d, bits %d, lanes %d)" % (code, bits, lanes))
        return Flat(int(address), _count(shape) * int(bits) * int(lanes) // 8, device,
                    int(device_id), shape, dtype, (obj, capsule))
    if hasattr(obj, "__cuda_array_interface__"):
        # The interface carries no device id; the CUDA backend checks the pointer's device.
        return _interface_flat(name, obj.__cuda_array_interface__, "cuda", -1, obj)[0]
    raise TypeError("%s: %s is not a buffer: expected a NumPy array, a torch.Tensor, or an "
                    "object with __array_interface__, __dlpack__ or __cuda_array_interface__"
                    % (name, type(obj).__name__))


def describe_flat(obj: Any, name: str, stream: Optional[int] = None
                  ) -> Tuple[int, int, str, Tuple[Any, ...]]:
    """A contiguous buffer (workspace, lse): ``(address, nbytes, device, keep)`` (see
    :func:`flat`)."""
    f = flat(obj, name, stream)
    return f.address, f.nbytes, f.device, f.keep


def host_memory_bytes() -> Optional[int]:
    """This machine's physical memory in bytes (sysconf), or None where it is unknown."""
    try:
        pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    if pages <= 0 or page <= 0:
        return None
    return int(pages) * int(page)


def check_host_memory(nbytes: int, name: str) -> None:
    """psa.Error (out of memory) naming `name` when `nbytes` of host memory is more than
    this machine has: refused before anything is allocated (as the CLI refuses it)."""
    have = host_memory_bytes()
    if have is not None and nbytes > have:
        raise Error(capi.PSA_ERR_OUT_OF_MEMORY, "%s: this shape needs %.3g GB of host memory; "
                    "this machine has %.3g GB" % (name, nbytes * 1e-9, have * 1e-9))


def host_bytes(nbytes: int, name: str) -> Any:
    """A new NumPy uint8 array of `nbytes` bytes; psa.Error naming `name` when the machine
    cannot hold it (check_host_memory) or the allocation fails, instead of MemoryError."""
    import numpy as np

    check_host_memory(nbytes, name)
    try:
        return np.empty((nbytes,), dtype=np.uint8)
    except (MemoryError, ValueError):
        raise Error(capi.PSA_ERR_OUT_OF_MEMORY, "%s: %d bytes of host memory cannot be "
                    "allocated" % (name, nbytes)) from None


def framework_stream(obj: Any) -> Optional[int]:
    """The CUDA stream a framework's tensor is being used on, where the framework has the
    notion (PyTorch's and CuPy's current stream); None otherwise."""
    framework = framework_of(obj)
    if framework == "torch":
        torch = sys.modules["torch"]
        return int(torch.cuda.current_stream(obj.device).cuda_stream)
    if framework == "cupy":
        cupy = sys.modules["cupy"]
        return int(cupy.cuda.get_current_stream().ptr)
    return None


_NUMPY_DTYPES = {F32: "float32", F16: "float16"}


def allocate(template: Any, device: str, nbytes: Optional[int] = None,
             shape: Optional[Sequence[int]] = None, float32: bool = False,
             name: str = "workspace") -> Any:
    """A new array on `device` ("cpu"/"cuda") in the template's framework (the device of the
    template): `nbytes` bytes of uint8, or `shape` (default: the template's) in float32 when
    `float32`, else in the template's dtype. PyTorch tensors get torch.empty (the caching
    allocator), CuPy arrays cupy.empty (its memory pool), CPU objects NumPy. `nbytes` on the
    host is refused with psa.Error naming `name` when the machine cannot hold it
    (check_host_memory), before anything is allocated."""
    framework = framework_of(template)
    if framework == "torch":
        torch = sys.modules["torch"]
        if nbytes is not None:
            if device == "cpu":
                check_host_memory(nbytes, name)
            return torch.empty((nbytes,), dtype=torch.uint8, device=template.device)
        return torch.empty(tuple(shape) if shape is not None else template.shape,
                           dtype=torch.float32 if float32 else template.dtype,
                           device=template.device)
    if framework == "cupy":
        cupy = sys.modules["cupy"]
        with template.device:
            if nbytes is not None:
                return cupy.empty((nbytes,), dtype=cupy.uint8)
            return cupy.empty(tuple(shape) if shape is not None else template.shape,
                              dtype=cupy.float32 if float32 else template.dtype)
    if device == "cpu":
        import numpy as np

        if nbytes is not None:
            return host_bytes(nbytes, name)
        dims = tuple(shape) if shape is not None else tuple(read(template, "q")[1])
        if float32:
            return np.empty(dims, dtype=np.float32)
        dtype = read(template, "q")[0]
        if dtype in _NUMPY_DTYPES:
            return np.empty(dims, dtype=_NUMPY_DTYPES[dtype])
    raise TypeError("cannot allocate memory like a %s on %s: pass out= (and lse=, workspace= "
                    "as needed), or use PyTorch or CuPy arrays" % (type(template).__name__, device))
