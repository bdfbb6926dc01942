// core/tensor.cpp -- descriptor validation (host only). Never touches tensor data.
#include "core/tensor.h"

#include <cstring>
#include <limits>

#include "core/error.h"

namespace psa {

int32_t dtype_size(psa_dtype dtype) {
  switch (dtype) {
    case PSA_DTYPE_F32: return 4;
    case PSA_DTYPE_F16: return 2;
    case PSA_DTYPE_BF16: return 2;
  }
  return 0;
}

const char* dtype_name(psa_dtype dtype) {
  switch (dtype) {
    case PSA_DTYPE_F32: return "f32";
    case PSA_DTYPE_F16: return "f16";
    case PSA_DTYPE_BF16: return "bf16";
  }
  return "unknown";
}

namespace {

constexpr const char* kDimName[4] = {"batch", "heads", "seq_len", "head_dim"};
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

bool mul_overflows(int64_t a, int64_t b) { return a != 0 && b > kMax / a; }

psa_status check_one(const char* name, const psa_tensor_desc* d) {
  PSA_RETURN_IF(d == nullptr, PSA_ERR_NULL_POINTER, "%s_desc: must not be NULL", name);
  PSA_RETURN_IF(d->struct_size != sizeof(psa_tensor_desc), PSA_ERR_INVALID_ARGUMENT,
                "%s_desc: struct_size = %u; expected sizeof(psa_tensor_desc) = %u", name,
                d->struct_size, static_cast<unsigned>(sizeof(psa_tensor_desc)));
  // A C caller may store any int in dtype; loading an out-of-range value as psa_dtype is
  // undefined in C++ (UBSan: -fsanitize=enum), so it is range-checked as an int first.
  static_assert(sizeof(psa_dtype) == sizeof(int32_t), "psa_dtype is an int");
  int32_t raw_dtype = 0;
  std::memcpy(&raw_dtype, &d->dtype, sizeof raw_dtype);
  PSA_RETURN_IF(raw_dtype < PSA_DTYPE_F32 || raw_dtype > PSA_DTYPE_BF16, PSA_ERR_INVALID_DTYPE,
                "%s_desc: dtype = %d; allowed: PSA_DTYPE_F32 (0), PSA_DTYPE_F16 (1), PSA_DTYPE_BF16 (2)",
                name, static_cast<int>(raw_dtype));
  int64_t elems = 1;
  for (int i = 0; i < 4; ++i) {
    PSA_RETURN_IF(d->shape[i] < 1, PSA_ERR_INVALID_SHAPE, "%s: shape[%d] (%s) = %lld; must be >= 1",
                  name, i, kDimName[i], static_cast<long long>(d->shape[i]));
    elems = elems < 0 || mul_overflows(elems, d->shape[i]) ? -1 : elems * d->shape[i];
  }
  PSA_RETURN_IF(elems < 0, PSA_ERR_INVALID_SHAPE,
                "%s: shape = [%lld, %lld, %lld, %lld]: the element count overflows int64", name,
                static_cast<long long>(d->shape[0]), static_cast<long long>(d->shape[1]),
                static_cast<long long>(d->shape[2]), static_cast<long long>(d->shape[3]));
  PSA_RETURN_IF(mul_overflows(elems, dtype_size(d->dtype)), PSA_ERR_INVALID_SHAPE,
                "%s: size in bytes overflows int64 (%lld elements)", name,
                static_cast<long long>(elems));
  PSA_RETURN_IF(d->strides[3] != 1, PSA_ERR_INVALID_STRIDE,
                "%s: strides[3] (head_dim) = %lld; the head dim must be contiguous (stride 1)",
                name, static_cast<long long>(d->strides[3]));
  int64_t extent = 1;
  for (int i = 0; i < 4; ++i) {
    PSA_RETURN_IF(d->strides[i] < 0, PSA_ERR_INVALID_STRIDE,
                  "%s: strides[%d] (%s) = %lld; must be >= 0", name, i, kDimName[i],
                  static_cast<long long>(d->strides[i]));
    PSA_RETURN_IF(mul_overflows(d->shape[i] - 1, d->strides[i]), PSA_ERR_INVALID_STRIDE,
                  "%s: extent overflows int64 at strides[%d] = %lld", name, i,
                  static_cast<long long>(d->strides[i]));
    int64_t span = (d->shape[i] - 1) * d->strides[i];
    PSA_RETURN_IF(extent > kMax - span, PSA_ERR_INVALID_STRIDE, "%s: extent overflows int64", name);
    extent += span;
  }
  // The byte range [p, p + extent * element size) is what the aliasing checks compare: it
  // must not wrap (a stride of 2^62 floats would put row 1 back on row 0's address).
  PSA_RETURN_IF(mul_overflows(extent, dtype_size(d->dtype)), PSA_ERR_INVALID_STRIDE,
                "%s: strides = [%lld, %lld, %lld, %lld] address %lld elements; their size in "
                "bytes overflows int64", name, static_cast<long long>(d->strides[0]),
                static_cast<long long>(d->strides[1]), static_cast<long long>(d->strides[2]),
                static_cast<long long>(d->strides[3]), static_cast<long long>(extent));
  // No two elements may share an address: ordered by stride, every dimension of extent
  // > 1 must step past everything the smaller-stride dimensions span.
  int order[4] = {0, 1, 2, 3};
  for (int i = 1; i < 4; ++i)
    for (int j = i; j > 0 && d->strides[order[j]] < d->strides[order[j - 1]]; --j) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  int64_t span = 0;
  for (int r = 0; r < 4; ++r) {
    int i = order[r];
    if (d->shape[i] == 1) continue;
    PSA_RETURN_IF(d->strides[i] <= span, PSA_ERR_INVALID_STRIDE,
                  "%s: strides[%d] (%s) = %lld; must exceed %lld, the largest offset the "
                  "smaller strides reach (elements would alias)%s", name, i, kDimName[i],
                  static_cast<long long>(d->strides[i]), static_cast<long long>(span),
                  d->strides[i] == 0 ? "; stride 0 is a broadcast view: pass a copy (K/V with fewer "
                                       "heads than q need none: GQA/MQA run natively)"
                                     : "");
    span += (d->shape[i] - 1) * d->strides[i];
  }
  return PSA_OK;
}

}  // namespace

int64_t tensor_extent(const psa_tensor_desc& d) {
  int64_t extent = 1;
  for (int i = 0; i < 4; ++i) extent += (d.shape[i] - 1) * d.strides[i];
  return extent;
}

psa_status tensor_desc_init(psa_tensor_desc* desc, psa_layout layout, psa_dtype dtype,
                            int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim) {
  PSA_RETURN_IF(desc == nullptr, PSA_ERR_NULL_POINTER, "desc: must not be NULL");
  PSA_RETURN_IF(dtype_size(dtype) == 0, PSA_ERR_INVALID_DTYPE,
                "dtype = %d; allowed: PSA_DTYPE_F32 (0), PSA_DTYPE_F16 (1), PSA_DTYPE_BF16 (2)",
                static_cast<int>(dtype));
  const int64_t dims[4] = {batch, heads, seq_len, head_dim};
  for (int i = 0; i < 4; ++i)
    PSA_RETURN_IF(dims[i] < 1, PSA_ERR_INVALID_SHAPE, "%s = %lld; must be >= 1", kDimName[i],
                  static_cast<long long>(dims[i]));
  // Every stride below is a product of some of the dims: none overflows if their product fits.
  int64_t elems = 1;
  for (int i = 0; i < 4; ++i) elems = elems < 0 || mul_overflows(elems, dims[i]) ? -1 : elems * dims[i];
  PSA_RETURN_IF(elems < 0, PSA_ERR_INVALID_SHAPE,
                "desc: element count overflows int64: batch = %lld, heads = %lld, seq_len = %lld, "
                "head_dim = %lld", static_cast<long long>(batch), static_cast<long long>(heads),
                static_cast<long long>(seq_len), static_cast<long long>(head_dim));
  psa_tensor_desc d{};
  d.struct_size = sizeof(psa_tensor_desc);
  d.dtype = dtype;
  for (int i = 0; i < 4; ++i) d.shape[i] = dims[i];
  switch (layout) {
    case PSA_LAYOUT_BNSD:
      d.strides[3] = 1;
      d.strides[2] = head_dim;
      d.strides[1] = seq_len * head_dim;
      d.strides[0] = heads * seq_len * head_dim;
      break;
    case PSA_LAYOUT_BSND:
    case PSA_LAYOUT_BSH:
      d.strides[3] = 1;
      d.strides[1] = head_dim;
      d.strides[2] = heads * head_dim;
      d.strides[0] = seq_len * heads * head_dim;
      break;
    default:
      return set_error(PSA_ERR_INVALID_ARGUMENT,
                       "layout = %d; allowed: PSA_LAYOUT_BNSD (0), PSA_LAYOUT_BSND (1), PSA_LAYOUT_BSH (2)",
                       static_cast<int>(layout));
  }
  PSA_TRY(check_one("desc", &d));
  *desc = d;
  return PSA_OK;
}

psa_status validate_descriptor(const char* name, const psa_tensor_desc* d) {
  return check_one(name, d);
}

psa_status validate_descriptors(const psa_tensor_desc* q, const psa_tensor_desc* k,
                                const psa_tensor_desc* v, const psa_tensor_desc* out,
                                Problem* problem) {
  PSA_TRY(check_one("q", q));
  PSA_TRY(check_one("k", k));
  PSA_TRY(check_one("v", v));
  if (out != nullptr) PSA_TRY(check_one("out", out));
  PSA_RETURN_IF(k->dtype != q->dtype, PSA_ERR_INVALID_DTYPE, "k: dtype = %s; expected q's dtype %s",
                dtype_name(k->dtype), dtype_name(q->dtype));
  PSA_RETURN_IF(v->dtype != q->dtype, PSA_ERR_INVALID_DTYPE, "v: dtype = %s; expected q's dtype %s",
                dtype_name(v->dtype), dtype_name(q->dtype));
  PSA_RETURN_IF(k->shape[0] != q->shape[0], PSA_ERR_INVALID_SHAPE,
                "k: shape[0] (batch) = %lld; expected q's batch %lld",
                static_cast<long long>(k->shape[0]), static_cast<long long>(q->shape[0]));
  PSA_RETURN_IF(k->shape[3] != q->shape[3], PSA_ERR_INVALID_SHAPE,
                "k: shape[3] (head_dim) = %lld; expected q's head_dim %lld",
                static_cast<long long>(k->shape[3]), static_cast<long long>(q->shape[3]));
  for (int i = 0; i < 4; ++i)
    PSA_RETURN_IF(v->shape[i] != k->shape[i], PSA_ERR_INVALID_SHAPE,
                  "v: shape[%d] (%s) = %lld; expected k's %lld", i, kDimName[i],
                  static_cast<long long>(v->shape[i]), static_cast<long long>(k->shape[i]));
  PSA_RETURN_IF(q->shape[1] % k->shape[1] != 0, PSA_ERR_INVALID_SHAPE,
                "k: shape[1] (heads) = %lld does not divide q's heads %lld (GQA needs Hq %% Hkv == 0)",
                static_cast<long long>(k->shape[1]), static_cast<long long>(q->shape[1]));
  if (out != nullptr) {
    PSA_RETURN_IF(out->dtype != q->dtype, PSA_ERR_INVALID_DTYPE,
                  "out: dtype = %s; expected q's dtype %s", dtype_name(out->dtype),
                  dtype_name(q->dtype));
    for (int i = 0; i < 4; ++i)
      PSA_RETURN_IF(out->shape[i] != q->shape[i], PSA_ERR_INVALID_SHAPE,
                    "out: shape[%d] (%s) = %lld; expected q's %lld", i, kDimName[i],
                    static_cast<long long>(out->shape[i]), static_cast<long long>(q->shape[i]));
  }
  Problem p;
  p.batch = q->shape[0];
  p.heads_q = q->shape[1];
  p.heads_kv = k->shape[1];
  p.len_q = q->shape[2];
  p.len_k = k->shape[2];
  p.head_dim = q->shape[3];
  p.dtype = q->dtype;
  *problem = p;
  return PSA_OK;
}

}  // namespace psa
