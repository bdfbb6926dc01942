// tests/cuda/importance_cuda_test.cpp -- importance stage on the GPU: offsets equal sample_offsets
// exactly; scores of every path (GEMM with a scratch: sm80 kernel, and the sm90 kernel where the
// device and build have it; per-query-block kernel without) match importance_cpu to fp32 rounding
// (tensor-core dot order) on random and video-like inputs, GQA, Lq != Lk, odd L, 1..128 samples
// per block, several CTA tiles per head, several 64-block chunks, Lk < block_n, few scratch slots.
#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "cuda/importance/importance_cuda.h"
#include "cuda/importance/score_scratch.h"
#include "cuda_test_util.h"
#include "importance/importance.h"
#include "importance/importance_spec.h"
#include "mask/mask.h"
#include "mask/mask_spec.h"

namespace psa {
namespace {

using test::DevBuf;

struct ScoreCase {
  psa_dtype dt;
  int64_t B, Hq, Hkv, Lq, Lk, D, bm, bn, divisor;
  bool video;
  uint64_t seed;
};

// kPerBlock: no scratch. kGemm80 / kGemm90: the GEMM path's sm80 / sm90 kernel with the slots a
// workspace would hold, or (slots > 0) a scratch of that many slots, so each CTA loops over many
// tiles and reuses its slot(s): the sm90 kernel runs slots / 2 CTAs, each alternating between two
// slots that it hands to its finisher warps.
enum class Path { kPerBlock, kGemm80, kGemm90 };

// ScoreArgs::finish_overlap for the sm90 runs (-1: by shape); the sm90 tests run 0 and 1.
int g_finish_overlap = -1;

std::string path_name(Path p, int64_t slots) {
  std::string n = p == Path::kPerBlock ? "per-block" : p == Path::kGemm80 ? "gemm sm80" : "gemm sm90";
  return slots > 0 ? n + "/" + std::to_string(slots) + " slots" : n;
}

// Head-major rows [B][H][L][D] -> the caller layout BSND (strides bsnd_strides), problem row x
// at caller row rows[x] (rows NULL: x).
void bsnd_strides(int64_t H, int64_t L, int64_t D, int64_t st[4]) {
  st[0] = L * H * D;
  st[1] = D;
  st[2] = H * D;
  st[3] = 1;
}
std::vector<uint16_t> to_bsnd(const std::vector<uint16_t>& bits, int64_t B, int64_t H, int64_t L, int64_t D,
                              const int64_t* rows) {
  int64_t st[4];
  bsnd_strides(H, L, D, st);
  std::vector<uint16_t> out(bits.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t x = 0; x < L; ++x)
        std::copy_n(bits.data() + ((b * H + h) * L + x) * D, D,
                    out.data() + b * st[0] + h * st[1] + (rows != nullptr ? rows[x] : x) * st[2]);
  return out;
}

// The case's sample offsets drawn on the GPU into qoff / koff, and the score arguments every
// path shares (geometry, offsets, counts, scale; no tensors, outputs or scratch).
void draw_offsets(const ScoreCase& c, int32_t qs, int32_t ks, int32_t* qoff, int32_t* koff) {
  gpu::OffsetArgs oa;
  oa.seed = c.seed;
  oa.dims.batch = c.B;
  oa.dims.heads_q = c.Hq;
  oa.dims.block_m = static_cast<int32_t>(c.bm);
  oa.q_count = qs;
  oa.dims.block_n = static_cast<int32_t>(c.bn);
  oa.k_count = ks;
  oa.q_off = qoff;
  oa.k_off = koff;
  ASSERT_EQ(PSA_OK, gpu::sample_offsets_cuda(oa, nullptr)) << psa_last_error_message();
}
gpu::ScoreArgs case_score_args(const ScoreCase& c, int32_t qs, int32_t ks, const int32_t* qoff, const int32_t* koff) {
  gpu::ScoreArgs sa;
  sa.dtype = c.dt;
  sa.dims.batch = c.B;
  sa.dims.heads_q = c.Hq;
  sa.dims.heads_kv = c.Hkv;
  sa.dims.len_q = c.Lq;
  sa.dims.len_k = c.Lk;
  sa.dims.head_dim = c.D;
  sa.dims.block_m = c.bm;
  sa.dims.block_n = c.bn;
  sa.q_off = qoff;
  sa.k_off = koff;
  sa.q_count = qs;
  sa.k_count = ks;
  sa.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  return sa;
}

// A case's Q on the device, bound into ScoreArgs. in_place: uploaded as [B, Lq, Hq, D] (strided)
// with problem row x at caller row perm[x] (a shuffle seeded by the case) and read through
// q_stride / q_rows, as the PSA forward reads the caller's Q; else head-major [B, Hq, Lq, D].
struct DeviceQ {
  DevBuf<uint16_t> q;
  DevBuf<int64_t> rows;
  int64_t stride[4] = {0, 0, 0, 0};
  bool in_place = false;

