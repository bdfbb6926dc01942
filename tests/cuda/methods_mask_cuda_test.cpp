// tests/cuda/methods_mask_cuda_test.cpp -- rf_v2 / ada_bsa mask stage on the GPU: given the CPU's
// inputs (16-bit q/k in the method's token order, and their exact fp32 values for the CPU) the
// level maps of cuda/methods/ equal build_method_levels. rf_v2: bit for bit, exact ties included.
// ada_bsa: identical where ties are exact; elsewhere the disagreement rate is printed and bounded
// (device exp and fused multiply-adds round differently from the host's).
#include <cstdio>
#include <string>
#include <vector>

#include "context/context.h"
#include "cuda/methods/methods_cuda.h"
#include "cuda_test_util.h"
#include "methods/methods.h"

namespace psa {
namespace {

using test::DevBuf;

enum class Input {
  kRandom,       // normal(0, 1)
  kVideo,        // smooth along the sequence plus noise (test::make_video_like)
  kTernary,      // {-1, 0, 1}: block means and logits exact, so many exact ties
  kBlockWeights  // q = e0; k = w(block) e0 with w in {0, 2, 4}: blocks of one class tie exactly
};

struct MaskCase {
  const char* name;
  psa_method method;
  psa_dtype dt;
  int64_t B, Hq, Hkv, d;
  int64_t t, h, w, text;  // video grid (t = 0: none, the length is `len`)
  psa_text_position pos;
  int64_t len;
  double sparsity, cdf;
  bool causal, keep_sink, keep_recent;
  Input input;
  int64_t L() const { return t > 0 ? t * h * w + text : len; }
};

// [heads, L, d] 16-bit values in the caller's token order.
test::Tensor16 make_input(const MaskCase& c, int64_t heads, bool is_q, uint32_t seed) {
  const int64_t L = c.L(), n = heads * L * c.d;
  if (c.input == Input::kRandom) return test::make_random(static_cast<size_t>(n), c.dt, seed);
  if (c.input == Input::kVideo) return test::make_video_like(heads, L, c.d, c.dt, seed);
  test::Tensor16 x;
  x.bits.resize(static_cast<size_t>(n));
  x.f.resize(static_cast<size_t>(n));
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> tern(-1, 1);
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (c.input == Input::kTernary) {
      v = static_cast<float>(tern(gen));
    } else {
      const int64_t tok = (i / c.d) % L, e = i % c.d;
      const float w[3] = {0.0f, 2.0f, 4.0f};
      v = e != 0 ? 0.0f : is_q ? 1.0f : w[(tok / 128) % 3];
    }
    x.bits[static_cast<size_t>(i)] = test::to16(v, c.dt);
    x.f[static_cast<size_t>(i)] = test::from16(x.bits[static_cast<size_t>(i)], c.dt);
  }
  return x;
}

// Rows of every head reordered into the method's token order (row i <- caller row src[i]).
void permute(test::Tensor16* x, int64_t heads, int64_t L, int64_t d, const std::vector<int64_t>& src) {
  if (src.empty()) return;
  const test::Tensor16 in = *x;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t e = 0; e < d; ++e) {
        const size_t to = static_cast<size_t>((h * L + i) * d + e);
        const size_t from = static_cast<size_t>((h * L + src[static_cast<size_t>(i)]) * d + e);
        x->bits[to] = in.bits[from];
        x->f[to] = in.f[from];
      }
}

std::string row_string(const int8_t* r, int64_t nb) {
  std::string s;
  for (int64_t j = 0; j < nb; ++j) s += static_cast<char>('0' + r[j]);
  return s;
}

struct MaskResult {
  int64_t pairs = 0, mismatches = 0;
  double density = 0.0;
};

