// tests/fuzz/fuzz_side_api.cpp -- libFuzzer target for the entry points beside the forward,
// all on the CPU backend, with fuzzed counts, shapes, strides, dtypes, grids and scalars:
// psa_merge_attention; psa_context_sequence_order, and after a sparse forward
// psa_context_get_token_order, psa_context_get_level_map and psa_context_write_mask_png; the
// PSA ring (psa_compute_level_map, psa_shard_attention over key shards, merged); the vendor
// call psa_sparse_attention (rf_v2 / ada_bsa / dense); psa_mask_write_png. Buffers are
// allocated to exactly the extent the arguments claim whenever they claim a valid, small one;
// otherwise the call gets a small buffer and must refuse the arguments before it touches
// memory. Traps on a broken promise:
//   - a failing call records a known, non-internal status and a message, and writes nothing
//     (outputs keep their sentinel);
//   - a merge that succeeds writes no byte outside the described elements, and its lse is
//     the log-sum-exp of the parts' (to a relative 1e-4);
//   - a sequence order that succeeds is a permutation with its text span inside, and
//     get_token_order after a forward agrees with it; that forward's level map holds only
//     0, 1, 2, 4, 8 and is refused, unwritten, for a capacity below its size; its pictures
//     (blocks and video views, fuzzed places) fail cleanly;
//   - the ring's map equals the forward's at the same step, the merge of its shards equals
//     the forward's output and lse (to 1e-4), and a map holding a value other than 0, 1, 2,
//     4, 8 or a shard outside the map is refused before anything is written.
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

constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 18;

double fuzzed_double(FuzzedDataProvider& in) {
  static const double kSpecial[] = {0.0, 0.5, 0.9, 0.999999, 1.0, -0.5, 1e-300,
                                    std::numeric_limits<double>::infinity(),
                                    std::numeric_limits<double>::quiet_NaN(),
                                    std::numeric_limits<double>::max()};
  return psa_fuzz::fuzzed_double(in, kSpecial, -1.0, 2.0);
}

uint64_t buffer_bytes(const psa_tensor_desc& d) {
  return psa_fuzz::described_bytes(d, int64_t{1} << 16, kMaxBufferBytes);
}

float f32_at(const std::vector<uint8_t>& b, size_t i) {
  float f;
  std::memcpy(&f, b.data() + i * 4, 4);
  return f;
}

void fill_bytes(FuzzedDataProvider& in, std::vector<uint8_t>& b, psa_dtype dt) {
  uint32_t s = in.ConsumeIntegral<uint32_t>() | 1u;
  const int es = dt == PSA_DTYPE_F32 ? 4 : 2;
  for (size_t i = 0; i + static_cast<size_t>(es) <= b.size(); i += static_cast<size_t>(es))
    psa_fuzz::store_value(&b[i], psa_fuzz::unit_value(psa_fuzz::xorshift32(s)), es);
}