  DeviceQ(const ScoreCase& c, int64_t D, const std::vector<uint16_t>& bits, bool place) : in_place(place) {
    if (!in_place) {
      q.alloc(bits.size());
      q.upload(bits);
      return;
    }
    std::vector<int64_t> perm(static_cast<size_t>(c.Lq));
    for (int64_t x = 0; x < c.Lq; ++x) perm[static_cast<size_t>(x)] = x;
    std::shuffle(perm.begin(), perm.end(), std::mt19937(static_cast<uint32_t>(c.seed) + 5u));
    bsnd_strides(c.Hq, c.Lq, D, stride);
    const std::vector<uint16_t> placed = to_bsnd(bits, c.B, c.Hq, c.Lq, D, perm.data());
    q.alloc(placed.size());
    q.upload(placed);
    rows.alloc(perm.size());
    rows.upload(perm);
  }
  void bind(gpu::ScoreArgs& sa) const {
    sa.q = q.get();
    if (in_place) {
      std::copy(stride, stride + 4, sa.q_stride);
      sa.q_rows = rows.get();
    }
  }
};

// q_in_place: Q read in place (DeviceQ). k_strided: k is uploaded as [B, Lk, Hkv, D] and read
// through k_stride, as the forward reads the caller's K when it does not rearrange keys.
void run_scores(const ScoreCase& c, Path path, int64_t slot_override = 0, bool q_in_place = false,
                bool k_strided = false) {
  const int32_t qs = static_cast<int32_t>(c.bm / c.divisor), ks = static_cast<int32_t>(c.bn / c.divisor);
  const int64_t mq = (c.Lq + c.bm - 1) / c.bm, nk = (c.Lk + c.bn - 1) / c.bn;
  test::Tensor16 q = c.video ? test::make_video_like(c.B * c.Hq, c.Lq, c.D, c.dt, 21u)
                             : test::make_random(static_cast<size_t>(c.B * c.Hq * c.Lq * c.D), c.dt, 22u);
  test::Tensor16 k = c.video ? test::make_video_like(c.B * c.Hkv, c.Lk, c.D, c.dt, 23u)
                             : test::make_random(static_cast<size_t>(c.B * c.Hkv * c.Lk * c.D), c.dt, 24u);
  int64_t kst[4];
  bsnd_strides(c.Hkv, c.Lk, c.D, kst);
  const DeviceQ dq(c, c.D, q.bits, q_in_place);
  DevBuf<uint16_t> dk(k_strided ? to_bsnd(k.bits, c.B, c.Hkv, c.Lk, c.D, nullptr) : k.bits);
  DevBuf<int32_t> qoff(static_cast<size_t>(c.B * c.Hq * qs)), koff(static_cast<size_t>(c.B * c.Hq * ks));
  DevBuf<float> scores(static_cast<size_t>(c.B * c.Hq * mq * nk));
  scores.fill_bytes(0xff);
  int64_t slots = 0;
  if (path != Path::kPerBlock) ASSERT_EQ(PSA_OK, gpu::score_scratch_slots(&slots)) << psa_last_error_message();
  if (slot_override > 0) slots = slot_override;
  // Counts that are not powers of two get one slot anyway: the entry must fall back by itself.
  uint64_t scratch_bytes = gpu::score_scratch_bytes(c.B * c.Hq, mq, nk, qs, ks, slots);
  if (path != Path::kPerBlock && scratch_bytes == 0) scratch_bytes = gpu::score_scratch_slot_bytes(nk);
  DevBuf<float> scratch(static_cast<size_t>(scratch_bytes / sizeof(float)));
  scratch.fill_bytes(0xff);
  draw_offsets(c, qs, ks, qoff.get(), koff.get());
  gpu::ScoreArgs sa = case_score_args(c, qs, ks, qoff.get(), koff.get());
  dq.bind(sa);
  sa.k = dk.get();
  if (k_strided) std::copy(kst, kst + 4, sa.k_stride);
  sa.scores = scores.get();
  sa.scratch = path == Path::kPerBlock ? nullptr : scratch.get();
  sa.scratch_bytes = path == Path::kPerBlock ? 0 : scratch_bytes;
  sa.kernel = path == Path::kGemm90 ? gpu::ScoreKernel::kSm90 : gpu::ScoreKernel::kSm80;
  sa.finish_overlap = g_finish_overlap;
  ASSERT_EQ(PSA_OK, gpu::block_scores_cuda(sa, nullptr)) << psa_last_error_message();
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  const std::vector<int32_t> gq = qoff.download(), gk = koff.download();
  const std::vector<float> gs = scores.download();

  std::vector<int32_t> scratch_h(256), hq(static_cast<size_t>(qs)), hk(static_cast<size_t>(ks));
  std::vector<float> ref(static_cast<size_t>(mq * nk));
  int64_t exact = 0, total = 0;
  double max_rel = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t bh = b * c.Hq + h;
      sample_offsets(c.seed, b, h, kSampleQuery, static_cast<int32_t>(c.bm), qs, scratch_h.data(), hq.data());
      sample_offsets(c.seed, b, h, kSampleKey, static_cast<int32_t>(c.bn), ks, scratch_h.data(), hk.data());
      for (int32_t t = 0; t < qs; ++t) ASSERT_EQ(hq[t], gq[bh * qs + t]) << "q offset " << t << " of (b,h)=" << bh;
      for (int32_t t = 0; t < ks; ++t) ASSERT_EQ(hk[t], gk[bh * ks + t]) << "k offset " << t << " of (b,h)=" << bh;
      const int64_t hkv = h / (c.Hq / c.Hkv);
      importance_cpu(q.f.data() + bh * c.Lq * c.D, c.Lq, k.f.data() + (b * c.Hkv + hkv) * c.Lk * c.D, c.Lk, c.D,
                     c.bm, c.bn, hq.data(), qs, hk.data(), ks, sa.scale, ref.data());
      for (int64_t e = 0; e < mq * nk; ++e) {
        const float g = gs[static_cast<size_t>(bh * mq * nk + e)], r = ref[static_cast<size_t>(e)];
        ++total;
        exact += g == r;
        const double rel = std::fabs(static_cast<double>(g) - r) / std::max(1e-30, static_cast<double>(std::fabs(r)));
        if (!(rel <= max_rel)) max_rel = rel;
      }
    }
  std::printf("[importance %s%s] %s D=%lld Lq=%lld Lk=%lld bm=%lld bn=%lld div=%lld (%d/%d samples) %s: "
              "%lld/%lld scores bit-identical, max rel diff %.3g\n",
              path_name(path, slot_override).c_str(), q_in_place ? (k_strided ? ", q in place, k strided" : ", q in place") : "", c.dt == PSA_DTYPE_F16 ? "f16" : "bf16", static_cast<long long>(c.D),
              static_cast<long long>(c.Lq), static_cast<long long>(c.Lk), static_cast<long long>(c.bm),
              static_cast<long long>(c.bn), static_cast<long long>(c.divisor), qs, ks,
              c.video ? "video" : "random", static_cast<long long>(exact), static_cast<long long>(total), max_rel);
  EXPECT_LE(max_rel, 2e-4) << path_name(path, slot_override);
}

const ScoreCase kCases[] = {
    {PSA_DTYPE_BF16, 2, 4, 2, 1000, 1000, 64, 128, 64, 4, false, 0},
    {PSA_DTYPE_BF16, 1, 3, 1, 777, 901, 128, 128, 32, 4, true, 5},    // MQA, Lq != Lk, odd
    {PSA_DTYPE_F16, 1, 2, 2, 300, 1500, 128, 64, 128, 4, false, 9},
    {PSA_DTYPE_BF16, 1, 2, 2, 513, 513, 64, 128, 128, 1, true, 3},     // 128 key samples per block
    {PSA_DTYPE_F16, 2, 2, 1, 640, 600, 64, 64, 32, 16, false, 77},     // 2 key samples
    {PSA_DTYPE_BF16, 1, 2, 1, 3000, 2900, 128, 128, 128, 4, true, 11}, // 3 CTA tiles per head
    {PSA_DTYPE_F16, 1, 2, 2, 2100, 1333, 64, 128, 64, 2, false, 12},   // 64 q / 32 k, d64
    {PSA_DTYPE_BF16, 1, 1, 1, 700, 1100, 128, 128, 32, 32, false, 13}, // 4 q / 1 k
    {PSA_DTYPE_BF16, 1, 2, 1, 900, 800, 64, 64, 32, 8, true, 14},      // 8 q / 4 k
    {PSA_DTYPE_F16, 1, 1, 1, 1100, 1000, 128, 128, 128, 128, false, 15}, // 1 q / 1 k
    {PSA_DTYPE_BF16, 1, 2, 2, 600, 700, 128, 64, 128, 2, false, 16},   // 32 q / 64 k
    {PSA_DTYPE_BF16, 1, 2, 1, 800, 800, 128, 128, 128, 3, false, 17},  // 42 samples: per-block fallback
    {PSA_DTYPE_BF16, 1, 2, 1, 600, 5000, 128, 128, 32, 4, true, 18},   // 156 full blocks: 64 + 64 + 28
    {PSA_DTYPE_F16, 1, 1, 1, 300, 9000, 64, 64, 64, 4, false, 19},     // 140 full blocks: 64 + 64 + 12
    {PSA_DTYPE_BF16, 1, 2, 2, 300, 100, 64, 64, 128, 4, false, 20},    // Lk < block_n: no full block
    {PSA_DTYPE_F16, 1, 2, 1, 500, 4096, 128, 128, 64, 4, true, 21},    // 64 full blocks, no partial one
};

TEST(CudaImportance, OffsetsAndScoresMatchCpu) {
  PSA_REQUIRE_GPU();
  for (const ScoreCase& c : kCases) run_scores(c, Path::kPerBlock);
}

TEST(CudaImportance, GemmScoresMatchCpu) {
  PSA_REQUIRE_GPU();
  for (const ScoreCase& c : kCases) run_scores(c, Path::kGemm80);
}

TEST(CudaImportance, GemmSm90ScoresMatchCpu) {
  PSA_REQUIRE_GPU();
  if (!gpu::score_sm90_available()) GTEST_SKIP() << "no sm_90a score kernel for this device/build";
  for (const int overlap : {0, 1}) {
    g_finish_overlap = overlap;
    for (const ScoreCase& c : kCases) run_scores(c, Path::kGemm90);
  }
  g_finish_overlap = -1;
}

TEST(CudaImportance, GemmScoresWithFewSlotsMatchCpu) {
  PSA_REQUIRE_GPU();
  for (const Path path : {Path::kGemm80, Path::kGemm90}) {
    if (path == Path::kGemm90 && !gpu::score_sm90_available()) continue;
    // 2 slots: one sm90 CTA over every tile. 3: still one (its third slot unused). 6: three
    // CTAs with 3, 3 and 2 tiles of kCases[0] (8 tiles) and 2 each of kCases[5] (6 tiles).
    for (const int64_t slots : {2, 3, 6})
      for (const int overlap : {0, 1}) {
        g_finish_overlap = overlap;  // sm90: finish after the sweep, then on the finisher warps
        run_scores(kCases[0], path, slots);
        run_scores(kCases[5], path, slots);
      }
    g_finish_overlap = -1;
    run_scores(kCases[6], path, 2);
    run_scores(kCases[12], path, 2);
  }
}

// The 8-bit rule (precision fp8; ScoreArgs::k8) on the sm90 kernel against importance_int8_cpu:
// int8 K codes and per-block scales drawn at random ([B*Hkv, Lk, 128] and [B*Hkv, 4, Nk], levels
// 2-8 of the scales NaN: never read), Q 16-bit as the forward passes it. With `nonfinite`, one key
// block's scale is NaN (a block holding a non-finite value) and every 7th token of Q holds +-inf
// in one channel (a sampled row with one scores nothing). Scores and tie masses (every row's)
// must match to the row sum's order; the logits are exact integers times the same fp32 products.
void run_scores_int8(const ScoreCase& c, int overlap, bool nonfinite, bool q_in_place = false) {
  const int32_t qs = static_cast<int32_t>(c.bm / c.divisor), ks = static_cast<int32_t>(c.bn / c.divisor);
  const int64_t mq = (c.Lq + c.bm - 1) / c.bm, nk = (c.Lk + c.bn - 1) / c.bn, D = 128;
  ASSERT_EQ(c.D, D);
  test::Tensor16 q = c.video ? test::make_video_like(c.B * c.Hq, c.Lq, D, c.dt, 41u + static_cast<uint32_t>(c.seed))
                             : test::make_random(static_cast<size_t>(c.B * c.Hq * c.Lq * D), c.dt,
                                                 42u + static_cast<uint32_t>(c.seed), 2.0f);
  std::mt19937 gen(static_cast<uint32_t>(c.seed) * 31u + 7u);
  if (nonfinite)
    for (int64_t r = 3; r < c.B * c.Hq * c.Lq; r += 7) {
      const float v = (r / 7) % 2 ? INFINITY : -INFINITY;
      q.f[static_cast<size_t>(r * D + 5)] = v;
      q.bits[static_cast<size_t>(r * D + 5)] = test::to16(v, c.dt);
    }
  const int64_t heads_kv = c.B * c.Hkv;
  std::vector<int8_t> k8(static_cast<size_t>(heads_kv * c.Lk * D));
  std::vector<float> k8f(k8.size());
  std::uniform_int_distribution<int> code(-127, 127);
  for (size_t i = 0; i < k8.size(); ++i) {
    k8[i] = static_cast<int8_t>(code(gen));
    k8f[i] = k8[i];
  }
  std::vector<float> kscale(static_cast<size_t>(heads_kv * 4 * nk), std::nanf(""));
  std::uniform_real_distribution<float> expo(-9.0f, -5.0f);
  for (int64_t h = 0; h < heads_kv; ++h)
    for (int64_t j = 0; j < nk; ++j) kscale[static_cast<size_t>(h * 4 * nk + j)] = std::exp2(expo(gen));
  if (nonfinite) kscale[static_cast<size_t>(std::min<int64_t>(nk - 1, 2))] = std::nanf("");
  const DeviceQ dq(c, D, q.bits, q_in_place);
  DevBuf<int8_t> dk8(k8);
  DevBuf<float> dks(kscale);
  DevBuf<int32_t> qoff(static_cast<size_t>(c.B * c.Hq * qs)), koff(static_cast<size_t>(c.B * c.Hq * ks));
  DevBuf<float> scores(static_cast<size_t>(c.B * c.Hq * mq * nk)), ties(scores.size());
  scores.fill_bytes(0xff);
  ties.fill_bytes(0xff);
  int64_t slots = 0;
  ASSERT_EQ(PSA_OK, gpu::score_scratch_slots(&slots)) << psa_last_error_message();
  const uint64_t scratch_bytes = gpu::score_scratch_bytes(c.B * c.Hq, mq, nk, qs, ks, slots);
  ASSERT_GT(scratch_bytes, 0u);
  DevBuf<float> scratch(static_cast<size_t>(scratch_bytes / sizeof(float)));
  draw_offsets(c, qs, ks, qoff.get(), koff.get());
  gpu::ScoreArgs sa = case_score_args(c, qs, ks, qoff.get(), koff.get());
  dq.bind(sa);
  sa.k8 = dk8.get();
  sa.k_scale = dks.get();
  sa.scores = scores.get();
  sa.ties = ties.get();
  sa.scratch = scratch.get();
  sa.scratch_bytes = scratch_bytes;
  sa.finish_overlap = overlap;
  ASSERT_EQ(PSA_OK, gpu::block_scores_cuda(sa, nullptr)) << psa_last_error_message();
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  const std::vector<int32_t> gq = qoff.download(), gk = koff.download();
  const std::vector<float> gs = scores.download(), gt = ties.download();
  std::vector<float> ref(static_cast<size_t>(mq * nk)), tref(ref.size());
  int64_t exact = 0, texact = 0, total = 0, zero_rows = 0;
  double max_rel = 0, tmax_rel = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h) {
      const int64_t bh = b * c.Hq + h, kv = b * c.Hkv + h / (c.Hq / c.Hkv);
      const Int8Keys keys{k8f.data() + kv * c.Lk * D, kscale.data() + kv * 4 * nk};
      importance_int8_cpu(q.f.data() + bh * c.Lq * D, c.Lq, keys, c.Lk, D, c.bm, c.bn, gq.data() + bh * qs, qs,
                          gk.data() + bh * ks, ks, sa.scale, ref.data(), tref.data());
      for (int64_t i = 0; i < mq; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < nk; ++j) sum += ref[static_cast<size_t>(i * nk + j)];
        zero_rows += sum == 0.0;
      }
      for (int64_t e = 0; e < mq * nk; ++e) {
        const float g = gs[static_cast<size_t>(bh * mq * nk + e)], r = ref[static_cast<size_t>(e)];
        const float gtie = gt[static_cast<size_t>(bh * mq * nk + e)], rtie = tref[static_cast<size_t>(e)];
        ++total;
        exact += g == r;
        texact += gtie == rtie;
        const double rel = std::fabs(static_cast<double>(g) - r) / std::max(1e-30, static_cast<double>(std::fabs(r)));
        if (!(rel <= max_rel)) max_rel = rel;
        const double trel = std::fabs(static_cast<double>(gtie) - rtie) / std::max(1e-30, static_cast<double>(std::fabs(rtie)));
        if (!(trel <= tmax_rel)) tmax_rel = trel;
      }
    }
  std::printf("[importance int8%s%s] %s Lq=%lld Lk=%lld bm=%lld bn=%lld (%d/%d samples) %s, overlap %d: "
              "%lld/%lld scores and %lld tie masses bit-identical, max rel diff %.3g / %.3g, %lld all-zero rows\n",
              nonfinite ? ", non-finite" : "", q_in_place ? ", q in place" : "", c.dt == PSA_DTYPE_F16 ? "f16" : "bf16",
              static_cast<long long>(c.Lq), static_cast<long long>(c.Lk), static_cast<long long>(c.bm),
              static_cast<long long>(c.bn), qs, ks, c.video ? "video" : "random", overlap,
              static_cast<long long>(exact), static_cast<long long>(total), static_cast<long long>(texact), max_rel,
              tmax_rel, static_cast<long long>(zero_rows));
  EXPECT_LE(max_rel, 2e-4);
  EXPECT_LE(tmax_rel, 2e-4);
  EXPECT_GT(exact, total / 2);  // the logits are the oracle's bits; only the row sum's order differs
}

