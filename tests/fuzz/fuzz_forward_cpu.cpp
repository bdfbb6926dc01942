// tests/fuzz/fuzz_forward_cpu.cpp -- libFuzzer target for the forward path on the CPU
// backend: bytes -> a config (a shipped preset or the defaults, then set_int/set_double with
// fuzzed ids and values), a context, a video grid, a step, tensor descriptors (dtype, shape,
// strides, struct_size) and data, then psa_check_supported / psa_workspace_size /
// psa_attention_forward. Buffers are allocated to exactly the extent the descriptors claim
// whenever they claim a valid, small one; huge or invalid descriptors only go through the
// queries. Traps on a broken promise:
//   - a failing call records a known, non-internal status and a message;
//   - check_supported == OK <=> workspace_size == OK <=> the forward (with a big enough
//     workspace) == OK, and the same status otherwise;
//   - a failing forward writes nothing; a forward writes no output byte outside the tensor
//     it describes (strided gaps keep their sentinel) and every LSE entry it owns.
// Build and run: scripts/fuzz.sh.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "fuzz_common.h"
#include "psa.h"

namespace {

using psa_fuzz::check;
using psa_fuzz::check_failure;
using psa_fuzz::fuzzed_int;
using psa_fuzz::kSentinel;

constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxWorkspaceBytes = uint64_t{64} << 20;
constexpr double kMaxWork = 1e6;  // B * Hq * Lq * Lk * D multiply-adds per forward (~5 ms)

const char* const kPresets[][2] = {
    {"Wan2.1_14b", "psa_balanced"}, {"Wan2.1_1.3b", "psa_balanced"}, {"Wan2.1_1.3b", "psa_topk"},
    {"Wan2.1_14b", "baseline"},     {"Wan2.1_14b", "rf_v2_080"},     {"Wan2.1_14b", "ada_bsa_cdf"},
};

double fuzzed_double(FuzzedDataProvider& in) {
  static const double kSpecial[] = {0.0, 1.0, -1.0, 0.5, 0.1, 0.999999, 1e-300, -0.0,
                                    std::numeric_limits<double>::infinity(),
                                    -std::numeric_limits<double>::infinity(),
                                    std::numeric_limits<double>::quiet_NaN(),
                                    std::numeric_limits<double>::max()};
  return psa_fuzz::fuzzed_double(in, kSpecial, -2.0, 2.0);
}

psa_config* make_config(FuzzedDataProvider& in) {
  psa_config* cfg = nullptr;
  const int which = in.ConsumeIntegralInRange<int>(0, 6);
  const psa_status st = which == 0 ? psa_config_create(&cfg)
                                   : psa_config_load_embedded(kPresets[which - 1][0], kPresets[which - 1][1], &cfg);
  check(st == PSA_OK);
  const int edits = in.ConsumeIntegralInRange<int>(0, 6);
  for (int e = 0; e < edits; ++e) {
    const auto p = static_cast<psa_param>(in.ConsumeIntegralInRange<int>(-1, PSA_PARAM_COUNT_));
    const psa_status s = in.ConsumeBool() ? psa_config_set_int(cfg, p, fuzzed_int(in))
                                          : psa_config_set_double(cfg, p, fuzzed_double(in));
    if (s != PSA_OK) check_failure(s);
  }
  return cfg;
}

struct Tensor {
  psa_tensor_desc desc{};
  std::vector<uint8_t> bytes;  // exactly extent * element size when allocated
};

// Shapes: mostly small and valid (then buffers are allocated); sometimes consistent but huge
// (q, k, v and out agree, so planning is reached: only the queries run); sometimes one to
// three fields of anything at all. Returns false when the descriptors could not be made.
bool make_descs(FuzzedDataProvider& in, Tensor* t) {
  const auto dtype = static_cast<psa_dtype>(in.ConsumeIntegralInRange<int>(0, 2));
  const int64_t b = in.ConsumeIntegralInRange<int64_t>(1, 2);
  const int64_t hkv = in.ConsumeIntegralInRange<int64_t>(1, 2);
  const int64_t hq = hkv * in.ConsumeIntegralInRange<int64_t>(1, 2);
  int64_t lq = in.ConsumeIntegralInRange<int64_t>(1, 300);
  int64_t lk = in.ConsumeBool() ? lq : in.ConsumeIntegralInRange<int64_t>(1, 300);
  if (in.ConsumeBool()) lq = lk;
  int64_t d = in.ConsumeIntegralInRange<int64_t>(1, 40);
  if (in.ConsumeProbability<float>() < 0.15f) {
    lq = fuzzed_int(in);
    lk = in.ConsumeBool() ? lq : fuzzed_int(in);
    if (in.ConsumeBool()) d = fuzzed_int(in);
  }
  const int64_t dims[4][4] = {{b, hq, lq, d}, {b, hkv, lk, d}, {b, hkv, lk, d}, {b, hq, lq, d}};
  for (int i = 0; i < 4; ++i) {
    const auto layout = static_cast<psa_layout>(in.ConsumeIntegralInRange<int>(0, 2));
    const psa_status st =
        psa_tensor_desc_init(&t[i].desc, layout, dtype, dims[i][0], dims[i][1], dims[i][2], dims[i][3]);
    if (st != PSA_OK) {
      check_failure(st);
      check(st == PSA_ERR_INVALID_SHAPE);
      return false;
    }
    if (in.ConsumeProbability<float>() < 0.2f && t[i].desc.strides[0] < (int64_t{1} << 40)) {  // gaps
      t[i].desc.strides[2] += in.ConsumeIntegralInRange<int64_t>(0, 8);
      t[i].desc.strides[1] = t[i].desc.strides[1] * 2 + in.ConsumeIntegralInRange<int64_t>(0, 3);
      t[i].desc.strides[0] = t[i].desc.strides[0] * 4 + 1;
    }
  }
  const int mutations = in.ConsumeProbability<float>() < 0.3f ? in.ConsumeIntegralInRange<int>(1, 3) : 0;
  for (int m = 0; m < mutations; ++m) psa_fuzz::mutate_desc_field(in, t[in.ConsumeIntegralInRange<int>(0, 3)].desc);
  return true;
}

uint64_t buffer_bytes(const psa_tensor_desc& d) {
  return psa_fuzz::described_bytes(d, int64_t{1} << 20, kMaxBufferBytes);
}

void fill(FuzzedDataProvider& in, Tensor& t) {
  // A few bytes of input seed a cheap generator; sometimes NaN/Inf/huge values are planted.
  uint32_t state = in.ConsumeIntegral<uint32_t>() | 1u;
  const int special = in.ConsumeIntegralInRange<int>(0, 4);
  const float scale = in.ConsumeBool() ? 1.0f : 1e4f;
  const int32_t es = psa_dtype_size(t.desc.dtype);
  const size_t n = t.bytes.size() / static_cast<size_t>(es);
  for (size_t i = 0; i < n; ++i) {
    float f = psa_fuzz::unit_value(psa_fuzz::xorshift32(state)) * scale;
    if (special > 0 && state % 997u == 0)
      f = special == 1 ? NAN : (special == 2 ? INFINITY : (special == 3 ? -INFINITY : 6e4f));
    psa_fuzz::store_value(&t.bytes[i * static_cast<size_t>(es)], f, es);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  psa_config* cfg = make_config(in);
  psa_context* ctx = nullptr;
  const auto backend = static_cast<psa_backend>(in.ConsumeIntegralInRange<int>(0, 3));
  psa_status st = psa_context_create(cfg, backend, -1, &ctx);
  psa_config_destroy(cfg);
  if (st != PSA_OK) {
    check_failure(st);
    check(ctx == nullptr);
    return 0;
  }
  check(psa_context_backend(ctx) == PSA_BACKEND_CPU);

  Tensor t[4];
  if (!make_descs(in, t)) {
    psa_context_destroy(ctx);
    return 0;
  }

  // Video grid: matching the key length (with or without text), or anything.
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 1: {
      const int64_t lk = t[1].desc.shape[2];
      if (lk < 1 || lk > (int64_t{1} << 20)) break;  // a mutated shape: no grid fits it
      const int64_t text = in.ConsumeIntegralInRange<int64_t>(0, lk - 1);
      const int64_t video = lk - text, w = in.ConsumeBool() ? video : 1;
      const auto pos = text > 0 ? static_cast<psa_text_position>(in.ConsumeIntegralInRange<int>(1, 2)) : PSA_TEXT_NONE;
      st = psa_context_set_video_grid(ctx, 1, video / w, w, text, pos);
      if (st != PSA_OK) check_failure(st);
      break;
    }
    case 2: {
      st = psa_context_set_video_grid(ctx, fuzzed_int(in), fuzzed_int(in), fuzzed_int(in), fuzzed_int(in),
                                      static_cast<psa_text_position>(in.ConsumeIntegralInRange<int>(-1, 3)));
      if (st != PSA_OK) check_failure(st);
      break;
    }
    case 3: {
      st = psa_context_set_video_pixels(ctx, fuzzed_int(in), fuzzed_int(in), fuzzed_int(in), fuzzed_int(in),
                                        static_cast<psa_text_position>(in.ConsumeIntegralInRange<int>(-1, 3)));
      if (st != PSA_OK) check_failure(st);
      break;
    }
    default: break;
  }
  st = psa_context_set_step(ctx, in.ConsumeIntegralInRange<int64_t>(-2, 30));
  if (st != PSA_OK) check_failure(st);

  const bool no_out = in.ConsumeProbability<float>() < 0.1f;
  const psa_status supported =
      psa_check_supported(ctx, &t[0].desc, &t[1].desc, &t[2].desc, no_out ? nullptr : &t[3].desc);
  if (supported != PSA_OK) check_failure(supported);
  uint64_t ws_bytes = 0;
  const psa_status ws_status = psa_workspace_size(ctx, &t[0].desc, &t[1].desc, &t[2].desc, &t[3].desc, &ws_bytes);
  if (!no_out) check(ws_status == supported);
  if (ws_status != PSA_OK) {
    check_failure(ws_status);
    psa_context_destroy(ctx);
    return 0;
  }

  uint64_t sizes[4];
  for (int i = 0; i < 4; ++i) sizes[i] = buffer_bytes(t[i].desc);
  const double work = double(t[0].desc.shape[0]) * t[0].desc.shape[1] * t[0].desc.shape[2] * t[1].desc.shape[2] *
                      t[0].desc.shape[3];
  if (sizes[0] == 0 || sizes[1] == 0 || sizes[2] == 0 || sizes[3] == 0 || ws_bytes > kMaxWorkspaceBytes ||
      work > kMaxWork) {
    psa_context_destroy(ctx);  // valid but too big to run here; the queries were the test
    return 0;
  }
  for (int i = 0; i < 3; ++i) {
    t[i].bytes.assign(sizes[i], 0);
    fill(in, t[i]);
  }
  t[3].bytes.assign(sizes[3], kSentinel);
  const size_t lse_n = static_cast<size_t>(t[0].desc.shape[0] * t[0].desc.shape[1] * t[0].desc.shape[2]);
  std::vector<float> lse(lse_n, -12345.0f);
  const bool want_lse = in.ConsumeBool();
  const bool short_ws = ws_bytes > 0 && in.ConsumeProbability<float>() < 0.1f;
  std::vector<uint8_t> ws(static_cast<size_t>(ws_bytes));
  const uint64_t given = short_ws ? ws_bytes - 1 : ws_bytes;

  const int forwards = in.ConsumeIntegralInRange<int>(1, 2);
  for (int f = 0; f < forwards; ++f) {
    std::fill(t[3].bytes.begin(), t[3].bytes.end(), kSentinel);
    std::fill(lse.begin(), lse.end(), -12345.0f);
    st = psa_attention_forward(ctx, &t[0].desc, t[0].bytes.data(), &t[1].desc, t[1].bytes.data(), &t[2].desc,
                               t[2].bytes.data(), &t[3].desc, t[3].bytes.data(), want_lse ? lse.data() : nullptr,
                               ws.empty() ? nullptr : ws.data(), given, nullptr);
    if (short_ws) {
      check(st == PSA_ERR_WORKSPACE_TOO_SMALL);
    } else {
      check(st == PSA_OK);  // supported + correctly sized buffers: the forward must run
    }
    if (st != PSA_OK) {
      check_failure(st);
      for (uint8_t byte : t[3].bytes) check(byte == kSentinel);
      for (float x : lse) check(x == -12345.0f);
      break;
    }
    const std::vector<bool> cov = psa_fuzz::covered_bytes(t[3].desc, t[3].bytes.size());
    for (size_t i = 0; i < cov.size(); ++i)
      if (!cov[i]) check(t[3].bytes[i] == kSentinel);
    if (want_lse)
      for (float x : lse) check(x != -12345.0f);
    psa_stats stats{};
    stats.struct_size = sizeof stats;
    check(psa_context_get_stats(ctx, &stats) == PSA_OK);
    check(stats.density >= 0.0 && stats.density <= 1.0 + 1e-9);
  }
  psa_context_destroy(ctx);
  return 0;
}
