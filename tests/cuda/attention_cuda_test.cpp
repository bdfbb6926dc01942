// tests/cuda/attention_cuda_test.cpp -- attention stage on the GPU vs sparse/dense_attention_cpu
// for every level mix, block size, head dim, dtype, causal, GQA, shape, stride and LSE; budget
// rel-L2(gpu, ref32) <= k * rel-L2(round16(ref32), ref32) + atol (storage-error baseline).
#include <algorithm>
#include <memory>
#include <random>
#include <string>

#include "attention/attention.h"
#include "cuda/attention/attention_cuda.h"
#include "cuda/mask/mask_cuda.h"
#include "cuda/pool/pool_cuda.h"
#include "cuda_test_util.h"
#include "pool/pool.h"
#include "pool/pool_spec.h"

namespace psa {
namespace {

using test::DevBuf;

struct AttnCase {
  const char* name;
  psa_dtype dt = PSA_DTYPE_BF16;
  int64_t D = 128, bm = 128, bn = 64;
  int64_t B = 1, Hq = 2, Hkv = 2, Lq = 512, Lk = 512;
  bool causal = false;
  bool dense = false;
  // Probability of levels 1, 2, 4, 8 (the rest skips); ignored when `pattern` is set.
  double p[4] = {0.25, 0.25, 0.25, 0.15};
  int pattern = 0;       // 1: diagonal only; 2: all level `fill`
  int fill = 1;
  bool bsnd = false;     // q and out in [B, L, H, D] (strided) instead of [B, H, L, D]
  bool kv_bsnd = false;  // k and v (level 1) in [B, L, H, D] too
  bool q_perm = false;   // problem row x is caller row perm[x] (random): q_rows = out_rows = perm
  bool video = false;
  bool lse = true;
  double k_budget = 4.0;  // rel-L2 budget multiple of the storage baseline
  uint32_t seed = 1;
  gpu::AttentionKernel kernel = gpu::AttentionKernel::kAuto;  // sm90 only applies to bm 128
  int ctas = 0;  // sm90: cap on the persistent grid (0: one CTA per SM)
};

struct AttnResult {
  std::vector<float> out, ref, lse, ref_lse;
  double err = 0, base = 0;
};

// Runs pool -> work list -> attention on the GPU and the CPU oracle on the same data.
void run_attention(const AttnCase& c, AttnResult* res, const std::vector<int8_t>* force_levels = nullptr,
                   const test::Tensor16* force_k = nullptr, const test::Tensor16* force_v = nullptr) {
  const int64_t mq = (c.Lq + c.bm - 1) / c.bm, nk = (c.Lk + c.bn - 1) / c.bn, D = c.D;
  test::Tensor16 q = c.video ? test::make_video_like(c.B * c.Hq, c.Lq, D, c.dt, c.seed)
                             : test::make_random(static_cast<size_t>(c.B * c.Hq * c.Lq * D), c.dt, c.seed);
  test::Tensor16 k = force_k ? *force_k
                             : c.video ? test::make_video_like(c.B * c.Hkv, c.Lk, D, c.dt, c.seed + 1)
                                       : test::make_random(static_cast<size_t>(c.B * c.Hkv * c.Lk * D), c.dt, c.seed + 1);
  test::Tensor16 v = force_v ? *force_v
                             : test::make_random(static_cast<size_t>(c.B * c.Hkv * c.Lk * D), c.dt, c.seed + 2);
  // Level map.
  std::vector<int8_t> levels(static_cast<size_t>(c.B * c.Hq * mq * nk), 0);
  if (force_levels) {
    levels = *force_levels;
  } else {
    std::mt19937 gen(c.seed + 3);
    std::uniform_real_distribution<double> ud(0.0, 1.0);
    for (int64_t r = 0; r < c.B * c.Hq * mq; ++r)
      for (int64_t j = 0; j < nk; ++j) {
        int8_t lv = 0;
        if (c.pattern == 1) {
          const int64_t i = r % mq;
          lv = (j * c.bn < (i + 1) * c.bm && (j + 1) * c.bn > i * c.bm) ? 1 : 0;
        } else if (c.pattern == 2) {
          lv = static_cast<int8_t>(c.fill);
        } else {
          double u = ud(gen);
          for (int li = 0; li < 4; ++li) {
            if (u < c.p[li]) {
              lv = static_cast<int8_t>(1 << li);
              break;
            }
            u -= c.p[li];
          }
        }
        levels[static_cast<size_t>(r * nk + j)] = lv;
      }
  }

  // Device tensors: q/out optionally BSND (strided), k/v BHLD.
  const int64_t qs_bhld[4] = {c.Hq * c.Lq * D, c.Lq * D, D, 1};
  const int64_t qs_bsnd[4] = {c.Lq * c.Hq * D, D, c.Hq * D, 1};
  const int64_t* qst = c.bsnd ? qs_bsnd : qs_bhld;
  std::vector<int64_t> perm(static_cast<size_t>(c.Lq));
  for (int64_t x = 0; x < c.Lq; ++x) perm[static_cast<size_t>(x)] = x;
  if (c.q_perm) std::shuffle(perm.begin(), perm.end(), std::mt19937(c.seed + 7));
  std::vector<uint16_t> qdev(q.bits.size());
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t x = 0; x < c.Lq; ++x)
        std::copy_n(q.bits.data() + ((b * c.Hq + h) * c.Lq + x) * D, D,
                    qdev.data() + b * qst[0] + h * qst[1] + perm[static_cast<size_t>(x)] * qst[2]);
  DevBuf<uint16_t> dq(qdev), dk(k.bits), dv(v.bits), dout(q.bits.size());
  DevBuf<int64_t> dperm(perm);
  DevBuf<float> dlse(static_cast<size_t>(c.B * c.Hq * c.Lq));
  dout.fill_bytes(0xff);  // NaN poison: every element must be written
  dlse.fill_bytes(0xff);
  std::vector<std::unique_ptr<DevBuf<uint16_t>>> pooled;
  gpu::AttentionArgs a;
  a.dtype = c.dt;
  a.dims.batch = c.B;
  a.dims.heads_q = c.Hq;
  a.dims.heads_kv = c.Hkv;
  a.dims.len_q = c.Lq;
  a.dims.len_k = c.Lk;
  a.dims.head_dim = D;
  a.dims.block_m = c.bm;
  a.dims.block_n = c.bn;
  a.kernel = c.bm == 128 ? c.kernel : gpu::AttentionKernel::kAuto;
  a.max_ctas = c.ctas;
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  a.causal = c.causal;
  a.dense = c.dense;
  a.q = dq.get();
  std::copy(qst, qst + 4, a.q_stride);
  if (c.q_perm) a.q_rows = a.out_rows = dperm.get();
  const int64_t ks_bhld[4] = {c.Hkv * c.Lk * D, c.Lk * D, D, 1};
  const int64_t ks_bsnd[4] = {c.Lk * c.Hkv * D, D, c.Hkv * D, 1};
  const int64_t* kst = c.kv_bsnd ? ks_bsnd : ks_bhld;
  // [B, L, H, D] copies of k and v for the kernel (the pyramid is pooled from the BHLD ones)
  auto to_bsnd = [&](const std::vector<uint16_t>& x) {
    std::vector<uint16_t> y(c.kv_bsnd ? x.size() : 0);
    for (size_t r = 0; r < y.size() / static_cast<size_t>(D); ++r) {
      const int64_t t = static_cast<int64_t>(r) % c.Lk, bh = static_cast<int64_t>(r) / c.Lk;
      std::copy_n(x.data() + r * D, D, y.data() + (bh / c.Hkv) * ks_bsnd[0] + (bh % c.Hkv) * D + t * ks_bsnd[2]);
    }
    return y;
  };
  DevBuf<uint16_t> dk_s(to_bsnd(k.bits)), dv_s(to_bsnd(v.bits));
  a.k = c.kv_bsnd ? dk_s.get() : dk.get();
  a.v = c.kv_bsnd ? dv_s.get() : dv.get();
  std::copy(kst, kst + 4, a.k_stride);
  std::copy(kst, kst + 4, a.v_stride);
  a.out = dout.get();
  std::copy(qst, qst + 4, a.o_stride);
  a.lse = c.lse ? dlse.get() : nullptr;
  DevBuf<int8_t> dl(levels);
  DevBuf<int32_t> wl(levels.size()), wc(static_cast<size_t>(c.B * c.Hq * mq * 4));
  if (!c.dense) {
    for (int t = 0; t < 2; ++t) {
      gpu::PoolArgs pa;
      pa.dtype = c.dt;
      pa.x = t == 0 ? dk.get() : dv.get();
      pa.heads = c.B * c.Hkv;
      pa.len = c.Lk;
      pa.head_dim = D;
      pa.n_blocks = nk;
      pa.block_n = c.bn;
      for (int l = 0; l < 3; ++l) {
        pooled.push_back(std::make_unique<DevBuf<uint16_t>>(static_cast<size_t>(c.B * c.Hkv * pooled_length(nk, c.bn, 2 << l) * D)));
        pa.out[l] = pooled.back()->get();
        (t == 0 ? a.k_pooled : a.v_pooled)[l] = pa.out[l];
      }
      ASSERT_EQ(PSA_OK, gpu::pool_pyramid_cuda(pa, nullptr)) << psa_last_error_message();
    }
    gpu::WorklistArgs wa;
    wa.levels = dl.get();
    wa.rows = c.B * c.Hq * mq;
    wa.nk = nk;
    wa.blocks = wl.get();
    wa.count = wc.get();
    ASSERT_EQ(PSA_OK, gpu::build_worklist_cuda(wa, nullptr)) << psa_last_error_message();
    a.wl_blocks = wl.get();
    a.wl_count = wc.get();
  }
  ASSERT_EQ(PSA_OK, gpu::attention_cuda(a, nullptr)) << psa_last_error_message();
  PSA_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint16_t> got = dout.download();
  const std::vector<float> glse = dlse.download();

