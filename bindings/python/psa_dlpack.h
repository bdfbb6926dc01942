/* bindings/python/psa_dlpack.h -- reads an unversioned DLPack capsule ("dltensor") for the
 * Python layer. Included by psa.i only. Borrows: the capsule keeps its name, so its own
 * destructor still calls the producer's deleter; the caller keeps the capsule (and the
 * tensor) alive while libpsa uses the memory.
 *
 * The structs are declared here rather than taken from <dlpack/dlpack.h>: Debian 12 ships
 * DLPack 0.6, and only this ABI-stable subset (unchanged from DLPack 0.5 to 1.x) is read. */
#ifndef PSA_PY_DLPACK_H
#define PSA_PY_DLPACK_H

#include <Python.h>
#include <stdint.h>

typedef struct {
  int32_t device_type; /* kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 */
  int32_t device_id;
} psa_py_DLDevice;

typedef struct {
  uint8_t code; /* kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 */
  uint8_t bits;
  uint16_t lanes;
} psa_py_DLDataType;

typedef struct {
  void* data;
  psa_py_DLDevice device;
  int32_t ndim;
  psa_py_DLDataType dtype;
  int64_t* shape;
  int64_t* strides; /* elements; NULL = compact row-major */
  uint64_t byte_offset;
} psa_py_DLTensor;

/* DLManagedTensor starts with its DLTensor; manager_ctx and deleter follow and are not
 * touched here. */
typedef struct {
  psa_py_DLTensor dl_tensor;
} psa_py_DLManagedTensorHead;

/* Returns (data_address, device_type, device_id, dtype_code, dtype_bits, dtype_lanes,
 * shape tuple, strides tuple or None); data_address already includes byte_offset.
 * Raises ValueError for a capsule that is not an unconsumed "dltensor". */
static PyObject* psa_py_dlpack_info(PyObject* capsule) {
  const psa_py_DLManagedTensorHead* managed;
  const psa_py_DLTensor* t;
  PyObject *shape = NULL, *strides = NULL;
  int32_t i;
  if (!PyCapsule_IsValid(capsule, "dltensor")) {
    PyErr_SetString(PyExc_ValueError,
                    "expected an unconsumed DLPack capsule named 'dltensor' (versioned "
                    "'dltensor_versioned' capsules are not read)");
    return NULL;
  }
  managed = (const psa_py_DLManagedTensorHead*)PyCapsule_GetPointer(capsule, "dltensor");
  if (!managed) return NULL;
  t = &managed->dl_tensor;
  if (t->ndim < 0 || t->ndim > 64) {
    PyErr_Format(PyExc_ValueError, "DLPack tensor: ndim = %d", (int)t->ndim);
    return NULL;
  }
  shape = PyTuple_New(t->ndim);
  if (!shape) return NULL;
  for (i = 0; i < t->ndim; ++i) PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(t->shape[i]));
  if (t->strides) {
    strides = PyTuple_New(t->ndim);
    if (!strides) {
      Py_DECREF(shape);
      return NULL;
    }
    for (i = 0; i < t->ndim; ++i)
      PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(t->strides[i]));
  } else {
    strides = Py_None;
    Py_INCREF(strides);
  }
  return Py_BuildValue("(KiiiiiNN)",
                       (unsigned long long)((uintptr_t)t->data + t->byte_offset),
                       (int)t->device.device_type, (int)t->device.device_id,
                       (int)t->dtype.code, (int)t->dtype.bits, (int)t->dtype.lanes, shape,
                       strides);
}

#endif /* PSA_PY_DLPACK_H */