// ---- psa_merge_attention ------------------------------------------------------------------
void fuzz_merge(FuzzedDataProvider& in) {
  int32_t count = in.ConsumeIntegralInRange<int32_t>(1, 4);
  if (in.ConsumeProbability<float>() < 0.1f) count = static_cast<int32_t>(fuzzed_int(in));
  psa_tensor_desc d{};
  const auto dtype = static_cast<psa_dtype>(in.ConsumeIntegralInRange<int>(0, 2));
  const psa_status st0 = psa_tensor_desc_init(&d, static_cast<psa_layout>(in.ConsumeIntegralInRange<int>(0, 1)), dtype,
                                              in.ConsumeIntegralInRange<int64_t>(1, 2),
                                              in.ConsumeIntegralInRange<int64_t>(1, 3),
                                              in.ConsumeIntegralInRange<int64_t>(1, 20),
                                              in.ConsumeIntegralInRange<int64_t>(1, 16));
  check(st0 == PSA_OK);
  if (in.ConsumeProbability<float>() < 0.3f) psa_fuzz::mutate_desc_field(in, d);
  const uint64_t bytes = buffer_bytes(d);
  // A descriptor the merge could accept but too large to allocate here is not tried; a
  // plainly invalid one goes in with small buffers, which the merge must not touch.
  bool invalid = d.struct_size != sizeof(psa_tensor_desc) || psa_dtype_size(d.dtype) <= 0 || d.strides[3] != 1;
  for (int i = 0; i < 4; ++i) invalid = invalid || d.shape[i] < 1 || d.strides[i] < 0;
  if (bytes == 0 && !invalid) return;
  const bool valid = bytes > 0 && count >= 1 && count <= 64;
  const size_t nbytes = bytes > 0 ? bytes : 64;
  const int64_t rows = bytes > 0 ? d.shape[0] * d.shape[1] * d.shape[2] : 1;
  const int parts = count >= 1 && count <= 64 ? count : 2;
  std::vector<std::vector<uint8_t>> part(static_cast<size_t>(parts), std::vector<uint8_t>(nbytes, 0));
  std::vector<std::vector<float>> lse(static_cast<size_t>(parts), std::vector<float>(static_cast<size_t>(rows)));
  std::vector<const void*> outs;  // count pointers when count is in [1, 64]
  std::vector<const float*> lses;
  for (int i = 0; i < parts; ++i) {
    fill_bytes(in, part[static_cast<size_t>(i)], dtype);
    for (float& x : lse[static_cast<size_t>(i)]) {
      const int k = in.ConsumeIntegralInRange<int>(0, 9);
      x = k == 0 ? -INFINITY : (k == 1 ? NAN : static_cast<float>(in.ConsumeFloatingPointInRange<double>(-50, 50)));
    }
    outs.push_back(part[static_cast<size_t>(i)].data());
    lses.push_back(lse[static_cast<size_t>(i)].data());
  }
  std::vector<uint8_t> out(nbytes, kSentinel);
  std::vector<float> out_lse(static_cast<size_t>(rows) + 1, -7.0f);
  const bool want_lse = in.ConsumeBool();
  const bool null_outs = in.ConsumeProbability<float>() < 0.05f;
  const psa_status st = psa_merge_attention(count, &d, null_outs ? nullptr : outs.data(),
                                            lses.data(), out.data(), want_lse ? out_lse.data() : nullptr,
                                            PSA_BACKEND_CPU, nullptr);
  if (st != PSA_OK) {
    check_failure(st);
    check(std::all_of(out.begin(), out.end(), [](uint8_t x) { return x == kSentinel; }));
    check(out_lse[0] == -7.0f);
    return;
  }
  check(valid && !null_outs && d.struct_size == sizeof(psa_tensor_desc));
  // No byte outside the described elements written (strided gaps keep their sentinel).
  const std::vector<bool> cov = psa_fuzz::covered_bytes(d, nbytes);
  for (size_t i = 0; i < nbytes; ++i)
    if (!cov[i]) check(out[i] == kSentinel);
  if (want_lse) {
    check(out_lse[static_cast<size_t>(rows)] == -7.0f);
    for (int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY;
      bool nan = false;
      for (int i = 0; i < parts; ++i) {
        const float x = lse[static_cast<size_t>(i)][static_cast<size_t>(r)];
        nan = nan || std::isnan(x);
        m = std::max(m, static_cast<double>(x));
      }
      const float got = out_lse[static_cast<size_t>(r)];
      if (nan) continue;  // NaN parts: whatever the merge says, it must not crash
      if (m == -INFINITY) {
        check(got == -INFINITY);
        continue;
      }
      double s = 0;
      for (int i = 0; i < parts; ++i) s += std::exp(lse[static_cast<size_t>(i)][static_cast<size_t>(r)] - m);
      const double want = m + std::log(s);
      check(std::fabs(got - want) <= 1e-4 * std::max(1.0, std::fabs(want)));
    }
  }
}

// ---- psa_context_sequence_order / psa_context_get_token_order ---------------------------------
psa_context* make_context(FuzzedDataProvider& in, const char* model, const char* preset) {
  psa_config* cfg = nullptr;
  check(psa_config_load_embedded(model, preset, &cfg) == PSA_OK);
  check(psa_config_set_int(cfg, PSA_PARAM_WARMUP_STEPS, 0) == PSA_OK);  // sparse from the first forward
  if (in.ConsumeBool()) {
    const psa_status s = psa_config_set_int(cfg, PSA_PARAM_USE_REARRANGE, in.ConsumeIntegralInRange<int>(-1, 2));
    if (s != PSA_OK) check_failure(s);
  }
  psa_context* ctx = nullptr;
  check(psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx) == PSA_OK);
  psa_config_destroy(cfg);
  return ctx;
}