  // CPU oracle per (b, h), outputs in BHLD order.
  res->out.assign(q.f.size(), 0.0f);
  res->ref.assign(q.f.size(), 0.0f);
  res->lse.assign(static_cast<size_t>(c.B * c.Hq * c.Lq), 0.0f);
  res->ref_lse.assign(res->lse.size(), 0.0f);
  std::vector<float> kp[3], vp[3];
  for (int l = 0; l < 3; ++l) {
    kp[l].resize(static_cast<size_t>(pooled_length(nk, c.bn, 2 << l) * D));
    vp[l].resize(kp[l].size());
  }
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t hk = 0; hk < c.Hkv; ++hk) {
      const float* kh = k.f.data() + (b * c.Hkv + hk) * c.Lk * D;
      const float* vh = v.f.data() + (b * c.Hkv + hk) * c.Lk * D;
      if (!c.dense) {
        pool_pyramid_cpu(kh, c.Lk, D, nk, c.bn, kp[0].data(), kp[1].data(), kp[2].data());
        pool_pyramid_cpu(vh, c.Lk, D, nk, c.bn, vp[0].data(), vp[1].data(), vp[2].data());
      }
      Pyramid K, V;
      K.level[0] = kh;
      V.level[0] = vh;
      for (int l = 0; l < 3; ++l) {
        K.level[l + 1] = kp[l].data();
        V.level[l + 1] = vp[l].data();
      }
      for (int64_t h = hk * (c.Hq / c.Hkv); h < (hk + 1) * (c.Hq / c.Hkv); ++h) {
        const int64_t bh = b * c.Hq + h;
        float* ro = res->ref.data() + bh * c.Lq * D;
        float* rl = res->ref_lse.data() + bh * c.Lq;
        if (c.dense)
          dense_attention_cpu(q.f.data() + bh * c.Lq * D, c.Lq, kh, vh, c.Lk, D, a.scale, c.causal, ro, rl);
        else
          sparse_attention_cpu(q.f.data() + bh * c.Lq * D, c.Lq, K, V, c.Lk, D, c.bm, c.bn,
                               levels.data() + bh * mq * nk, a.scale, c.causal, ro, rl);
        for (int64_t x = 0; x < c.Lq; ++x) {
          const int64_t cx = perm[static_cast<size_t>(x)];  // caller row of problem row x
          for (int64_t e = 0; e < D; ++e)
            res->out[static_cast<size_t>((bh * c.Lq + x) * D + e)] =
                test::from16(got[static_cast<size_t>(b * qst[0] + h * qst[1] + cx * qst[2] + e)], c.dt);
          res->lse[static_cast<size_t>(bh * c.Lq + x)] = glse[static_cast<size_t>(bh * c.Lq + cx)];
        }
      }
    }
  std::vector<float> stored(res->ref.size());
  for (size_t e = 0; e < stored.size(); ++e) stored[e] = test::round16(res->ref[e], c.dt);
  res->base = test::rel_l2(stored, res->ref);
  res->err = test::rel_l2(res->out, res->ref);
}