// Runs one case on both sides; returns the pair counts (asserts only on setup failures).
MaskResult run_case(const MaskCase& c, uint32_t seed) {
  MaskResult res;
  Config cfg;
  cfg.method = c.method;
  cfg.block_m = cfg.block_n = 128;
  cfg.sparsity = c.sparsity;
  cfg.cdf_threshold = c.cdf;
  cfg.causal = c.causal;
  cfg.keep_sink = c.keep_sink;
  cfg.keep_recent = c.keep_recent;
  VideoGeometry geo;
  if (c.t > 0) {
    geo.set = true;
    geo.t = c.t;
    geo.h = c.h;
    geo.w = c.w;
    geo.text_length = c.text;
    geo.text_position = c.text > 0 ? c.pos : PSA_TEXT_NONE;
  }
  Problem pb;
  pb.batch = c.B;
  pb.heads_q = c.Hq;
  pb.heads_kv = c.Hkv;
  pb.len_q = pb.len_k = c.L();
  pb.head_dim = c.d;
  pb.dtype = c.dt;
  Plan plan;
  EXPECT_EQ(PSA_OK, make_plan(cfg, geo, pb, &plan)) << c.name << ": " << psa_last_error_message();
  const int64_t L = c.L(), d = c.d, nb = plan.k_blocks, group = c.Hq / c.Hkv;

  test::Tensor16 q = make_input(c, c.B * c.Hq, true, seed), k = make_input(c, c.B * c.Hkv, false, seed + 7);
  permute(&q, c.B * c.Hq, L, d, plan.q_seq.src);
  permute(&k, c.B * c.Hkv, L, d, plan.k_seq.src);

  std::vector<int8_t> want(static_cast<size_t>(c.B * c.Hq * nb * nb));
  std::vector<float> scratch(static_cast<size_t>(method_scratch_floats(plan)));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const psa_status st = build_method_levels(
          plan, q.f.data() + (b * c.Hq + h) * L * d, k.f.data() + (b * c.Hkv + h / group) * L * d,
          scratch.data(), want.data() + (b * c.Hq + h) * nb * nb);
      EXPECT_EQ(PSA_OK, st) << c.name << ": " << psa_last_error_message();
    }

  DevBuf<uint16_t> dq(q.bits), dk(k.bits);
  DevBuf<int8_t> dl(want.size());
  dl.fill_bytes(0x7f);
  psa_status st;
  if (c.method == PSA_METHOD_RF_V2) {
    DevBuf<float> means(static_cast<size_t>(gpu::rf_v2_means_floats(c.B, c.Hq, c.Hkv, L, d)));
    gpu::RfV2MaskArgs a;
    a.dtype = c.dt;
    a.q = dq.get();
    a.k = dk.get();
    a.dims.batch = c.B;
    a.dims.heads_q = c.Hq;
    a.dims.heads_kv = c.Hkv;
    a.dims.len_q = L;
    a.dims.head_dim = d;
    a.scale = plan.scale;
    a.sparsity = c.sparsity;
    a.frame_tokens = plan.k_seq.frame_tokens;
    a.text_begin = plan.text_begin;
    a.text_end = plan.text_end;
    a.means = means.get();
    a.levels = dl.get();
    st = gpu::rf_v2_levels_cuda(a, nullptr);
    cudaDeviceSynchronize();
  } else {
    gpu::AdaBsaMaskArgs a;
    a.dtype = c.dt;
    a.q = dq.get();
    a.k = dk.get();
    a.dims.batch = c.B;
    a.dims.heads_q = c.Hq;
    a.dims.heads_kv = c.Hkv;
    a.dims.len_q = L;
    a.dims.head_dim = d;
    a.scale = plan.scale;
    a.cdf_threshold = c.cdf;
    a.sparsity = c.sparsity;
    a.causal = c.causal;
    a.keep_sink = c.keep_sink;
    a.keep_recent = c.keep_recent;
    a.levels = dl.get();
    st = gpu::ada_bsa_levels_cuda(a, nullptr);
  }
  EXPECT_EQ(PSA_OK, st) << c.name << ": " << psa_last_error_message();
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize()) << c.name << ": " << cudaGetErrorString(cudaGetLastError());
  const std::vector<int8_t> got = dl.download();

  int64_t kept = 0, bad_values = 0, shown = 0;
  res.pairs = static_cast<int64_t>(got.size());
  for (int64_t row = 0; row < c.B * c.Hq * nb; ++row) {
    bool differs = false;
    for (int64_t j = 0; j < nb; ++j) {
      const size_t e = static_cast<size_t>(row * nb + j);
      bad_values += got[e] != 0 && got[e] != 1;
      kept += got[e] == 1;
      if (got[e] != want[e]) {
        ++res.mismatches;
        differs = true;
      }
    }
    if (differs && shown++ < 3)
      std::printf("[methods]   %s (b*h %lld, row %lld): cpu %s\n%*s gpu %s\n", c.name,
                  static_cast<long long>(row / nb), static_cast<long long>(row % nb),
                  row_string(want.data() + row * nb, nb).c_str(),
                  static_cast<int>(std::string(c.name).size()) + 31, "",
                  row_string(got.data() + row * nb, nb).c_str());
  }
  EXPECT_EQ(0, bad_values) << c.name << ": level map entries other than 0/1 (unwritten?)";
  res.density = res.pairs ? static_cast<double>(kept) / static_cast<double>(res.pairs) : 0.0;
  std::printf("[methods] %-7s %-40s nb %4lld  pairs %7lld  density %.4f  mismatches %lld (%.4f%%)\n",
              c.method == PSA_METHOD_RF_V2 ? "rf_v2" : "ada_bsa", c.name, static_cast<long long>(nb),
              static_cast<long long>(res.pairs), res.density, static_cast<long long>(res.mismatches),
              res.pairs ? 100.0 * static_cast<double>(res.mismatches) / static_cast<double>(res.pairs) : 0.0);
  return res;
}