void fuzz_order(FuzzedDataProvider& in) {
  psa_context* ctx = make_context(in, "Wan2.1_1.3b", in.ConsumeBool() ? "psa_balanced" : "psa_topk");
  const bool grid = in.ConsumeBool();
  int64_t t = in.ConsumeIntegralInRange<int64_t>(1, 4), h = in.ConsumeIntegralInRange<int64_t>(1, 9),
          w = in.ConsumeIntegralInRange<int64_t>(1, 9), text = in.ConsumeIntegralInRange<int64_t>(0, 12);
  if (in.ConsumeProbability<float>() < 0.2f) {
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0: t = fuzzed_int(in); break;
      case 1: h = fuzzed_int(in); break;
      case 2: w = fuzzed_int(in); break;
      default: text = fuzzed_int(in); break;
    }
  }
  const auto pos = static_cast<psa_text_position>(in.ConsumeIntegralInRange<int>(-1, 2));
  bool grid_set = false;
  if (grid) {
    const psa_status s = psa_context_set_video_grid(ctx, t, h, w, text, pos);
    if (s != PSA_OK) check_failure(s);
    grid_set = s == PSA_OK;
  }
  int64_t n = grid_set ? t * h * w + text : in.ConsumeIntegralInRange<int64_t>(1, 600);
  if (in.ConsumeProbability<float>() < 0.15f) n = fuzzed_int(in);
  const bool small = n >= 1 && n <= 4096;
  std::vector<int64_t> order(small ? static_cast<size_t>(n) : 1, -5);
  int64_t tb = -5, te = -5;
  const bool want_order = small && in.ConsumeBool();
  const psa_status st = psa_context_sequence_order(ctx, n, want_order ? order.data() : nullptr, &tb, &te);
  if (st != PSA_OK) {
    check_failure(st);
    check(tb == -5 && te == -5 && order[0] == -5);
    psa_context_destroy(ctx);
    return;
  }
  check(0 <= tb && tb <= te && te <= n);
  if (want_order) {
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int64_t x : order) {
      check(x >= 0 && x < n && !seen[static_cast<size_t>(x)]);
      seen[static_cast<size_t>(x)] = true;
    }
  }
  // A forward on that sequence (f32, one head of 8 dims) and the order it reports.
  if (small && n <= 1024 && want_order && in.ConsumeBool()) {
    psa_tensor_desc d{};
    check(psa_tensor_desc_init(&d, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 1, n, 8) == PSA_OK);
    std::vector<float> x(static_cast<size_t>(n) * 8), o(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f);
    uint64_t ws = 0;
    psa_status s = psa_workspace_size(ctx, &d, &d, &d, &d, &ws);
    if (s == PSA_OK && ws <= (uint64_t{64} << 20)) {
      std::vector<uint8_t> work(static_cast<size_t>(ws) + 1);
      s = psa_attention_forward(ctx, &d, x.data(), &d, x.data(), &d, x.data(), &d, o.data(), nullptr, work.data(),
                                ws, nullptr);
      if (s == PSA_OK) {
        psa_stats stats{};
        stats.struct_size = sizeof(stats);
        check(psa_context_get_stats(ctx, &stats) == PSA_OK);
        std::vector<int64_t> got(static_cast<size_t>(n), -5);
        int64_t len = -1, b2 = -1, e2 = -1;
        const int64_t cap = in.ConsumeBool() ? n : in.ConsumeIntegralInRange<int64_t>(-1, n);
        s = psa_context_get_token_order(ctx, 0, got.data(), cap, &len, &b2, &e2);
        if (s != PSA_OK) {
          check_failure(s);
          check(got[0] == -5);
        } else {
          check(len == n);
          if (!stats.ran_dense) check(got == order && b2 == tb && e2 == te);
        }
        // The level map it used (fuzzed capacity), then its pictures (fuzzed view and place).
        int64_t mb = 0, mh = 0, mq = 0, mk = 0;
        check(psa_context_level_map_shape(ctx, &mb, &mh, &mq, &mk) == PSA_OK);
        const uint64_t need = static_cast<uint64_t>(mb * mh * mq * mk);
        std::vector<int8_t> levels(static_cast<size_t>(need) + 1, -7);
        const uint64_t capacity = in.ConsumeBool() ? need : in.ConsumeIntegralInRange<uint64_t>(0, need + 1);
        s = psa_context_get_level_map(ctx, levels.data(), capacity);
        if (s != PSA_OK) {
          check_failure(s);
          check(capacity < need && levels[0] == -7);
        } else {
          check(capacity >= need && levels[static_cast<size_t>(need)] == -7);
          for (uint64_t i = 0; i < need; ++i) {
            const int8_t x = levels[static_cast<size_t>(i)];
            check(x == 0 || x == 1 || x == 2 || x == 4 || x == 8);
          }
        }
        int64_t place[3] = {in.ConsumeIntegralInRange<int64_t>(-1, 4), in.ConsumeIntegralInRange<int64_t>(-1, 9),
                            in.ConsumeIntegralInRange<int64_t>(-1, 9)};
        if (in.ConsumeProbability<float>() < 0.1f) place[in.ConsumeIntegralInRange<int>(0, 2)] = fuzzed_int(in);
        const auto view = static_cast<psa_mask_view>(in.ConsumeIntegralInRange<int>(-1, 2));
        const int64_t pb = in.ConsumeIntegralInRange<int64_t>(-1, 1), ph = in.ConsumeIntegralInRange<int64_t>(-2, 1);
        int64_t qb = in.ConsumeIntegralInRange<int64_t>(-2, 8);
        if (in.ConsumeProbability<float>() < 0.1f) qb = fuzzed_int(in);
        const int32_t cell = in.ConsumeProbability<float>() < 0.1f ? in.ConsumeIntegral<int32_t>()
                                                                   : in.ConsumeIntegralInRange<int32_t>(0, 2);
        s = psa_context_write_mask_png(ctx, "/dev/null", view, pb, ph, qb, in.ConsumeBool() ? place : nullptr, cell);
        if (s != PSA_OK) check_failure(s);
      } else {
        check_failure(s);
      }
    } else if (s != PSA_OK) {
      check_failure(s);
    }
  }
  psa_context_destroy(ctx);
}

