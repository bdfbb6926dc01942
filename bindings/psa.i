/* bindings/psa.i -- the one SWIG interface of the Python and C# bindings: wraps include/psa.h
 * as it is and holds the one error hook (a non-OK psa_status becomes the language's exception
 * carrying psa_last_error_message()). No behaviour lives here: the idiomatic layers are
 * python/psa/ and csharp/. Whatever the C# side sees uses void* / int64_t / uint64_t only
 * (SWIG maps size_t, unsigned long and uintptr_t to a 32-bit uint there): never define
 * SWIGWORDSIZE64 for it. Python defines it where C long is 64-bit (LP64), so that SWIG's
 * int64_t is the C compiler's. The C# wrapper is compiled with
 * -Wno-incompatible-pointer-types: SWIG casts int64_t* parameters to long long*,
 * the same 64-bit type as the header's long* there.
 *
 *   Python: swig -python -DSWIGWORDSIZE64 -I<include> -Ipython -outdir <pkg> -o capi_wrap.c psa.i
 *           (module psa.capi; the extension is psa._capi)
 *   C#:     swig -csharp -module PsaNative -namespace Psa -dllimport psa_csharp
 *           -outfile PsaNative.cs -I<include> -o psa_csharp_wrap.c psa.i
 */
%module(package="psa") capi

%{
#include <stdlib.h>
#include <string.h>
#include "psa.h"
%}

%include <stdint.i>
%include <typemaps.i>

/* ===================================================================================
 * The error hook: every function returning psa_status goes through this typemap.
 * psa_last_error_status() reports a status instead of failing, so it opts out by name.
 * =================================================================================== */
#if defined(SWIGPYTHON)
%{
/* Every wrapped call returns psa_status, which the out typemap below turns into None (or an
 * exception): for the caller the C return value is not a value. SWIG >= 4.3 appends output
 * parameters to a non-void function's None instead of replacing it ([None, x]); treating
 * every call as void keeps the results what they are with SWIG 4.0-4.2 (x, or a list of the
 * outputs). The macro is defined after SWIG's runtime function and before the wrappers. */
#if defined(SWIG_VERSION) && SWIG_VERSION >= 0x040300
#define SWIG_Python_AppendOutput(result, obj, is_void) SWIG_Python_AppendOutput(result, obj, 1)
#endif
/* psa.Error lives in python/psa/_errors.py; the hook falls back to RuntimeError when the
 * module is used outside its package. The message is read first: nothing else may run a
 * libpsa call between the failing call and psa_last_error_message(). */
static void psa_py_raise(psa_status status) {
  static PyObject* error_class = NULL;
  const char* text = psa_last_error_message();
  PyObject* message = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
  PyObject* exc;
  if (!message) return;
  if (!error_class) {
    PyObject* mod = PyImport_ImportModule("psa._errors");
    if (mod) {
      error_class = PyObject_GetAttrString(mod, "Error");
      Py_DECREF(mod);
    }
    if (!error_class) {
      PyErr_Clear();
      PyErr_SetObject(PyExc_RuntimeError, message);
      Py_DECREF(message);
      return;
    }
  }
  exc = PyObject_CallFunction(error_class, "iO", (int)status, message);
  Py_DECREF(message);
  if (exc) {
    PyErr_SetObject(error_class, exc);
    Py_DECREF(exc);
  }
}
%}
%typemap(out) psa_status {
  if ($1 != PSA_OK) {
    psa_py_raise($1);
    SWIG_fail;
  }
  $result = SWIG_Py_Void();
}
%typemap(out) psa_status psa_last_error_status { $result = PyLong_FromLong((long)$1); }

#elif defined(SWIGCSHARP)
%typemap(csout, excode=SWIGEXCODE) psa_status {
    Status ret = (Status)$imcall;$excode
    if (ret != Status.OK) throw new PsaException(ret, $imclassname.psa_last_error_message());
    return ret;
  }
%typemap(csout, excode=SWIGEXCODE) psa_status psa_last_error_status {
    Status ret = (Status)$imcall;$excode
    return ret;
  }
#endif

/* ===================================================================================
 * Scalar out-parameters: returned values (Python) or `out` arguments (C#).
 * =================================================================================== */
