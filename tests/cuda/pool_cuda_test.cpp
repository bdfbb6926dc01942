// tests/cuda/pool_cuda_test.cpp -- pool stage on the GPU against pool_pyramid_cpu: the GPU
// rounds the CPU's fp32 hierarchical means once, so every pooled element must equal the
// CPU value rounded to the input type (0 mismatches), on random and video-like inputs. The fused
// entry with some pooled outputs NULL writes the others bit-identically and nothing else.
#include <algorithm>
#include <memory>
#include <numeric>

#include "cuda/pool/pool_cuda.h"
#include "cuda/rearrange/gather_cuda.h"
#include "cuda_test_util.h"
#include "pool/pool.h"
#include "pool/pool_spec.h"

namespace psa {
namespace {

using test::DevBuf;

void run_pool(psa_dtype dt, int64_t heads, int64_t len, int64_t d, int64_t bn, bool video) {
  const int64_t nk = (len + bn - 1) / bn;
  test::Tensor16 x = video ? test::make_video_like(heads, len, d, dt, 11u)
                           : test::make_random(static_cast<size_t>(heads * len * d), dt, 12u);
  DevBuf<uint16_t> dx(x.bits);
  std::vector<std::unique_ptr<DevBuf<uint16_t>>> out;
  gpu::PoolArgs a;
  a.dtype = dt;
  a.x = dx.get();
  a.heads = heads;
  a.len = len;
  a.head_dim = d;
  a.n_blocks = nk;
  a.block_n = bn;
  for (int l = 0; l < 3; ++l) {
    out.push_back(std::make_unique<DevBuf<uint16_t>>(static_cast<size_t>(heads * pooled_length(nk, bn, 2 << l) * d)));
    out.back()->fill_bytes(0xff);
    a.out[l] = out.back()->get();
  }
  ASSERT_EQ(PSA_OK, gpu::pool_pyramid_cuda(a, nullptr)) << psa_last_error_message();
  int64_t mismatches = 0, total = 0;
  double max_err = 0;
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<float> ref[3];
    for (int l = 0; l < 3; ++l) ref[l].resize(static_cast<size_t>(pooled_length(nk, bn, 2 << l) * d));
    pool_pyramid_cpu(x.f.data() + h * len * d, len, d, nk, bn, ref[0].data(), ref[1].data(), ref[2].data());
    for (int l = 0; l < 3; ++l) {
      const std::vector<uint16_t> got = out[l]->download();
      const size_t per = ref[l].size();
      for (size_t e = 0; e < per; ++e) {
        const uint16_t g = got[h * per + e];
        ++total;
        if (g != test::to16(ref[l][e], dt)) ++mismatches;
        max_err = std::max(max_err, std::fabs(static_cast<double>(test::from16(g, dt)) - ref[l][e]));
      }
    }
  }
  EXPECT_EQ(0, mismatches) << "of " << total << " pooled elements; max |gpu - cpu32| = " << max_err;
  std::printf("[pool] dtype=%s len=%lld d=%lld bn=%lld %s: %lld elements, %lld mismatches, max|gpu-cpu32|=%.3g\n",
              dt == PSA_DTYPE_F16 ? "f16" : "bf16", static_cast<long long>(len),
              static_cast<long long>(d), static_cast<long long>(bn), video ? "video" : "random",
              static_cast<long long>(total), static_cast<long long>(mismatches), max_err);
}

TEST(CudaPool, MatchesCpuPyramidBitForBit) {
  PSA_REQUIRE_GPU();
  run_pool(PSA_DTYPE_BF16, 3, 512, 64, 64, false);
  run_pool(PSA_DTYPE_BF16, 2, 333, 128, 32, false);   // partial last block: replicate padding
  run_pool(PSA_DTYPE_F16, 2, 1000, 128, 128, false);
  run_pool(PSA_DTYPE_BF16, 2, 777, 64, 128, true);
  run_pool(PSA_DTYPE_F16, 1, 95, 64, 32, true);
  run_pool(PSA_DTYPE_BF16, 1, 1, 64, 32, false);       // a single token
}

// gather_pool_pyramid_cuda's source: [B, len, H, d] with `row` elements between consecutive
// tokens of one head, read through `index`, into dst.
gpu::GatherArgs strided_source(psa_dtype dt, const void* src, int64_t B, int64_t H, int64_t len, int64_t d,
                               int64_t row, const int64_t* index, void* dst) {
  gpu::GatherArgs g;
  g.dtype = dt;
  g.src = src;
  g.stride[0] = len * row;
  g.stride[1] = d;
  g.stride[2] = row;
  g.dst = dst;
  g.batch = B;
  g.heads = H;
  g.len = len;
  g.head_dim = d;
  g.index = index;
  return g;
}

// Fused rearrange + pool against the host: source [B, L, H, D] (strided; `pad` extra elements
// per row make rows unaligned when odd), rows gathered through a random permutation. The
// level-1 copy must equal the host gather bit for bit and every pooled element must equal
// pool_pyramid_cpu of the gathered rows rounded once; nothing past the outputs is written.
void run_gather_pool(psa_dtype dt, int64_t B, int64_t H, int64_t len, int64_t d, int64_t bn, int64_t pad,
                     bool permute, uint32_t seed) {
  const int64_t nk = (len + bn - 1) / bn;
  const int64_t row = H * d + pad;  // elements between consecutive tokens of one head
  test::Tensor16 x = test::make_random(static_cast<size_t>(B * len * row), dt, seed);
  std::vector<int64_t> index(static_cast<size_t>(len));
  std::iota(index.begin(), index.end(), 0);
  if (permute) std::shuffle(index.begin(), index.end(), std::mt19937(seed + 1));
  DevBuf<uint16_t> dx(x.bits);
  DevBuf<int64_t> didx(index);
  DevBuf<uint16_t> dst(static_cast<size_t>(B * H * len * d) + 8);  // +8: canary past the end
  dst.fill_bytes(0xff);
  std::vector<std::unique_ptr<DevBuf<uint16_t>>> out;
  void* outp[3];
  for (int l = 0; l < 3; ++l) {
    out.push_back(std::make_unique<DevBuf<uint16_t>>(static_cast<size_t>(B * H * pooled_length(nk, bn, 2 << l) * d)));
    out.back()->fill_bytes(0xff);
    outp[l] = out.back()->get();
  }
  const gpu::GatherArgs g = strided_source(dt, dx.get(), B, H, len, d, row, didx.get(), dst.get());
  ASSERT_EQ(PSA_OK, gpu::gather_pool_pyramid_cuda(g, nk, bn, outp, nullptr)) << psa_last_error_message();
  const std::vector<uint16_t> got1 = dst.download();
  std::vector<std::vector<uint16_t>> gotp;
  for (int l = 0; l < 3; ++l) gotp.push_back(out[l]->download());
  int64_t bad1 = 0, badp = 0, total = 0;
  std::vector<float> hx(static_cast<size_t>(len * d));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      for (int64_t i = 0; i < len; ++i)
        for (int64_t e = 0; e < d; ++e) {
          const size_t s = static_cast<size_t>(b * len * row + index[i] * row + h * d + e);
          hx[static_cast<size_t>(i * d + e)] = x.f[s];
          bad1 += got1[static_cast<size_t>((bh * len + i) * d + e)] != x.bits[s];
        }
      std::vector<float> ref[3];
      for (int l = 0; l < 3; ++l) ref[l].resize(static_cast<size_t>(pooled_length(nk, bn, 2 << l) * d));
      pool_pyramid_cpu(hx.data(), len, d, nk, bn, ref[0].data(), ref[1].data(), ref[2].data());
      for (int l = 0; l < 3; ++l)
        for (size_t e = 0; e < ref[l].size(); ++e) {
          ++total;
          badp += gotp[l][bh * ref[l].size() + e] != test::to16(ref[l][e], dt);
        }
    }
  for (int e = 0; e < 8; ++e) EXPECT_EQ(0xffff, got1[static_cast<size_t>(B * H * len * d) + e]) << "canary " << e;
  EXPECT_EQ(0, bad1) << "level-1 elements differ from the host gather";
  EXPECT_EQ(0, badp) << "of " << total << " pooled elements differ from pool_pyramid_cpu";
  std::printf("[gather+pool] B=%lld H=%lld len=%lld d=%lld bn=%lld pad=%lld %s: %lld pooled, %lld + %lld mismatches\n",
              static_cast<long long>(B), static_cast<long long>(H), static_cast<long long>(len),
              static_cast<long long>(d), static_cast<long long>(bn), static_cast<long long>(pad),
              permute ? "permuted" : "identity", static_cast<long long>(total), static_cast<long long>(bad1),
              static_cast<long long>(badp));
}