TEST(CudaImportance, GemmSm90Int8ScoresMatchCpu) {
  PSA_REQUIRE_GPU();
  if (!gpu::score_sm90_available()) GTEST_SKIP() << "no sm_90a score kernel for this device/build";
  const ScoreCase extra[] = {
      {PSA_DTYPE_BF16, 1, 2, 2, 300, 100, 128, 64, 128, 4, false, 30},    // Lk < block_n: no full block
      {PSA_DTYPE_BF16, 1, 4, 2, 1200, 5200, 128, 128, 64, 8, true, 31},   // 81 full blocks + a partial one
      {PSA_DTYPE_F16, 2, 2, 2, 2000, 2048, 128, 128, 16, 2, false, 32},   // 128 blocks of 16, no partial
  };
  int ran = 0;
  for (const int overlap : {0, 1}) {
    for (const ScoreCase& c : kCases) {
      const int64_t qs = c.bm / c.divisor, ks = c.bn / c.divisor;
      if (c.D != 128 || !gpu::score_gemm_supported(qs, ks)) continue;
      run_scores_int8(c, overlap, false);
      ++ran;
    }
    for (const ScoreCase& c : extra) run_scores_int8(c, overlap, false);
  }
  for (const ScoreCase& c : extra) run_scores_int8(c, -1, true);
  run_scores_int8(kCases[5], -1, true);
  run_scores_int8(kCases[5], -1, false, true);  // Q read in place through a row permutation
  EXPECT_GE(ran, 12);
  // Sample counts the GEMM path cannot take are refused, and nothing is written.
  const ScoreCase& odd = kCases[11];  // 42 samples per block
  DevBuf<int8_t> k8(static_cast<size_t>(odd.Lk * 128));
  DevBuf<float> ks(64), scores(static_cast<size_t>(odd.Hq * 7 * 7)), scratch(1 << 20);
  DevBuf<uint16_t> q(static_cast<size_t>(odd.Hq * odd.Lq * 128));
  DevBuf<int32_t> off(256);
  scores.fill_bytes(0x7f);
  gpu::ScoreArgs sa;
  sa.q = q.get();
  sa.k8 = k8.get();
  sa.k_scale = ks.get();
  sa.dims.batch = 1;
  sa.dims.heads_q = odd.Hq;
  sa.dims.heads_kv = odd.Hkv;
  sa.dims.len_q = odd.Lq;
  sa.dims.len_k = odd.Lk;
  sa.dims.head_dim = 128;
  sa.dims.block_m = 128;
  sa.dims.block_n = 128;
  sa.q_off = off.get();
  sa.k_off = off.get();
  sa.q_count = sa.k_count = 42;
  sa.scale = 0.1f;
  sa.scores = scores.get();
  sa.scratch = scratch.get();
  sa.scratch_bytes = 4u << 20;
  EXPECT_EQ(PSA_ERR_UNSUPPORTED, gpu::block_scores_cuda(sa, nullptr));
  EXPECT_NE(std::string(psa_last_error_message()).find("42/42"), std::string::npos) << psa_last_error_message();
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
  for (float v : scores.download()) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    ASSERT_EQ(bits, 0x7f7f7f7fu);
  }
}

