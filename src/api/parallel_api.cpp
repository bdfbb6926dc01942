// api/parallel_api.cpp -- extern "C" entry points for sequence-parallel engines: the token
// order a context computes in (psa_context_sequence_order) and the merge of partial
// attention results through their log-sum-exps (psa_merge_attention, CPU loop here, CUDA
// kernel in cuda/attention/merge.cu). The head / batch offsets of shards are config
// parameters (PSA_PARAM_HEAD_OFFSET, PSA_PARAM_BATCH_OFFSET).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "api/guard.h"
#include "attention/merge_spec.h"
#include "backend/backend.h"
#include "context/context.h"
#include "core/half.h"
#include "core/tensor.h"
#include "rearrange/rearrange.h"

#if defined(PSA_WITH_CUDA)
#include "cuda/attention/merge_cuda.h"
#endif

namespace {

constexpr int32_t kMaxParts = 64;

// Overlap of the byte ranges [a, a + a_bytes) and [b, b + b_bytes).
bool overlaps(const void* a, uint64_t a_bytes, const void* b, uint64_t b_bytes) {
  return psa::overlaps(psa::byte_range(a, a_bytes), psa::byte_range(b, b_bytes));
}

bool aligned(const void* p, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

void merge_cpu(int32_t count, const psa_tensor_desc& d, const void* const* outs,
               const float* const* lses, void* out, float* lse) {
  const int64_t B = d.shape[0], H = d.shape[1], L = d.shape[2], D = d.shape[3];
  float part[kMaxParts];
  float w[kMaxParts];
  std::vector<float> acc(static_cast<size_t>(D));
  int64_t row = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t l = 0; l < L; ++l, ++row) {
        for (int32_t i = 0; i < count; ++i) part[i] = lses[i][row];
        float merged = 0.0f;
        const bool any = psa::merge_weights(count, part, w, &merged);
        const int64_t base = b * d.strides[0] + h * d.strides[1] + l * d.strides[2];
        std::fill(acc.begin(), acc.end(), 0.0f);
        if (any) {
          for (int32_t i = 0; i < count; ++i)
            for (int64_t e = 0; e < D; ++e)
              acc[static_cast<size_t>(e)] =
                  acc[static_cast<size_t>(e)] + w[i] * psa::load_as_float(outs[i], base + e, d.dtype);
        }
        for (int64_t e = 0; e < D; ++e)
          psa::store_from_float(out, base + e, d.dtype, acc[static_cast<size_t>(e)]);
        if (lse != nullptr) lse[row] = merged;
      }
}

}  // namespace