// ---- psa_sparse_attention (vendor call, CPU) ----------------------------------------------
void fuzz_vendor(FuzzedDataProvider& in) {
  const auto dtype = static_cast<psa_dtype>(in.ConsumeIntegralInRange<int>(-1, 3));
  int64_t b = in.ConsumeIntegralInRange<int64_t>(1, 2), h = in.ConsumeIntegralInRange<int64_t>(1, 2);
  int64_t t = in.ConsumeIntegralInRange<int64_t>(1, 3), gh = in.ConsumeIntegralInRange<int64_t>(1, 12),
          gw = in.ConsumeIntegralInRange<int64_t>(1, 12);
  int64_t txt = in.ConsumeIntegralInRange<int64_t>(0, 40);
  int64_t l = t * gh * gw + txt, d = in.ConsumeIntegralInRange<int64_t>(1, 24);
  if (in.ConsumeProbability<float>() < 0.15f) {
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0: b = fuzzed_int(in); break;
      case 1: h = fuzzed_int(in); break;
      case 2: l = fuzzed_int(in); break;
      case 3: d = fuzzed_int(in); break;
      default: txt = fuzzed_int(in); break;
    }
  }
  int64_t latent[3] = {t, gh, gw};
  if (in.ConsumeProbability<float>() < 0.1f) latent[in.ConsumeIntegralInRange<int>(0, 2)] = fuzzed_int(in);
  const bool with_latent = in.ConsumeProbability<float>() < 0.8f;
  const auto layout = static_cast<psa_layout>(in.ConsumeIntegralInRange<int>(-1, 2));
  const auto method = static_cast<psa_method>(in.ConsumeIntegralInRange<int>(-1, 4));
  const double sparsity = fuzzed_double(in), cdf = fuzzed_double(in);
  const double scale = in.ConsumeBool() ? 0.0 : fuzzed_double(in);
  const int32_t sink = in.ConsumeIntegralInRange<int32_t>(-1, 3), recent = in.ConsumeIntegralInRange<int32_t>(-1, 3);
  const int32_t causal = in.ConsumeIntegralInRange<int32_t>(-1, 2);
  // Buffers: exactly the claimed size when it is small and positive, else 64 bytes (the call
  // must then refuse the shape before reading).
  const int32_t es = psa_dtype_size(dtype);
  uint64_t elems = 0;
  if (b >= 1 && h >= 1 && l >= 1 && d >= 1 && b <= 4 && h <= 4 && l <= 2048 && d <= 256)
    elems = static_cast<uint64_t>(b * h * l * d);
  const uint64_t bytes = es > 0 && elems > 0 && elems * static_cast<uint64_t>(es) <= kMaxBufferBytes
                             ? elems * static_cast<uint64_t>(es)
                             : 0;
  if (bytes == 0 && es > 0 && b >= 1 && h >= 1 && l >= 1 && d >= 1) return;  // maybe valid, too big to allocate here
  const size_t n = bytes > 0 ? bytes : 64;
  std::vector<uint8_t> q(n), k(n), v(n), out(n, kSentinel);
  fill_bytes(in, q, dtype == PSA_DTYPE_F32 ? PSA_DTYPE_F32 : PSA_DTYPE_BF16);
  fill_bytes(in, k, dtype == PSA_DTYPE_F32 ? PSA_DTYPE_F32 : PSA_DTYPE_BF16);
  fill_bytes(in, v, dtype == PSA_DTYPE_F32 ? PSA_DTYPE_F32 : PSA_DTYPE_BF16);
  const psa_status st = psa_sparse_attention(q.data(), k.data(), v.data(), out.data(), dtype, b, h, l, d, layout,
                                             method, sparsity, txt, with_latent ? latent : nullptr, sink, recent,
                                             cdf, scale, causal, PSA_BACKEND_CPU, nullptr);
  if (st != PSA_OK) {
    check_failure(st);
    check(std::all_of(out.begin(), out.end(), [](uint8_t x) { return x == kSentinel; }));
    return;
  }
  check(bytes > 0);
  if (dtype == PSA_DTYPE_F32)  // finite inputs, finite scale: a finite output everywhere
    if (std::isfinite(scale) && std::fabs(scale) < 1e3)
      for (size_t i = 0; i < n / 4; ++i) check(std::isfinite(f32_at(out, i)));
}