void check_attention(const AttnCase& c) {
  AttnResult r;
  run_attention(c, &r);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_TRUE(test::all_finite(r.out)) << c.name << ": non-finite or unwritten output";
  const double atol = 1e-4;
  const double budget = c.k_budget * r.base + atol;
  double lse_err = 0;
  int64_t inf_mismatch = 0;
  if (c.lse) {
    for (size_t e = 0; e < r.lse.size(); ++e) {
      const bool ri = std::isinf(r.ref_lse[e]), gi = std::isinf(r.lse[e]);
      if (ri || gi) {
        inf_mismatch += !(ri && gi && r.ref_lse[e] < 0 && r.lse[e] < 0);
        continue;
      }
      lse_err = std::max(lse_err, std::fabs(static_cast<double>(r.lse[e]) - r.ref_lse[e]));
    }
  }
  std::printf("[attention] %-34s rel-L2 %.3e (storage baseline %.3e, budget %.3e), max|lse diff| %.3e\n",
              c.name, r.err, r.base, budget, lse_err);
  EXPECT_LE(r.err, budget) << c.name;
  EXPECT_EQ(0, inf_mismatch) << c.name << ": rows with -inf LSE differ";
  EXPECT_LE(lse_err, c.dt == PSA_DTYPE_BF16 ? 2e-2 : 4e-3) << c.name;
}