%apply int64_t *OUTPUT { int64_t *value, int64_t *step };
%apply int32_t *OUTPUT { int32_t *dense };
%apply double *OUTPUT { double *value, double *lower, double *upper };
%apply uint64_t *OUTPUT { uint64_t *bytes };
%apply int64_t *OUTPUT { int64_t *text_begin, int64_t *text_end };

#if defined(SWIGPYTHON)
%define PSA_PY_OUT_ENUM(TYPE, NAME)
%typemap(in, numinputs=0) TYPE *NAME (TYPE tmp = (TYPE)0) { $1 = &tmp; }
%typemap(argout) TYPE *NAME { $result = SWIG_AppendOutput($result, PyLong_FromLong((long)tmp$argnum)); }
%enddef
PSA_PY_OUT_ENUM(psa_param, param)
PSA_PY_OUT_ENUM(psa_param_type, type)

%typemap(in, numinputs=0) const char **name (const char *tmp = NULL) { $1 = ($1_ltype)&tmp; }
%typemap(argout) const char **name {
  $result = SWIG_AppendOutput($result, tmp$argnum ? PyUnicode_FromString(tmp$argnum)
                                                         : SWIG_Py_Void());
}

/* Opaque objects become owned proxies whose destructor calls psa_*_destroy. */
%define PSA_PY_HANDLE(NAME, STRUCT, DESTROY)
%rename(NAME) STRUCT;
%nodefaultctor STRUCT;
struct STRUCT {};
%extend STRUCT { ~STRUCT() { DESTROY($self); } }
%typemap(in, numinputs=0) NAME **out (NAME *tmp = NULL) { $1 = &tmp; }
%typemap(argout) NAME **out {
  $result = SWIG_AppendOutput($result, SWIG_NewPointerObj(tmp$argnum, $*1_descriptor, SWIG_POINTER_OWN));
}
%enddef
PSA_PY_HANDLE(psa_config, psa_config_s, psa_config_destroy)
PSA_PY_HANDLE(psa_context, psa_context_s, psa_context_destroy)
PSA_PY_HANDLE(psa_catalog, psa_catalog_s, psa_catalog_destroy)
%ignore psa_config_destroy;
%ignore psa_context_destroy;
%ignore psa_catalog_destroy;

/* Data pointers and the stream are plain integers (addresses) or None; so are the
 * sequence order buffer and the pointer arrays of psa_merge_attention. */
%typemap(in) const void *, void *, float *lse, int64_t *order, const void *const *outs,
             const float *const *lses {
  if ($input == Py_None) {
    $1 = NULL;
  } else {
    unsigned long long address = PyLong_AsUnsignedLongLong($input);
    if (PyErr_Occurred()) SWIG_fail;
    $1 = ($1_ltype)(uintptr_t)address;
  }
}

/* Small int64 arrays ({t, h, w}) are a sequence of ints or None. */
%typemap(in) const int64_t *latent_shape_q (int64_t tmp[3]) {
  if ($input == Py_None) {
    $1 = NULL;
  } else {
    Py_ssize_t i;
    if (!PySequence_Check($input) || PySequence_Size($input) != 3) {
      PyErr_SetString(PyExc_TypeError, "$1_name: expected a sequence of 3 ints or None");
      SWIG_fail;
    }
    for (i = 0; i < 3; ++i) {
      PyObject* item = PySequence_GetItem($input, i);
      tmp[i] = item ? (int64_t)PyLong_AsLongLong(item) : 0;
      Py_XDECREF(item);
      if (PyErr_Occurred()) SWIG_fail;
    }
    $1 = tmp;
  }
}

/* DLPack capsules (python/psa_dlpack.h): read, never consumed. */
%{
#include "psa_dlpack.h"
%}
PyObject* psa_py_dlpack_info(PyObject* capsule);

#elif defined(SWIGCSHARP)
/* The flat functions (the module class PsaNative) are internal: callers use Config, Context,
 * TensorDesc and the enums, and the constants they need are public there (Stage, LevelStat,
 * Context.HeaderVersion). */
%pragma(csharp) moduleclassmodifiers="internal class"
/* Opaque objects, data pointers and the stream are IntPtr; the C# layer owns handles
 * through SafeHandle (csharp/Handles.cs). */