// ---- psa_mask_write_png ---------------------------------------------------------------------
void fuzz_png(FuzzedDataProvider& in) {
  int64_t heads = in.ConsumeIntegralInRange<int64_t>(1, 4), qb = in.ConsumeIntegralInRange<int64_t>(1, 40),
          kb = in.ConsumeIntegralInRange<int64_t>(1, 40);
  if (in.ConsumeProbability<float>() < 0.2f) {
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
      case 0: heads = fuzzed_int(in); break;
      case 1: qb = fuzzed_int(in); break;
      default: kb = fuzzed_int(in); break;
    }
  }
  const bool small = heads >= 1 && qb >= 1 && kb >= 1 && heads <= 8 && qb <= 4096 && kb <= 4096 &&
                     heads * qb * kb <= (int64_t{1} << 18);
  std::vector<int8_t> levels(small ? static_cast<size_t>(heads * qb * kb) : 16);
  for (int8_t& x : levels) {
    static const int8_t kLevels[] = {0, 1, 2, 4, 8};
    x = in.ConsumeProbability<float>() < 0.02f ? in.ConsumeIntegral<int8_t>()
                                               : kLevels[in.ConsumeIntegralInRange<int>(0, 4)];
  }
  int64_t head = in.ConsumeIntegralInRange<int64_t>(-2, 4);
  if (in.ConsumeProbability<float>() < 0.1f) head = fuzzed_int(in);
  const int32_t cell = in.ConsumeProbability<float>() < 0.1f ? in.ConsumeIntegral<int32_t>()
                                                             : in.ConsumeIntegralInRange<int32_t>(0, 3);
  if (!small && heads >= 1 && qb >= 1 && kb >= 1 && heads <= (int64_t{1} << 20) && qb <= (int64_t{1} << 24) &&
      kb <= (int64_t{1} << 24) && qb * kb <= (int64_t{1} << 30) / heads)
    return;  // a map the call may accept (psa.h: blocks <= 2^24, entries <= 2^30), too big to allocate here
  const psa_status st = psa_mask_write_png("/dev/null", levels.data(), heads, qb, kb, head, cell);
  if (st != PSA_OK) check_failure(st);
}