// The kernel the current test runs (the fixture's parameter).
gpu::AttentionKernel g_kernel = gpu::AttentionKernel::kAuto;

bool sm90_present() {
  gpu::AttentionArgs a;
  a.dims.block_m = 128;
  return gpu::attention_kernel_for(a) == gpu::AttentionKernel::kSm90;
}

AttnCase base(const char* name) {
  AttnCase c;
  c.name = name;
  c.kernel = g_kernel;
  return c;
}

// Every attention test runs on both kernels: the sm80 one (mma.sync, any sm80+ device) and
// the Hopper one (wgmma, warp-specialised; skipped where the device or build lacks sm_90a).
class CudaAttention : public ::testing::TestWithParam<gpu::AttentionKernel> {
 protected:
  void SetUp() override {
    g_kernel = GetParam();
    PSA_REQUIRE_GPU();
    if (GetParam() == gpu::AttentionKernel::kSm90 && !sm90_present())
      GTEST_SKIP() << "no sm_90a kernel for this device/build";
  }
};

TEST_P(CudaAttention, LevelMixes) {
  PSA_REQUIRE_GPU();
  for (int fill : {1, 2, 4, 8}) {
    AttnCase c = base(fill == 1 ? "all level 1" : fill == 2 ? "all level 2" : fill == 4 ? "all level 4" : "all level 8");
    c.pattern = 2;
    c.fill = fill;
    check_attention(c);
  }
  AttnCase c = base("mixed + skips");
  check_attention(c);
  c = base("diagonal only");
  c.pattern = 1;
  check_attention(c);
  c = base("mostly skipped (empty rows)");
  c.p[0] = 0.02;
  c.p[1] = c.p[2] = c.p[3] = 0.0;
  c.Lk = 256;
  check_attention(c);
}

TEST_P(CudaAttention, BlockSizesHeadDimsDtypes) {
  PSA_REQUIRE_GPU();
  for (psa_dtype dt : {PSA_DTYPE_BF16, PSA_DTYPE_F16})
    for (int64_t D : {64, 128})
      for (int64_t bn : {16, 32, 64, 128}) {
        const std::string name = std::string(dt == PSA_DTYPE_F16 ? "f16" : "bf16") + " D=" +
                                 std::to_string(D) + " bn=" + std::to_string(bn);
        AttnCase c = base(name.c_str());
        c.dt = dt;
        c.D = D;
        c.bn = bn;
        c.Lq = c.Lk = 640;
        c.seed = static_cast<uint32_t>(D + bn + dt);
        check_attention(c);
      }
  AttnCase c = base("block_m 64");
  c.bm = 64;
  c.bn = 32;
  check_attention(c);
  c = base("block_m 64, D 64, f16");
  c.bm = 64;
  c.D = 64;
  c.dt = PSA_DTYPE_F16;
  check_attention(c);
}