TEST(CudaPool, GatherPoolMatchesHostGatherAndCpuPyramid) {
  PSA_REQUIRE_GPU();
  run_gather_pool(PSA_DTYPE_BF16, 2, 3, 517, 64, 64, 0, true, 21u);    // partial last block
  run_gather_pool(PSA_DTYPE_F16, 1, 2, 1000, 128, 128, 8, true, 22u);  // padded aligned rows
  run_gather_pool(PSA_DTYPE_BF16, 1, 2, 333, 64, 32, 1, true, 23u);    // unaligned rows: scalar loads
  run_gather_pool(PSA_DTYPE_BF16, 2, 1, 256, 128, 128, 0, false, 24u); // identity, exact blocks
  run_gather_pool(PSA_DTYPE_F16, 1, 1, 1, 64, 32, 0, false, 25u);      // a single token
}

// gather_pool_pyramid_cuda with some pooled outputs NULL (the CUDA backend leaves out the
// levels its plan's map cannot hold, Plan::pooled_levels): for each of the 8 subsets of levels
// 2, 4, 8, the level-1 copy and every output given are bit-identical to the call with all three,
// a level left out keeps the poison of its buffer (nothing is written there), and no buffer is
// written past its end.
void run_gather_pool_subsets(psa_dtype dt, int64_t B, int64_t H, int64_t len, int64_t d, int64_t bn, int64_t pad,
                             uint32_t seed) {
  const int64_t nk = (len + bn - 1) / bn;
  const int64_t row = H * d + pad;
  test::Tensor16 x = test::make_random(static_cast<size_t>(B * len * row), dt, seed);
  std::vector<int64_t> index(static_cast<size_t>(len));
  std::iota(index.begin(), index.end(), 0);
  std::shuffle(index.begin(), index.end(), std::mt19937(seed + 1));
  DevBuf<uint16_t> dx(x.bits);
  DevBuf<int64_t> didx(index);
  const size_t n1 = static_cast<size_t>(B * H * len * d);
  size_t np[3];
  for (int l = 0; l < 3; ++l) np[l] = static_cast<size_t>(B * H * pooled_length(nk, bn, 2 << l) * d);
  auto args = [&](void* dst) { return strided_source(dt, dx.get(), B, H, len, d, row, didx.get(), dst); };
  // Every level written: the reference bits.
  DevBuf<uint16_t> ref1(n1);
  std::vector<std::unique_ptr<DevBuf<uint16_t>>> refp;
  void* refo[3];
  for (int l = 0; l < 3; ++l) {
    refp.push_back(std::make_unique<DevBuf<uint16_t>>(np[l]));
    refo[l] = refp.back()->get();
  }
  ASSERT_EQ(PSA_OK, gpu::gather_pool_pyramid_cuda(args(ref1.get()), nk, bn, refo, nullptr)) << psa_last_error_message();
  const std::vector<uint16_t> want1 = ref1.download();
  std::vector<std::vector<uint16_t>> wantp;
  for (int l = 0; l < 3; ++l) wantp.push_back(refp[l]->download());

  constexpr uint16_t kPoison1 = 0xa5a5, kPoisonP = 0x5a5a;
  for (unsigned set = 0; set < 8; ++set) {  // bit l: level 2 << l given
    DevBuf<uint16_t> dst(n1 + 8);  // +8: canary past the end
    dst.fill_bytes(0xa5);
    std::vector<std::unique_ptr<DevBuf<uint16_t>>> out;
    void* outp[3];
    for (int l = 0; l < 3; ++l) {
      out.push_back(std::make_unique<DevBuf<uint16_t>>(np[l] + 8));
      out.back()->fill_bytes(0x5a);
      outp[l] = (set >> l & 1u) != 0u ? out.back()->get() : nullptr;
    }
    ASSERT_EQ(PSA_OK, gpu::gather_pool_pyramid_cuda(args(dst.get()), nk, bn, outp, nullptr))
        << "levels " << set << ": " << psa_last_error_message();
    const std::vector<uint16_t> got1 = dst.download();
    EXPECT_TRUE(std::equal(want1.begin(), want1.end(), got1.begin())) << "level-1 copy, subset " << set;
    for (size_t e = n1; e < n1 + 8; ++e) EXPECT_EQ(kPoison1, got1[e]) << "level-1 canary, subset " << set;
    for (int l = 0; l < 3; ++l) {
      const std::vector<uint16_t> got = out[l]->download();
      int64_t wrong = 0;
      if ((set >> l & 1u) != 0u) {
        for (size_t e = 0; e < np[l]; ++e) wrong += got[e] != wantp[l][e];
        EXPECT_EQ(0, wrong) << "level " << (2 << l) << " given, subset " << set << ": elements differ from the full call";
      } else {
        for (size_t e = 0; e < np[l]; ++e) wrong += got[e] != kPoisonP;
        EXPECT_EQ(0, wrong) << "level " << (2 << l) << " left out, subset " << set << ": elements written";
      }
      for (size_t e = np[l]; e < np[l] + 8; ++e) EXPECT_EQ(kPoisonP, got[e]) << "level " << (2 << l) << " canary";
    }
  }
  std::printf("[gather+pool subsets] dtype=%s B=%lld H=%lld len=%lld d=%lld bn=%lld pad=%lld: 8 subsets checked\n",
              dt == PSA_DTYPE_F16 ? "f16" : "bf16", static_cast<long long>(B), static_cast<long long>(H),
              static_cast<long long>(len), static_cast<long long>(d), static_cast<long long>(bn),
              static_cast<long long>(pad));
}

TEST(CudaPool, GatherPoolWritesOnlyTheLevelsGiven) {
  PSA_REQUIRE_GPU();
  run_gather_pool_subsets(PSA_DTYPE_BF16, 2, 3, 517, 64, 64, 0, 31u);  // partial last block
  run_gather_pool_subsets(PSA_DTYPE_F16, 1, 2, 1000, 128, 128, 8, 32u);
  run_gather_pool_subsets(PSA_DTYPE_BF16, 1, 2, 333, 64, 32, 1, 33u);  // unaligned rows: scalar loads
}

}  // namespace
}  // namespace psa