TEST(CudaMethodMask, RfV2LevelsIdenticalToCpu) {
  PSA_REQUIRE_GPU();
  const psa_dtype bf = PSA_DTYPE_BF16, hf = PSA_DTYPE_F16;
  const MaskCase cases[] = {
      // name                                 method            dt  B Hq Hkv  d    t   h   w  text pos  len  sp   cdf causal sink recent input
      {"bf16 B2 GQA unaligned text-first", PSA_METHOD_RF_V2, bf, 2, 4, 2, 64, 8, 10, 13, 77, PSA_TEXT_FIRST, 0, 0.7, 1, false, true, true, Input::kRandom},
      {"f16 aligned text-last video-like", PSA_METHOD_RF_V2, hf, 1, 2, 2, 128, 4, 16, 24, 40, PSA_TEXT_LAST, 0, 0.5, 1, false, true, true, Input::kVideo},
      {"bf16 ternary (exact ties)", PSA_METHOD_RF_V2, bf, 1, 2, 1, 64, 5, 8, 40, 0, PSA_TEXT_NONE, 0, 0.8, 1, false, true, true, Input::kTernary},
      {"f16 ternary unaligned text", PSA_METHOD_RF_V2, hf, 2, 2, 1, 64, 3, 9, 21, 150, PSA_TEXT_FIRST, 0, 0.6, 1, false, true, true, Input::kTernary},
      {"f16 nb 91 sparsity 0.9", PSA_METHOD_RF_V2, hf, 1, 1, 1, 64, 9, 32, 40, 100, PSA_TEXT_LAST, 0, 0.9, 1, false, true, true, Input::kVideo},
      {"bf16 nb 320 (multi-pass loops)", PSA_METHOD_RF_V2, bf, 1, 1, 1, 16, 10, 64, 64, 0, PSA_TEXT_NONE, 0, 0.75, 1, false, true, true, Input::kRandom},
      {"bf16 sparsity 0 (dense map)", PSA_METHOD_RF_V2, bf, 1, 2, 2, 64, 2, 16, 16, 20, PSA_TEXT_FIRST, 0, 0.0, 1, false, true, true, Input::kRandom},
  };
  uint32_t seed = 500;
  for (const MaskCase& c : cases) {
    const MaskResult r = run_case(c, seed += 11);
    EXPECT_EQ(0, r.mismatches) << c.name;
    if (c.sparsity == 0.0) EXPECT_EQ(1.0, r.density) << c.name;
  }
}