TEST_P(CudaAttention, ShapesCausalGqaStrides) {
  PSA_REQUIRE_GPU();
  AttnCase c = base("causal");
  c.causal = true;
  check_attention(c);
  c = base("causal bn=32 pooled diagonal");
  c.causal = true;
  c.bn = 32;
  c.p[0] = 0.1;
  c.p[1] = 0.3;
  c.p[2] = 0.3;
  c.p[3] = 0.3;
  check_attention(c);
  c = base("causal Lq < Lk, bm 64");
  c.causal = true;
  c.bm = 64;
  c.Lq = 200;
  c.Lk = 517;
  check_attention(c);
  c = base("causal Lq > Lk (empty rows)");
  c.causal = true;
  c.Lq = 600;
  c.Lk = 300;
  check_attention(c);
  c = base("GQA 4:2");
  c.Hq = 4;
  c.Hkv = 2;
  check_attention(c);
  c = base("MQA 3:1, batch 2");
  c.Hq = 3;
  c.Hkv = 1;
  c.B = 2;
  check_attention(c);
  c = base("odd L 333");
  c.Lq = c.Lk = 333;
  check_attention(c);
  c = base("Lq 200 != Lk 1000");
  c.Lq = 200;
  c.Lk = 1000;
  check_attention(c);
  c = base("BSND strides, batch 2");
  c.bsnd = true;
  c.B = 2;
  c.Hq = 3;
  c.Hkv = 3;
  check_attention(c);
  c = base("q, k, v in BSND strides, batch 2, GQA 4:2");
  c.bsnd = c.kv_bsnd = true;
  c.B = 2;
  c.Hq = 4;
  c.Hkv = 2;
  check_attention(c);
  c = base("k, v in BSND strides, batch 1");
  c.kv_bsnd = true;
  c.Hq = c.Hkv = 3;
  check_attention(c);
  c = base("video-like, no LSE");
  c.video = true;
  c.lse = false;
  check_attention(c);
}

TEST_P(CudaAttention, DenseKernel) {
  PSA_REQUIRE_GPU();
  AttnCase c = base("dense");
  c.dense = true;
  check_attention(c);
  c = base("dense causal GQA BSND");
  c.dense = true;
  c.causal = true;
  c.Hq = 4;
  c.Hkv = 1;
  c.bsnd = true;
  check_attention(c);
  c = base("dense f16 D64 Lq!=Lk causal");
  c.dense = true;
  c.dt = PSA_DTYPE_F16;
  c.D = 64;
  c.Lq = 130;
  c.Lk = 700;
  c.causal = true;
  check_attention(c);
}

// All blocks at level 1 walk the same token stream as the dense kernel: identical bits.
TEST_P(CudaAttention, AllLevelOneEqualsDense) {
  PSA_REQUIRE_GPU();
  for (int64_t bn : {32, 64, 128}) {
    AttnCase c = base("all-1");
    c.pattern = 2;
    c.fill = 1;
    c.bn = bn;
    c.Lq = c.Lk = 500;
    AttnResult sparse, dense;
    run_attention(c, &sparse);
    c.dense = true;
    run_attention(c, &dense);
    EXPECT_EQ(sparse.out, dense.out) << "bn=" << bn;
    EXPECT_EQ(sparse.lse, dense.lse) << "bn=" << bn;
  }
}

// Q read in place: problem row x reads caller row perm[x] (q_rows) and writes it back there
// (out_rows), as a rearranged PSA forward does without gathering Q. The sm90 kernel then loads Q
// as one single-row TMA box per row; a partial last query block, causal rows, BSND strides, GQA
// and a persistent grid of 3 CTAs; the result must equal the same problem with Q in problem order.
TEST_P(CudaAttention, QReadInPlaceThroughRowIndex) {
  PSA_REQUIRE_GPU();
  for (int64_t D : {64, 128}) {
    AttnCase c = base(D == 64 ? "q in place D64 mixed bsnd" : "q in place D128 mixed bsnd");
    c.D = D;
    c.B = 2;
    c.Hq = 4;
    c.Hkv = 2;
    c.Lq = 700;
    c.Lk = 650;
    c.bsnd = true;
    c.ctas = 3;
    AttnResult direct, in_place;
    run_attention(c, &direct);
    c.q_perm = true;
    run_attention(c, &in_place);
    EXPECT_EQ(in_place.out, direct.out) << c.name;
    EXPECT_EQ(in_place.lse, direct.lse) << c.name;
    check_attention(c);
    c.name = D == 64 ? "q in place D64 dense causal" : "q in place D128 dense causal";
    c.dense = true;
    c.causal = true;
    c.bsnd = false;
    c.Lq = 300;
    c.Lk = 500;
    check_attention(c);
  }
}