%apply void *VOID_INT_PTR {
  void *, const void *, float *lse, int64_t *order, const void *const *outs,
  const float *const *lses,
  psa_config *, const psa_config *, psa_context *, const psa_context *,
  psa_catalog *, const psa_catalog *
};
%define PSA_CS_OUT(TYPE, NAME, CSTYPE)
%typemap(ctype) TYPE NAME "void *"
%typemap(imtype) TYPE NAME "out CSTYPE"
%typemap(cstype) TYPE NAME "out CSTYPE"
%typemap(csin) TYPE NAME "out $csinput"
%typemap(in) TYPE NAME %{ $1 = ($1_ltype)$input; %}
%enddef
PSA_CS_OUT(psa_config **, out, global::System.IntPtr)
PSA_CS_OUT(psa_context **, out, global::System.IntPtr)
PSA_CS_OUT(psa_catalog **, out, global::System.IntPtr)
PSA_CS_OUT(const char **, name, global::System.IntPtr)
PSA_CS_OUT(psa_param *, param, Param)
PSA_CS_OUT(psa_param_type *, type, ParamType)
/* A C# string may hold U+0000, which the C string would end at: "Wan2.1_1.3b\0x" would load
 * Wan2.1_1.3b, a path "/etc/passwd\0.yaml" would open /etc/passwd. Refused by name. */
%typemap(csin, pre="    PsaStrings.CheckNoNul($csinput, \"$csinput\");") const char * "$csinput"
/* Small int64 arrays ({t, h, w}) are long[] (pinned for the call) or null. */
%typemap(ctype) const int64_t *latent_shape_q "int64_t *"
%typemap(imtype) const int64_t *latent_shape_q "long[]"
%typemap(cstype) const int64_t *latent_shape_q "long[]"
%typemap(csin) const int64_t *latent_shape_q "$csinput"
%typemap(in) const int64_t *latent_shape_q %{ $1 = $input; %}

/* C# names: psa_dtype -> DType, PSA_DTYPE_F16 -> DType.F16, PSA_ERR_NOT_FOUND ->
 * Status.ERR_NOT_FOUND (enum items share one SWIG namespace: ERR_CUDA vs Backend.CUDA).
 * The anonymous PSA_STAT_* and PSA_STAGE_* constants keep their names. */
%rename(Status) psa_status;
%rename(DType) psa_dtype;
%rename(Layout) psa_layout;
%rename(Method) psa_method;
%rename(MaskMode) psa_mask_mode;
%rename(MaskFormat) psa_mask_format;
%rename(Rearrange) psa_rearrange;
%rename(TextPosition) psa_text_position;
%rename(TextRule) psa_text_rule;
%rename(Precision) psa_precision;
%rename(Param) psa_param;
%rename(ParamType) psa_param_type;
%rename(Backend) psa_backend;
%rename(OK) PSA_OK;
%rename("%(regex:/^PSA_(ERR_.*)$/\\1/)s", %$isenumitem) "";
%rename("%(regex:/^PSA_(DTYPE|LAYOUT|METHOD|MASK_MODE|MASK_FORMAT|REARRANGE|TEXT_RULE|TEXT|PRECISION|PARAM_TYPE|PARAM|BACKEND)_(.*)$/\\2/)s", %$isenumitem) "";
#endif

%ignore PSA_STATUS_FORCE_32BIT_;

/* ===================================================================================
 * Structs. Fixed arrays are reached through accessors; the constructors set struct_size.
 * =================================================================================== */
#if defined(SWIGCSHARP)
%rename(TensorDesc) psa_tensor_desc;
%rename(Stats) psa_stats;
/* csharp/TensorDesc.cs adds factories (layouts, element counts) to the proxy. */
%typemap(csclassmodifiers) psa_tensor_desc, struct psa_tensor_desc "public partial class"
/* A disposed proxy passes NULL as self to its accessors: an exception, not a NULL
 * dereference in the wrapper. */
%typemap(check, canthrow=1) psa_tensor_desc *self, struct psa_tensor_desc *self, psa_stats *self,
                           struct psa_stats *self %{
  if (!$1) {
    SWIG_CSharpSetPendingExceptionArgument(SWIG_CSharpArgumentNullException,
                                           "the object was disposed", "this");
    return $null;
  }
%}
#endif
%ignore psa_tensor_desc::shape;
%ignore psa_tensor_desc::strides;
%ignore psa_stats::level_fraction;
%ignore psa_stats::stage_ms;