// ---- the PSA ring: psa_compute_level_map, psa_shard_attention per key shard, merge -------------
// The map of half 1 equals the one a forward builds at the same step, and the merge of the
// shards' partial results equals the forward's output (fp32 rounding aside); a corrupted map
// entry is refused before anything is written.
void fuzz_ring(FuzzedDataProvider& in) {
  psa_config* cfg = nullptr;
  check(psa_config_load_embedded("Wan2.1_1.3b", in.ConsumeBool() ? "psa_balanced" : "psa_topk", &cfg) == PSA_OK);
  check(psa_config_set_int(cfg, PSA_PARAM_USE_REARRANGE, 0) == PSA_OK);
  static const int64_t kBm[] = {64, 128}, kBn[] = {32, 64, 128};
  const int64_t bm = kBm[in.ConsumeIntegralInRange<int>(0, 1)], bn = kBn[in.ConsumeIntegralInRange<int>(0, 2)];
  check(psa_config_set_int(cfg, PSA_PARAM_BLOCK_M, bm) == PSA_OK);
  check(psa_config_set_int(cfg, PSA_PARAM_BLOCK_N, bn) == PSA_OK);
  psa_status st = psa_config_set_int(cfg, PSA_PARAM_TILE_N, std::min<int64_t>(bn, 32));
  if (st != PSA_OK) check_failure(st);
  st = psa_config_set_int(cfg, PSA_PARAM_SAMPLE_DIVISOR, int64_t{1} << in.ConsumeIntegralInRange<int>(0, 3));
  if (st != PSA_OK) check_failure(st);
  psa_context* ctx = nullptr;
  st = psa_context_create(cfg, PSA_BACKEND_CPU, -1, &ctx);
  psa_config_destroy(cfg);
  if (st != PSA_OK) {
    check_failure(st);
    return;
  }
  check(psa_context_set_step(ctx, 1000) == PSA_OK);  // past the warm-up: sparse, the same step each call
  const int64_t hkv = in.ConsumeIntegralInRange<int64_t>(1, 2), hq = hkv * in.ConsumeIntegralInRange<int64_t>(1, 2);
  const int64_t lq = in.ConsumeIntegralInRange<int64_t>(1, 400), lk = in.ConsumeIntegralInRange<int64_t>(1, 400);
  const int64_t d = in.ConsumeIntegralInRange<int64_t>(1, 16);
  psa_tensor_desc qd{}, kd{};
  check(psa_tensor_desc_init(&qd, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, hq, lq, d) == PSA_OK);
  check(psa_tensor_desc_init(&kd, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, hkv, lk, d) == PSA_OK);
  std::vector<float> q(static_cast<size_t>(hq * lq * d)), k(static_cast<size_t>(hkv * lk * d)), v(k.size());
  uint32_t seed = in.ConsumeIntegral<uint32_t>() | 1u;
  auto next = [&seed]() { return psa_fuzz::unit_value(psa_fuzz::xorshift32(seed)); };
  for (float& x : q) x = next();
  for (float& x : k) x = next();
  for (float& x : v) x = next();
  const int64_t mq = (lq + bm - 1) / bm, nk = (lk + bn - 1) / bn;
  const size_t map_bytes = static_cast<size_t>(hq * mq * nk);
  uint64_t ws = 0;
  st = psa_level_map_workspace_size(ctx, &qd, &kd, &ws);
  if (st != PSA_OK || ws > (uint64_t{64} << 20)) {
    if (st != PSA_OK) check_failure(st);
    psa_context_destroy(ctx);
    return;
  }
  std::vector<uint8_t> work(static_cast<size_t>(ws) + 16);
  std::vector<int8_t> levels(map_bytes + 1, -7);
  st = psa_compute_level_map(ctx, &qd, q.data(), &kd, k.data(), levels.data(), work.data(), ws, nullptr);
  if (st != PSA_OK) {
    check_failure(st);
    check(levels[0] == -7);
    psa_context_destroy(ctx);
    return;
  }
  check(levels[map_bytes] == -7);
  // The forward at the same step: its map and its output.
  std::vector<float> full(q.size()), full_lse(static_cast<size_t>(hq * lq));
  uint64_t fws = 0;
  check(psa_workspace_size(ctx, &qd, &kd, &kd, &qd, &fws) == PSA_OK);
  std::vector<uint8_t> fwork(static_cast<size_t>(fws) + 16);
  check(psa_attention_forward(ctx, &qd, q.data(), &kd, k.data(), &kd, v.data(), &qd, full.data(), full_lse.data(),
                              fwork.data(), fws, nullptr) == PSA_OK);
  std::vector<int8_t> fmap(map_bytes);
  check(psa_context_get_level_map(ctx, fmap.data(), map_bytes) == PSA_OK);
  check(std::equal(fmap.begin(), fmap.end(), levels.begin()));
  // A corrupted entry (sometimes): every shard that reads it refuses the map, unwritten.
  bool corrupt = false;
  if (in.ConsumeProbability<float>() < 0.15f) {
    static const int8_t kBad[] = {3, 5, 16, -1, 127, -128};
    levels[in.ConsumeIntegralInRange<size_t>(0, map_bytes - 1)] = kBad[in.ConsumeIntegralInRange<int>(0, 5)];
    corrupt = true;
  }
  // Key shards at block boundaries.
  std::vector<int64_t> cuts{0, nk};
  const int extra = in.ConsumeIntegralInRange<int>(0, 3);
  for (int c = 0; c < extra && nk > 1; ++c) cuts.push_back(in.ConsumeIntegralInRange<int64_t>(1, nk - 1));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  const size_t shards = cuts.size() - 1;
  std::vector<std::vector<float>> outs(shards, std::vector<float>(q.size(), 5.0f));
  std::vector<std::vector<float>> lses(shards, std::vector<float>(static_cast<size_t>(hq * lq), 5.0f));
  bool refused = false;
  for (size_t sh = 0; sh < shards; ++sh) {
    const int64_t r0 = cuts[sh] * bn, r1 = std::min(lk, cuts[sh + 1] * bn);
    psa_tensor_desc sd = kd;
    sd.shape[2] = r1 - r0;  // a view of rows [r0, r1) of every head: the full tensor's strides
    const float* ks = k.data() + r0 * kd.strides[2];
    const float* vs = v.data() + r0 * kd.strides[2];
    // Sometimes a wrong shard place or map width: one the call must refuse, or (a narrower
    // map, another begin) one that stays inside this map's bytes; a wider map than the buffer
    // holds is the caller's error the call cannot see, so it is not tried.
    int64_t begin = cuts[sh], map_nk = nk;
    if (in.ConsumeProbability<float>() < 0.05f) begin = fuzzed_int(in);
    if (in.ConsumeProbability<float>() < 0.05f) {
      static const int64_t kWidths[] = {0, -1, std::numeric_limits<int64_t>::max() / 2,
                                        std::numeric_limits<int64_t>::min()};
      map_nk = in.ConsumeBool() ? kWidths[in.ConsumeIntegralInRange<int>(0, 3)]
                                : in.ConsumeIntegralInRange<int64_t>(1, nk);
    }
    const bool moved = begin != cuts[sh] || map_nk != nk;
    uint64_t sws = 0;
    st = psa_shard_attention_workspace_size(ctx, &qd, &sd, &sd, &qd, &sws);
    if (st != PSA_OK) {
      check_failure(st);
      refused = true;
      continue;
    }
    std::vector<uint8_t> swork(static_cast<size_t>(sws) + 16);
    st = psa_shard_attention(ctx, &qd, q.data(), &sd, ks, &sd, vs, levels.data(), map_nk, begin, &qd,
                             outs[sh].data(), lses[sh].data(), swork.data(), sws, nullptr);
    if (st != PSA_OK) {
      check_failure(st);
      check(outs[sh][0] == 5.0f && lses[sh][0] == 5.0f);
      refused = true;
      continue;
    }
    if (moved) refused = true;  // accepted, but not this shard's part of the map: nothing to compare
  }
  if (!refused) {
    check(!corrupt || std::all_of(levels.begin(), levels.end() - 1, [](int8_t x) {
            return x == 0 || x == 1 || x == 2 || x == 4 || x == 8;
          }));
    std::vector<const void*> po;
    std::vector<const float*> pl;
    for (size_t sh = 0; sh < shards; ++sh) {
      po.push_back(outs[sh].data());
      pl.push_back(lses[sh].data());
    }
    std::vector<float> merged(q.size()), merged_lse(full_lse.size());
    check(psa_merge_attention(static_cast<int32_t>(shards), &qd, po.data(), pl.data(), merged.data(),
                              merged_lse.data(), PSA_BACKEND_CPU, nullptr) == PSA_OK);
    auto close = [](float a, float b) { return a == b || std::fabs(a - b) <= 1e-4f * (1.0f + std::fabs(b)); };
    for (size_t i = 0; i < merged.size(); ++i) check(close(merged[i], full[i]));
    for (size_t i = 0; i < merged_lse.size(); ++i) check(close(merged_lse[i], full_lse[i]));
  }
  psa_context_destroy(ctx);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: fuzz_merge(in); break;
    case 1: fuzz_order(in); break;
    case 2: fuzz_vendor(in); break;
    case 3: fuzz_ring(in); break;
    default: fuzz_png(in); break;
  }
  return 0;
}