extern "C" {

PSA_API psa_status psa_context_sequence_order(psa_context* context, int64_t seq_len,
                                              int64_t* order, int64_t* text_begin,
                                              int64_t* text_end) {
  PSA_API_BEGIN
  PSA_RETURN_IF(context == nullptr, PSA_ERR_NULL_POINTER, "context: must not be NULL");
  PSA_RETURN_IF(seq_len < 1, PSA_ERR_INVALID_SHAPE, "seq_len = %lld; must be >= 1",
                static_cast<long long>(seq_len));
  // Before the grid and before anything is written: an order this long is never built
  // (the text span alone, order = NULL, is given for any length).
  PSA_RETURN_IF(order != nullptr && seq_len > psa::kMaxOrderTokens, PSA_ERR_INVALID_SHAPE,
                "seq_len = %lld; token orders of more than 2^31 - 1 tokens are not supported",
                static_cast<long long>(seq_len));
  psa::SequencePlan plan;
  if (context->geometry.set) {
    psa::Config effective = context->cfg;
    if (effective.method == PSA_METHOD_DENSE) effective.use_rearrange = false;  // as plan.cpp
    // Without an order buffer only the text span is wanted: no memory in seq_len.
    PSA_TRY(psa::build_sequence_plan(effective, context->geometry, seq_len, &plan, order != nullptr));
  }
  if (order != nullptr) {
    if (plan.src.empty()) {
      for (int64_t i = 0; i < seq_len; ++i) order[i] = i;
    } else {
      std::memcpy(order, plan.src.data(), sizeof(int64_t) * static_cast<size_t>(seq_len));
    }
  }
  if (text_begin != nullptr) *text_begin = plan.text_begin;
  if (text_end != nullptr) *text_end = plan.text_end;
  return PSA_OK;
  PSA_API_END
}

PSA_API psa_status psa_merge_attention(int32_t count, const psa_tensor_desc* desc,
                                       const void* const* outs, const float* const* lses,
                                       void* out, float* lse, psa_backend backend,
                                       void* stream) {
  PSA_API_BEGIN
  PSA_RETURN_IF(desc == nullptr, PSA_ERR_NULL_POINTER, "desc: must not be NULL");
  PSA_RETURN_IF(count < 1 || count > kMaxParts, PSA_ERR_INVALID_ARGUMENT,
                "count = %d; allowed: 1..%d", static_cast<int>(count), static_cast<int>(kMaxParts));
  PSA_RETURN_IF(outs == nullptr, PSA_ERR_NULL_POINTER, "outs: must not be NULL");
  PSA_RETURN_IF(lses == nullptr, PSA_ERR_NULL_POINTER, "lses: must not be NULL");
  PSA_RETURN_IF(out == nullptr, PSA_ERR_NULL_POINTER, "out: must not be NULL");
  PSA_TRY(psa::validate_descriptor("desc", desc));
  const int64_t esize = psa::dtype_size(desc->dtype);
  // Each output is written row by row after that row of every input was read: out may be
  // one of outs and lse one of lses, but any other overlap would read written rows.
  const uint64_t out_bytes =
      static_cast<uint64_t>(psa::tensor_extent(*desc)) * static_cast<uint64_t>(esize);
  const uint64_t lse_bytes =
      static_cast<uint64_t>(desc->shape[0] * desc->shape[1] * desc->shape[2]) * 4;
  for (int32_t i = 0; i < count && outs[i] != nullptr && lses[i] != nullptr; ++i) {
    PSA_RETURN_IF(outs[i] != out && overlaps(out, out_bytes, outs[i], out_bytes),
                  PSA_ERR_INVALID_ARGUMENT,
                  "out: overlaps outs[%d] without being it; out may only be one of outs",
                  static_cast<int>(i));
    PSA_RETURN_IF(overlaps(out, out_bytes, lses[i], lse_bytes), PSA_ERR_INVALID_ARGUMENT,
                  "out: overlaps lses[%d]", static_cast<int>(i));
    if (lse == nullptr) continue;
    PSA_RETURN_IF(lses[i] != lse && overlaps(lse, lse_bytes, lses[i], lse_bytes),
                  PSA_ERR_INVALID_ARGUMENT,
                  "lse: overlaps lses[%d] without being it; lse may only be one of lses",
                  static_cast<int>(i));
    PSA_RETURN_IF(overlaps(lse, lse_bytes, outs[i], out_bytes), PSA_ERR_INVALID_ARGUMENT,
                  "lse: overlaps outs[%d]", static_cast<int>(i));
  }
  PSA_RETURN_IF(lse != nullptr && overlaps(lse, lse_bytes, out, out_bytes),
                PSA_ERR_INVALID_ARGUMENT, "lse: overlaps out");
  for (int32_t i = 0; i < count; ++i) {
    PSA_RETURN_IF(outs[i] == nullptr, PSA_ERR_NULL_POINTER, "outs[%d]: must not be NULL",
                  static_cast<int>(i));
    PSA_RETURN_IF(lses[i] == nullptr, PSA_ERR_NULL_POINTER, "lses[%d]: must not be NULL",
                  static_cast<int>(i));
    PSA_RETURN_IF(!aligned(outs[i], esize), PSA_ERR_MISALIGNED_POINTER,
                  "outs[%d]: %p is not aligned to its element size (%lld bytes)",
                  static_cast<int>(i), outs[i], static_cast<long long>(esize));
    PSA_RETURN_IF(!aligned(lses[i], 4), PSA_ERR_MISALIGNED_POINTER,
                  "lses[%d]: %p is not aligned to 4 bytes", static_cast<int>(i),
                  static_cast<const void*>(lses[i]));
  }
  PSA_RETURN_IF(!aligned(out, esize), PSA_ERR_MISALIGNED_POINTER,
                "out: %p is not aligned to its element size (%lld bytes)", out,
                static_cast<long long>(esize));
  PSA_RETURN_IF(lse != nullptr && !aligned(lse, 4), PSA_ERR_MISALIGNED_POINTER,
                "lse: %p is not aligned to 4 bytes", static_cast<void*>(lse));
  PSA_RETURN_IF(backend != PSA_BACKEND_AUTO && backend != PSA_BACKEND_CPU &&
                    backend != PSA_BACKEND_CUDA,
                PSA_ERR_INVALID_ARGUMENT,
                "backend = %d; allowed: PSA_BACKEND_AUTO (0), PSA_BACKEND_CPU (1), "
                "PSA_BACKEND_CUDA (2)",
                static_cast<int>(backend));
  const psa::MemorySpace space = psa::memory_space_of(out);
  psa_backend chosen = backend;
  if (chosen == PSA_BACKEND_AUTO)
    chosen = space == psa::MemorySpace::kHost ? PSA_BACKEND_CPU : PSA_BACKEND_CUDA;
  if (chosen == PSA_BACKEND_CPU) {
    PSA_RETURN_IF(space == psa::MemorySpace::kDevice, PSA_ERR_WRONG_MEMORY_SPACE,
                  "out: %p is device memory; the CPU backend needs host pointers (pass "
                  "PSA_BACKEND_CUDA or PSA_BACKEND_AUTO)",
                  out);
    merge_cpu(count, *desc, outs, lses, out, lse);
    return PSA_OK;
  }
#if defined(PSA_WITH_CUDA)
  PSA_RETURN_IF(space == psa::MemorySpace::kHost, PSA_ERR_WRONG_MEMORY_SPACE,
                "out: %p is host memory; the CUDA backend needs device pointers (pass "
                "PSA_BACKEND_CPU or PSA_BACKEND_AUTO)",
                out);
  psa::gpu::MergeArgs a;
  a.count = count;
  a.dtype = desc->dtype;
  for (int i = 0; i < 4; ++i) {
    a.shape[i] = desc->shape[i];
    a.stride[i] = desc->strides[i];
  }
  for (int32_t i = 0; i < count; ++i) {
    a.outs[i] = outs[i];
    a.lses[i] = lses[i];
  }
  a.out = out;
  a.lse = lse;
  return psa::gpu::merge_attention_cuda(a, static_cast<cudaStream_t>(stream));
#else
  (void)stream;
  return psa::set_error(PSA_ERR_BACKEND_UNAVAILABLE,
                        "backend = PSA_BACKEND_CUDA: this libpsa was built without CUDA");
#endif
  PSA_API_END
}

}  // extern "C"