%extend psa_tensor_desc {
  psa_tensor_desc() {
    psa_tensor_desc* d = (psa_tensor_desc*)calloc(1, sizeof(psa_tensor_desc));
    if (d) d->struct_size = (uint32_t)sizeof(psa_tensor_desc);
    return d;
  }
  ~psa_tensor_desc() { free($self); }
  /* get_*: index 0..3 = B, H, L, D; -1 outside. */
  int64_t get_shape(int32_t i) { return i >= 0 && i < 4 ? $self->shape[i] : -1; }
  int64_t get_stride(int32_t i) { return i >= 0 && i < 4 ? $self->strides[i] : -1; }
  void set_shape(int64_t b, int64_t h, int64_t l, int64_t d) {
    $self->shape[0] = b; $self->shape[1] = h; $self->shape[2] = l; $self->shape[3] = d;
  }
  void set_strides(int64_t b, int64_t h, int64_t l, int64_t d) {
    $self->strides[0] = b; $self->strides[1] = h; $self->strides[2] = l; $self->strides[3] = d;
  }
}

%extend psa_stats {
  psa_stats() {
    psa_stats* s = (psa_stats*)calloc(1, sizeof(psa_stats));
    if (s) s->struct_size = (uint32_t)sizeof(psa_stats);
    return s;
  }
  ~psa_stats() { free($self); }
  /* PSA_STAT_LEVEL_* index; -1 outside 0..4. */
  double get_level_fraction(int32_t i) { return i >= 0 && i < 5 ? $self->level_fraction[i] : -1.0; }
  /* PSA_STAGE_* index; -1 outside 0..6. */
  double get_stage_ms(int32_t i) { return i >= 0 && i < 7 ? $self->stage_ms[i] : -1.0; }
}

/* ===================================================================================
 * Diagnostics (level map, token order, mask pictures): the buffers are addresses (Python
 * ints, C# IntPtr) the idiomatic layers allocate; shapes and lengths are returned.
 * =================================================================================== */
%apply int64_t *OUTPUT { int64_t *batch, int64_t *heads, int64_t *q_blocks, int64_t *k_blocks,
                         int64_t *length, int64_t *text_begin, int64_t *text_end };
#if defined(SWIGPYTHON)
%typemap(in) int8_t *levels, const int8_t *levels, int64_t *order {
  if ($input == Py_None) {
    $1 = NULL;
  } else {
    unsigned long long address = PyLong_AsUnsignedLongLong($input);
    if (PyErr_Occurred()) SWIG_fail;
    $1 = ($1_ltype)(uintptr_t)address;
  }
}
%typemap(in) const int64_t *query_position (int64_t tmp[3]) {
  if ($input == Py_None) {
    $1 = NULL;
  } else {
    Py_ssize_t i;
    if (!PySequence_Check($input) || PySequence_Size($input) != 3) {
      PyErr_SetString(PyExc_TypeError, "query_position: expected a sequence of 3 ints or None");
      SWIG_fail;
    }
    for (i = 0; i < 3; ++i) {
      PyObject* item = PySequence_GetItem($input, i);
      tmp[i] = item ? (int64_t)PyLong_AsLongLong(item) : 0;
      Py_XDECREF(item);
      if (PyErr_Occurred()) SWIG_fail;
    }
    $1 = tmp;
  }
}
#elif defined(SWIGCSHARP)
%apply void *VOID_INT_PTR { int8_t *levels, const int8_t *levels, int64_t *order };
%typemap(ctype) const int64_t *query_position "int64_t *"
%typemap(imtype) const int64_t *query_position "long[]"
%typemap(cstype) const int64_t *query_position "long[]"
%typemap(csin) const int64_t *query_position "$csinput"
%typemap(in) const int64_t *query_position %{ $1 = $input; %}
%rename(MaskView) psa_mask_view;
%rename("%(regex:/^PSA_MASK_VIEW_(.*)$/\\1/)s", %$isenumitem) "";
#endif

%include "psa.h"