// Q read in place (strided BSND, rows through a random permutation) on every path, and K read
// through BSND strides.
TEST(CudaImportance, ScoresReadQInPlaceThroughRowIndex) {
  PSA_REQUIRE_GPU();
  for (const Path path : {Path::kPerBlock, Path::kGemm80, Path::kGemm90}) {
    if (path == Path::kGemm90 && !gpu::score_sm90_available()) continue;
    for (const int ci : {0, 1, 5, 6}) run_scores(kCases[ci], path, 0, true);
    if (path != Path::kPerBlock) run_scores(kCases[5], path, 2, true);
    // K read in place too (BSND strides; GQA, MQA and a partial last key block among them).
    for (const int ci : {0, 1, 5, 6, 12}) run_scores(kCases[ci], path, 0, true, true);
  }
}

// Informative timings of the paths on the standard shapes (bf16, batch 1, 128x128 blocks, divisor
// 4; Wan2.1-1.3B also with 32-key blocks as psa_topk): per-block kernel, GEMM sm80, GEMM sm90 (where
// available; sm90 also with the tie masses: every row's, and only where a top run is longer than
// the bound a forward may pass; and with Q read in place through a row permutation), and how far
// the GEMM kernels' scores are from the per-block kernel's (the last sm90 run's scores: Q in
// place).
// Disabled by default: run with --gtest_also_run_disabled_tests.
TEST(CudaImportance, DISABLED_StandardShapeTimings) {
  PSA_REQUIRE_GPU();
  struct Shape {
    const char* name;
    int64_t H, L, D, bn;
  };
  const Shape shapes[] = {{"cogvideox", 48, 17776, 64, 128},
                          {"cogvideox/bn64", 48, 17776, 64, 64},
                          {"cogvideox/bn32", 48, 17776, 64, 32},
                          {"wan13", 12, 32760, 128, 128},
                          {"wan13/bn32", 12, 32760, 128, 32},
                          {"wan13/bn64", 12, 32760, 128, 64},
                          {"wan14", 40, 75600, 128, 128},
                          {"wan14/bn64", 40, 75600, 128, 64}};
  const bool sm90 = gpu::score_sm90_available();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (const Shape& s : shapes) {
    if (!test::shape_selected("PSA_IMPORTANCE_SHAPES", s.name)) continue;
    const int64_t bm = 128, mq = (s.L + bm - 1) / bm, nk = (s.L + s.bn - 1) / s.bn;
    const int32_t qs = 32, ks = static_cast<int32_t>(s.bn / 4);
    const size_t per_head = static_cast<size_t>(s.L * s.D);
    const test::Tensor16 hq = test::make_random(per_head, PSA_DTYPE_BF16, 31u);
    const test::Tensor16 hk = test::make_random(per_head, PSA_DTYPE_BF16, 32u);
    DevBuf<uint16_t> q(per_head * static_cast<size_t>(s.H)), k(per_head * static_cast<size_t>(s.H));
    for (int64_t h = 0; h < s.H; ++h) {  // fresh data per head: shift the one random head by h rows
      const size_t shift = static_cast<size_t>(h * 7 % s.L) * static_cast<size_t>(s.D);
      PSA_CUDA_OK(cudaMemcpy(q.get() + h * per_head, hq.bits.data() + shift, (per_head - shift) * 2, cudaMemcpyHostToDevice));
      PSA_CUDA_OK(cudaMemcpy(q.get() + h * per_head + (per_head - shift), hq.bits.data(), shift * 2, cudaMemcpyHostToDevice));
      PSA_CUDA_OK(cudaMemcpy(k.get() + h * per_head, hk.bits.data() + shift, (per_head - shift) * 2, cudaMemcpyHostToDevice));
      PSA_CUDA_OK(cudaMemcpy(k.get() + h * per_head + (per_head - shift), hk.bits.data(), shift * 2, cudaMemcpyHostToDevice));
    }
    DevBuf<int32_t> qoff(static_cast<size_t>(s.H * qs)), koff(static_cast<size_t>(s.H * ks));
    DevBuf<float> ref(static_cast<size_t>(s.H * mq * nk)), got80(ref.size()), got90(ref.size());
    int64_t slots = 0;
    ASSERT_EQ(PSA_OK, gpu::score_scratch_slots(&slots));
    const uint64_t scratch_bytes = gpu::score_scratch_bytes(s.H, mq, nk, qs, ks, slots);
    DevBuf<unsigned char> scratch(scratch_bytes);
    gpu::OffsetArgs oa;
    oa.seed = 7;
    oa.dims.batch = 1;
    oa.dims.heads_q = s.H;
    oa.dims.block_m = static_cast<int32_t>(bm);
    oa.q_count = qs;
    oa.dims.block_n = static_cast<int32_t>(s.bn);
    oa.k_count = ks;
    oa.q_off = qoff.get();
    oa.k_off = koff.get();
    ASSERT_EQ(PSA_OK, gpu::sample_offsets_cuda(oa, nullptr));
    gpu::ScoreArgs sa;
    sa.q = q.get();
    sa.k = k.get();
    sa.dims.batch = 1;
    sa.dims.heads_q = s.H;
    sa.dims.heads_kv = s.H;
    sa.dims.len_q = s.L;
    sa.dims.len_k = s.L;
    sa.dims.head_dim = s.D;
    sa.dims.block_m = bm;
    sa.dims.block_n = s.bn;
    sa.q_off = qoff.get();
    sa.k_off = koff.get();
    sa.q_count = qs;
    sa.k_count = ks;
    sa.scale = 1.0f / std::sqrt(static_cast<float>(s.D));
    auto time_ms = [&](float* out, void* scr, uint64_t bytes, int reps, gpu::ScoreKernel kernel) {
      sa.scores = out;
      sa.scratch = scr;
      sa.scratch_bytes = bytes;
      sa.kernel = kernel;
      EXPECT_EQ(PSA_OK, gpu::block_scores_cuda(sa, nullptr)) << psa_last_error_message();
      std::vector<float> ms;
      for (int r = 0; r < reps; ++r) {
        cudaEventRecord(e0, nullptr);
        gpu::block_scores_cuda(sa, nullptr);
        cudaEventRecord(e1, nullptr);
        cudaEventSynchronize(e1);
        float m = 0;
        cudaEventElapsedTime(&m, e0, e1);
        ms.push_back(m);
      }
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2];
    };
    const int reps = s.H * s.L > 1000000 ? 3 : 7;
    const float old_ms = time_ms(ref.get(), nullptr, 0, reps, gpu::ScoreKernel::kSm80);
    const float ms80 = time_ms(got80.get(), scratch.get(), scratch_bytes, 2 * reps + 1, gpu::ScoreKernel::kSm80);
    const float ms90 =
        sm90 ? time_ms(got90.get(), scratch.get(), scratch_bytes, 2 * reps + 1, gpu::ScoreKernel::kSm90) : 0.0f;
    const int auto_overlap = sa.finish_overlap;
    float ms90_mode[2] = {0.0f, 0.0f};  // finish after the sweep / on the finisher warps
    for (int m = 0; m < 2 && sm90; ++m) {
      sa.finish_overlap = m;
      ms90_mode[m] = time_ms(got90.get(), scratch.get(), scratch_bytes, 2 * reps + 1, gpu::ScoreKernel::kSm90);
    }
    // The same two with the tie masses (the forward's default, importance_spec.h tie_mass).
    float ms90_ties[2] = {0.0f, 0.0f};
    DevBuf<float> ties(sm90 ? ref.size() : 0);
    for (int m = 0; m < 2 && sm90; ++m) {
      sa.finish_overlap = m;
      sa.ties = ties.get();
      ms90_ties[m] = time_ms(got90.get(), scratch.get(), scratch_bytes, 2 * reps + 1, gpu::ScoreKernel::kSm90);
    }
    // And in the auto mode with tie_run_min at the first interval end of the reference's topk
    // ends (MaskRowParams' defaults, pyramid:ref-default's), which a forward passes when it is at
    // least half the sampled rows.
    const MaskRowParams ref_row;
    const int64_t bound = topk_unsplit_top_run(nk, ref_row.ratio_end, s.bn, ref_row.tile_n);
    float ms90_bound = 0.0f;
    if (sm90) {
      sa.finish_overlap = auto_overlap;
      sa.tie_run_min = static_cast<int32_t>(bound);
      ms90_bound = time_ms(got90.get(), scratch.get(), scratch_bytes, 2 * reps + 1, gpu::ScoreKernel::kSm90);
      sa.tie_run_min = 0;
    }
    sa.ties = nullptr;
    // And with Q read as a rearranged forward reads it: in place from the caller's [1, L, H, D]
    // (BSND), problem row x at caller row perm[x] (a random permutation); same scores.
    float ms90_qip = 0.0f;
    if (sm90) {
      std::vector<int64_t> perm(static_cast<size_t>(s.L));
      for (int64_t x = 0; x < s.L; ++x) perm[static_cast<size_t>(x)] = x;
      std::shuffle(perm.begin(), perm.end(), std::mt19937(9u));
      std::vector<uint16_t> qc(per_head * static_cast<size_t>(s.H));
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t x = 0; x < s.L; ++x)
          std::copy_n(hq.bits.data() + ((x + h * 7 % s.L) % s.L) * s.D, s.D,
                      qc.data() + (perm[static_cast<size_t>(x)] * s.H + h) * s.D);
      DevBuf<uint16_t> dqc(qc);
      DevBuf<int64_t> dperm(perm);
      const int64_t qst[4] = {s.L * s.H * s.D, s.D, s.H * s.D, 1};
      sa.q = dqc.get();
      std::copy(qst, qst + 4, sa.q_stride);
      sa.q_rows = dperm.get();
      ms90_qip = time_ms(got90.get(), scratch.get(), scratch_bytes, 2 * reps + 1, gpu::ScoreKernel::kSm90);
      PSA_CUDA_OK(cudaDeviceSynchronize());
      sa.q = q.get();
      std::fill(sa.q_stride, sa.q_stride + 3, int64_t{0});
      sa.q_rows = nullptr;
    }
    // The 8-bit rule (precision fp8) at head dim 128: random int8 codes and block scales; alone,
    // and with the tie masses under the bound as a forward runs it.
    float ms90_i8 = 0.0f, ms90_i8_bound = 0.0f;
    if (sm90 && s.D == 128) {
      std::vector<int8_t> k8(per_head * static_cast<size_t>(s.H));
      std::mt19937 gen(5u);
      for (int8_t& v : k8) v = static_cast<int8_t>(static_cast<int>(gen() % 255u) - 127);
      std::vector<float> kscale(static_cast<size_t>(s.H * 4 * nk), 1.0f / 64.0f);
      DevBuf<int8_t> dk8(k8);
      DevBuf<float> dks(kscale);
      sa.k8 = dk8.get();
      sa.k_scale = dks.get();
      sa.finish_overlap = auto_overlap;
      ms90_i8 = time_ms(got90.get(), scratch.get(), scratch_bytes, 2 * reps + 1, gpu::ScoreKernel::kSm90);
      sa.ties = ties.get();
      sa.tie_run_min = static_cast<int32_t>(bound);
      ms90_i8_bound = time_ms(got90.get(), scratch.get(), scratch_bytes, 2 * reps + 1, gpu::ScoreKernel::kSm90);
      PSA_CUDA_OK(cudaDeviceSynchronize());
      sa.ties = nullptr;
      sa.tie_run_min = 0;
      sa.k8 = nullptr;
      sa.k_scale = nullptr;
      // got90 holds the int8 rule's scores now: the 16-bit run again for the comparison below
      time_ms(got90.get(), scratch.get(), scratch_bytes, 1, gpu::ScoreKernel::kSm90);
    }
    sa.finish_overlap = auto_overlap;
    PSA_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<float> a = ref.download();
    const double flop = 2.0 * s.H * static_cast<double>(mq * qs) * static_cast<double>(nk * ks) * s.D;
    double max_rel = 0;
    auto compare = [&](const DevBuf<float>& got, int64_t* same) {
      const std::vector<float> g = got.download();
      *same = 0;
      double rel_max = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        *same += a[i] == g[i];
        const double rel = std::fabs(static_cast<double>(g[i]) - a[i]) / std::max(1e-30, static_cast<double>(std::fabs(a[i])));
        if (!(rel <= rel_max)) rel_max = rel;
      }
      if (!(rel_max <= max_rel)) max_rel = rel_max;
      return rel_max;
    };
    int64_t same80 = 0, same90 = 0;
    const double rel80 = compare(got80, &same80);
    std::printf("[importance timing] %-10s per-block %8.3f ms | sm80 %7.3f ms (%.0f TFLOP/s) %lld/%zu identical, "
                "max rel %.3g",
                s.name, old_ms, ms80, flop / ms80 * 1e-9, static_cast<long long>(same80), a.size(), rel80);
    if (sm90) {
      const double rel90 = compare(got90, &same90);
      std::printf(" | sm90 %7.3f ms (%.0f TFLOP/s) %lld/%zu identical, max rel %.3g | sm80/sm90 %.2fx"
                  " | sm90 finish after sweep %.3f ms, on finisher warps %.3f ms"
                  " | with tie masses %.3f ms, %.3f ms; auto, runs up to %lld without them %.3f ms"
                  " | q in place (BSND, permuted rows) %.3f ms",
                  ms90, flop / ms90 * 1e-9, static_cast<long long>(same90), a.size(), rel90, ms80 / ms90,
                  ms90_mode[0], ms90_mode[1], ms90_ties[0], ms90_ties[1], static_cast<long long>(bound), ms90_bound,
                  ms90_qip);
    }
    if (ms90_i8 > 0.0f)
      std::printf(" | int8 rule %.3f ms (%.0f TOP/s, %.2fx the 16-bit kernel), with tie masses over %lld %.3f ms",
                  ms90_i8, flop / ms90_i8 * 1e-9, ms90 / ms90_i8, static_cast<long long>(bound), ms90_i8_bound);
    std::printf(" | %lld slots, scratch %.1f MB\n", static_cast<long long>(slots), scratch_bytes / 1e6);
    EXPECT_LE(max_rel, 2e-4) << s.name;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

}  // namespace
}  // namespace psa