TEST(CudaMethodMask, AdaBsaLevelsMatchCpu) {
  PSA_REQUIRE_GPU();
  const psa_dtype bf = PSA_DTYPE_BF16, hf = PSA_DTYPE_F16;
  const psa_text_position none = PSA_TEXT_NONE;
  const MaskCase exact[] = {
      {"ties: cap, bf16", PSA_METHOD_ADA_BSA, bf, 1, 2, 1, 64, 0, 0, 0, 0, none, 14 * 128, 0.6, 1.0, false, true, true, Input::kBlockWeights},
      {"ties: cdf 0.3 + cap, f16", PSA_METHOD_ADA_BSA, hf, 2, 1, 1, 64, 0, 0, 0, 0, none, 14 * 128, 0.5, 0.3, false, true, true, Input::kBlockWeights},
      {"ties: causal, bf16", PSA_METHOD_ADA_BSA, bf, 1, 1, 1, 64, 0, 0, 0, 0, none, 14 * 128, 0.6, 1.0, true, true, true, Input::kBlockWeights},
      {"sparsity 0, cdf 1 (dense map)", PSA_METHOD_ADA_BSA, bf, 1, 2, 2, 64, 0, 0, 0, 0, none, 1500, 0.0, 1.0, false, true, true, Input::kRandom},
  };
  const MaskCase rated[] = {
      {"bf16 B2 GQA L1501 cdf 0.9 cap", PSA_METHOD_ADA_BSA, bf, 2, 4, 2, 64, 0, 0, 0, 0, none, 1501, 0.5, 0.9, false, true, true, Input::kRandom},
      {"f16 d128 video-like no sink", PSA_METHOD_ADA_BSA, hf, 1, 2, 1, 128, 0, 0, 0, 0, none, 2000, 0.7, 1.0, false, false, true, Input::kVideo},
      {"bf16 causal no recent", PSA_METHOD_ADA_BSA, bf, 1, 2, 2, 64, 0, 0, 0, 0, none, 1700, 0.5, 0.8, true, true, false, Input::kRandom},
      {"f16 causal odd length no sink", PSA_METHOD_ADA_BSA, hf, 1, 2, 2, 64, 0, 0, 0, 0, none, 1283, 0.3, 0.95, true, false, true, Input::kVideo},
      {"bf16 ternary cdf 0.7", PSA_METHOD_ADA_BSA, bf, 1, 2, 2, 64, 0, 0, 0, 0, none, 1800, 0.4, 0.7, false, true, true, Input::kTernary},
      {"f16 video grid + text (ignored)", PSA_METHOD_ADA_BSA, hf, 2, 2, 2, 64, 2, 16, 20, 33, PSA_TEXT_FIRST, 0, 0.5, 0.9, false, true, true, Input::kVideo},
      {"bf16 nb 258 d16 (multi-pass loops)", PSA_METHOD_ADA_BSA, bf, 1, 1, 1, 16, 0, 0, 0, 0, none, 32900, 0.8, 0.9, false, true, true, Input::kVideo},
  };
  uint32_t seed = 900;
  for (const MaskCase& c : exact) {
    const MaskResult r = run_case(c, seed += 13);
    EXPECT_EQ(0, r.mismatches) << c.name;
    if (c.sparsity == 0.0 && c.cdf >= 1.0) EXPECT_EQ(1.0, r.density) << c.name;
  }
  int64_t pairs = 0, mismatches = 0;
  for (const MaskCase& c : rated) {
    const MaskResult r = run_case(c, seed += 13);
    pairs += r.pairs;
    mismatches += r.mismatches;
    EXPECT_LE(r.mismatches, std::max<int64_t>(2, r.pairs / 100)) << c.name;
  }
  const double rate = pairs ? static_cast<double>(mismatches) / static_cast<double>(pairs) : 0.0;
  std::printf("[methods] ada_bsa disagreement over %lld pairs of non-tied inputs: %lld (%.5f%%)\n",
              static_cast<long long>(pairs), static_cast<long long>(mismatches), 100.0 * rate);
  EXPECT_LE(rate, 0.005);
}

}  // namespace
}  // namespace psa
