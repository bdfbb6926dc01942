# bindings/python/psa/_tensors.py -- turns array objects (NumPy, anything exporting DLPack or
# __cuda_array_interface__) into a psa_tensor_desc plus a data address. Reads shapes,
# strides, dtype and device from the object itself; never copies and never imports a
# framework that the caller did not already use.
"""Tensor adapters: object -> (psa_tensor_desc, address, device)."""

import sys

from . import capi
from ._errors import Error

# DLPack device types (dlpack.h DLDeviceType).
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
# DLPack type codes.
_DL_FLOAT, _DL_BFLOAT = 2, 4

_DLPACK_DTYPES = {(_DL_FLOAT, 32): capi.PSA_DTYPE_F32, (_DL_FLOAT, 16): capi.PSA_DTYPE_F16,
                  (_DL_BFLOAT, 16): capi.PSA_DTYPE_BF16}
# Array-interface typestrs (native little-endian or "not applicable" byte order).
_TYPESTR_DTYPES = {"f4": capi.PSA_DTYPE_F32, "f2": capi.PSA_DTYPE_F16}
_DTYPE_NAMES = {capi.PSA_DTYPE_F32: "f32", capi.PSA_DTYPE_F16: "f16", capi.PSA_DTYPE_BF16: "bf16"}
_ITEMSIZE = {capi.PSA_DTYPE_F32: 4, capi.PSA_DTYPE_F16: 2, capi.PSA_DTYPE_BF16: 2}

# Logical order inside libpsa is [B, H, L, D]; `layout` names the caller's dimension order.
_LAYOUT_AXES = {"bhld": (0, 1, 2, 3), "bnsd": (0, 1, 2, 3),
                "blhd": (0, 2, 1, 3), "bsnd": (0, 2, 1, 3)}


class Tensor:
    """One described tensor: desc (capi.psa_tensor_desc), address (int), device
    ("cpu" or "cuda"), device_id, and `keep` (objects that must stay alive while libpsa
    uses the memory: the DLPack capsule)."""

    __slots__ = ("desc", "address", "device", "device_id", "shape", "keep")

    def __init__(self, desc, address, device, device_id, shape, keep):
        self.desc, self.address, self.device, self.device_id = desc, address, device, device_id
        self.shape, self.keep = shape, keep


def is_cuda_device(device_type):
    return device_type in (DL_CUDA, DL_CUDA_MANAGED)


def dlpack_stream_arg(stream):
    """DLPack's stream argument for the CUDA stream libpsa will run on: 1 means the legacy
    default stream (0 is not allowed by the protocol)."""
    return 1 if not stream else int(stream)


def _contiguous_strides(shape):
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.append(acc)
        acc *= max(int(extent), 1)
    return tuple(reversed(strides))