// Level p over keys that repeat in groups of p equals full resolution.
TEST_P(CudaAttention, PooledLevelOnRepeatedKeysEqualsFullResolution) {
  PSA_REQUIRE_GPU();
  for (int p : {2, 4, 8}) {
    AttnCase c = base("repeated keys");
    c.Lq = c.Lk = 512;
    c.Hq = c.Hkv = 1;
    c.pattern = 2;
    const size_t n = static_cast<size_t>(c.Lk * c.D);
    test::Tensor16 k = test::make_random(n, c.dt, 50u + p), v = test::make_random(n, c.dt, 60u + p);
    for (int64_t t = 0; t < c.Lk; ++t)
      for (int64_t e = 0; e < c.D; ++e) {
        const size_t src = static_cast<size_t>((t / p * p) * c.D + e), dst = static_cast<size_t>(t * c.D + e);
        k.bits[dst] = k.bits[src];
        k.f[dst] = k.f[src];
        v.bits[dst] = v.bits[src];
        v.f[dst] = v.f[src];
      }
    AttnResult full, pooled;
    c.fill = 1;
    run_attention(c, &full, nullptr, &k, &v);
    c.fill = p;
    run_attention(c, &pooled, nullptr, &k, &v);
    const double err = test::rel_l2(pooled.out, full.out);
    std::printf("[attention] level %d on %d-fold repeated keys vs level 1: rel-L2 %.3e\n", p, p, err);
    EXPECT_LE(err, 3.0 * full.base + 1e-4);
  }
}

// Long rows: the stage ring wraps many times (16+ tiles at d64 with 4 stages, d128 with
// 2), pooled levels interleave, video-like inputs; sm90 and sm80 must agree with the CPU.
TEST_P(CudaAttention, LongRowsRingWraps) {
  PSA_REQUIRE_GPU();
  for (int64_t D : {64, 128}) {
    AttnCase c = base(D == 64 ? "long rows D64 mixed" : "long rows D128 mixed");
    c.D = D;
    c.Lq = 700;
    c.Lk = 2300;
    c.bn = 128;
    c.video = true;
    c.p[0] = 0.5;
    c.p[1] = c.p[2] = c.p[3] = 0.15;
    check_attention(c);
    c = base(D == 64 ? "long rows D64 dense causal" : "long rows D128 dense causal");
    c.D = D;
    c.dense = true;
    c.causal = true;
    c.Lq = 1100;
    c.Lk = 2300;
    check_attention(c);
  }
}

// The Hopper kernel is persistent: each CTA walks rows r, r + grid, ... with one K/V ring and
// two Q slots across rows. A grid of 1-5 CTAs makes every CTA run dozens of rows of unequal
// length (empty rows, one-tile rows, causal rows, GQA, batch 2) through the ring.
TEST_P(CudaAttention, PersistentCtasWalkManyRows) {
  PSA_REQUIRE_GPU();
  for (int64_t D : {64, 128}) {
    AttnCase c = base(D == 64 ? "persistent D64 mixed, 1 CTA" : "persistent D128 mixed, 1 CTA");
    c.D = D;
    c.B = 2;
    c.Hq = 4;
    c.Hkv = 2;
    c.Lq = 700;
    c.Lk = 900;
    c.ctas = 1;
    c.p[0] = c.p[1] = c.p[2] = c.p[3] = 0.12;
    check_attention(c);
    c.name = D == 64 ? "persistent D64 nearly empty rows, 5 CTAs" : "persistent D128 nearly empty rows, 5 CTAs";
    c.ctas = 5;
    c.p[0] = c.p[1] = c.p[2] = c.p[3] = 0.015;
    c.seed = 5;
    check_attention(c);
    c.name = D == 64 ? "persistent D64 causal mixed, 3 CTAs" : "persistent D128 causal mixed, 3 CTAs";
    c.ctas = 3;
    c.causal = true;
    c.p[0] = 0.4;
    c.p[1] = c.p[2] = c.p[3] = 0.1;
    check_attention(c);
    c = base(D == 64 ? "persistent D64 dense causal, 2 CTAs" : "persistent D128 dense causal, 2 CTAs");
    c.D = D;
    c.B = 2;
    c.Hq = 3;
    c.Hkv = 3;
    c.Lq = 1000;
    c.Lk = 1000;
    c.dense = true;
    c.causal = true;
    c.ctas = 2;
    check_attention(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaAttention,
                         ::testing::Values(gpu::AttentionKernel::kSm80, gpu::AttentionKernel::kSm90),
                         [](const ::testing::TestParamInfo<gpu::AttentionKernel>& i) {
                           return std::string(i.param == gpu::AttentionKernel::kSm90 ? "sm90" : "sm80");
                         });

}  // namespace
}  // namespace psa