def _from_array_interface(obj, iface):
    typestr = iface["typestr"]
    if typestr[0] not in "<|=" or typestr[1:] not in _TYPESTR_DTYPES:
        raise Error(capi.PSA_ERR_INVALID_DTYPE,
                    "typestr %r: supported float32 ('<f4') and float16 ('<f2'); pass bfloat16 "
                    "through DLPack" % typestr)
    dtype = _TYPESTR_DTYPES[typestr[1:]]
    itemsize = _ITEMSIZE[dtype]
    shape = tuple(int(x) for x in iface["shape"])
    if iface.get("strides") is None:
        strides = _contiguous_strides(shape)
    else:
        byte_strides = tuple(int(x) for x in iface["strides"])
        if any(s % itemsize for s in byte_strides):
            raise Error(capi.PSA_ERR_INVALID_STRIDE,
                        "strides %r bytes are not multiples of the element size %d"
                        % (byte_strides, itemsize))
        strides = tuple(s // itemsize for s in byte_strides)
    address = int(iface["data"][0])
    return dtype, shape, strides, address, (obj,)


def _read(obj, stream):
    """Returns (dtype, shape, strides in elements, address, device, device_id, keep)."""
    # NumPy first, through its array interface: it needs no capsule and works for every
    # NumPy version (DLPack export arrived in NumPy 1.22).
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        dtype, shape, strides, address, keep = _from_array_interface(obj, obj.__array_interface__)
        return dtype, shape, strides, address, "cpu", 0, keep
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
            raise Error(capi.PSA_ERR_INVALID_DTYPE,
                        "DLPack dtype (code %d, bits %d, lanes %d): supported float32, "
                        "float16, bfloat16" % (code, bits, lanes))
        if strides is None:
            strides = _contiguous_strides(shape)
        if device_type == DL_CPU or device_type == DL_CUDA_HOST:
            device = "cpu"
        elif is_cuda_device(device_type):
            device = "cuda"
        else:
            raise Error(capi.PSA_ERR_WRONG_MEMORY_SPACE,
                        "DLPack device type %d: supported CPU (1), CUDA (2), CUDA host (3), "
                        "CUDA managed (13)" % device_type)
        return (_DLPACK_DTYPES[(code, bits)], tuple(shape), tuple(strides), address, device,
                device_id, (obj, capsule))
    if hasattr(obj, "__cuda_array_interface__"):
        iface = obj.__cuda_array_interface__
        dtype, shape, strides, address, keep = _from_array_interface(obj, iface)
        # The interface carries no device id; libpsa checks the pointer's device itself.
        return dtype, shape, strides, address, "cuda", -1, keep
    if hasattr(obj, "__array_interface__"):
        dtype, shape, strides, address, keep = _from_array_interface(obj, obj.__array_interface__)
        return dtype, shape, strides, address, "cpu", 0, keep
    raise TypeError("%s is not a tensor: expected a NumPy array, an object with __dlpack__ "
                    "or __cuda_array_interface__" % type(obj).__name__)


def describe(obj, name, layout, stream=None):
    """Describes a 4-D attention tensor whose dimensions are in `layout` order."""
    axes = _LAYOUT_AXES.get(layout.lower())
    if axes is None:
        raise ValueError("layout %r: expected 'bhld' (= 'bnsd') or 'blhd' (= 'bsnd')" % layout)
    dtype, shape, strides, address, device, device_id, keep = _read(obj, stream)
    if len(shape) != 4:
        raise Error(capi.PSA_ERR_INVALID_SHAPE,
                    "%s: %d dimensions %r; expected 4 in %s order" % (name, len(shape), shape,
                                                                     layout.upper()))
    desc = capi.psa_tensor_desc()
    desc.dtype = dtype
    desc.set_shape(*(shape[a] for a in axes))
    desc.set_strides(*(strides[a] for a in axes))
    return Tensor(desc, address, device, device_id, shape, keep)


def describe_flat(obj, name, stream=None):
    """A 1-D buffer (workspace, lse): (address, nbytes, device, keep). Must be contiguous."""
    if hasattr(obj, "nbytes") and hasattr(obj, "__array_interface__"):
        iface = obj.__array_interface__
        if iface.get("strides") is not None and obj.ndim > 1:
            raise Error(capi.PSA_ERR_INVALID_STRIDE, "%s: must be contiguous" % name)
        return int(iface["data"][0]), int(obj.nbytes), "cpu", (obj,)
    if hasattr(obj, "__dlpack__"):
        device_type, _ = (obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__")
                          else (DL_CPU, 0))
        capsule = (obj.__dlpack__(stream=dlpack_stream_arg(stream))
                   if is_cuda_device(device_type) else obj.__dlpack__())
        address, device_type, _, _, bits, lanes, shape, strides = capi.psa_py_dlpack_info(capsule)
        count = 1
        for extent in shape:
            count *= extent
        if strides is not None and tuple(strides) != _contiguous_strides(shape) and count > 1:
            raise Error(capi.PSA_ERR_INVALID_STRIDE, "%s: must be contiguous" % name)
        device = "cuda" if is_cuda_device(device_type) else "cpu"
        return address, count * bits * lanes // 8, device, (obj, capsule)
    if hasattr(obj, "__cuda_array_interface__"):
        iface = obj.__cuda_array_interface__
        count, itemsize = 1, int(iface["typestr"][2:])
        for extent in iface["shape"]:
            count *= int(extent)
        if iface.get("strides") is not None and len(iface["shape"]) > 1:
            raise Error(capi.PSA_ERR_INVALID_STRIDE, "%s: must be contiguous" % name)
        return int(iface["data"][0]), count * itemsize, "cuda", (obj,)
    raise TypeError("%s: %s is not a buffer" % (name, type(obj).__name__))


def dtype_name(dtype):
    return _DTYPE_NAMES.get(dtype, str(dtype))


def framework_stream(obj):
    """The CUDA stream a framework's tensor is being used on, when the framework has the
    notion (PyTorch's current stream); None otherwise."""
    if type(obj).__module__.split(".")[0] == "torch":
        torch = sys.modules["torch"]
        return torch.cuda.current_stream(obj.device).cuda_stream
    if type(obj).__module__.split(".")[0] == "cupy":
        cupy = sys.modules["cupy"]
        return cupy.cuda.get_current_stream().ptr
    return None


_NUMPY_DTYPES = {capi.PSA_DTYPE_F32: "float32", capi.PSA_DTYPE_F16: "float16"}


def allocate_like(template, device, dtype, nbytes=None, shape=None):
    """A new array on `device` ("cpu"/"cuda") in the template's framework: the template's
    shape and dtype (`dtype` is its psa dtype), or `nbytes` bytes of uint8, or float32 of
    `shape`. PyTorch and CuPy tensors get their own kind; other CPU objects get NumPy."""
    module = type(template).__module__.split(".")[0]
    if module == "torch":
        torch = sys.modules["torch"]
        if nbytes is not None:
            return torch.empty((nbytes,), dtype=torch.uint8, device=template.device)
        if shape is not None:
            return torch.empty(shape, dtype=torch.float32, device=template.device)
        return torch.empty(template.shape, dtype=template.dtype, device=template.device)
    if module == "cupy":
        cupy = sys.modules["cupy"]
        with template.device:
            if nbytes is not None:
                return cupy.empty((nbytes,), dtype=cupy.uint8)
            if shape is not None:
                return cupy.empty(shape, dtype=cupy.float32)
            return cupy.empty(template.shape, dtype=template.dtype)
    if device == "cpu":
        import numpy as np

        if nbytes is not None:
            return np.empty((nbytes,), dtype=np.uint8)
        if shape is not None:
            return np.empty(shape, dtype=np.float32)
        if dtype in _NUMPY_DTYPES:
            return np.empty(tuple(template_shape(template)), dtype=_NUMPY_DTYPES[dtype])
    raise TypeError("cannot allocate memory like a %s on %s: pass out= (and workspace=, lse= "
                    "as needed) explicitly" % (type(template).__name__, device))


def template_shape(obj):
    if hasattr(obj, "shape"):
        return obj.shape
    return _read(obj, None)[1]
