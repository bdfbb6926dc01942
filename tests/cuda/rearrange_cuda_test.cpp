// tests/cuda/rearrange_cuda_test.cpp -- rearrange stage on the GPU: the gather kernel moves
// exactly the rows the host permutation (build_sequence_plan) names, for aligned and
// unaligned strides. Compares bits with a host gather; no tolerance.
#include "cuda/rearrange/gather_cuda.h"
#include "cuda_test_util.h"
#include "rearrange/rearrange.h"

namespace psa {
namespace {

using test::DevBuf;

// Host reference: out[b,h,i,:] = x[b,h,src[i],:] read through the given strides.
std::vector<uint16_t> host_gather(const std::vector<uint16_t>& x, const int64_t* st, int64_t B, int64_t H,
                                  int64_t L, int64_t D, const std::vector<int64_t>& src) {
  std::vector<uint16_t> out(static_cast<size_t>(B * H * L * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        const int64_t r = src.empty() ? i : src[static_cast<size_t>(i)];
        for (int64_t c = 0; c < D; ++c)
          out[static_cast<size_t>(((b * H + h) * L + i) * D + c)] = x[static_cast<size_t>(b * st[0] + h * st[1] + r * st[2] + c)];
      }
  return out;
}

void run_gather(const std::vector<int64_t>& src, int64_t B, int64_t H, int64_t L, int64_t D, int64_t row_pad) {
  // BSND-like layout with `row_pad` extra elements per token (row_pad % 8 != 0 -> unaligned).
  const int64_t st[4] = {L * (H * D + row_pad), D, H * D + row_pad, 1};
  const size_t n = static_cast<size_t>(B * st[0]);
  test::Tensor16 x = test::make_random(n, PSA_DTYPE_BF16, 7u + static_cast<uint32_t>(L));
  DevBuf<uint16_t> dx(x.bits), dout(static_cast<size_t>(B * H * L * D));
  DevBuf<int64_t> dsrc(src);
  dout.fill_bytes(0xff);
  gpu::GatherArgs a;
  a.dtype = PSA_DTYPE_BF16;
  a.src = dx.get();
  std::copy(st, st + 4, a.stride);
  a.dst = dout.get();
  a.batch = B;
  a.heads = H;
  a.len = L;
  a.head_dim = D;
  a.index = src.empty() ? nullptr : dsrc.get();
  ASSERT_EQ(PSA_OK, gpu::gather_rows_cuda(a, nullptr)) << psa_last_error_message();
  EXPECT_EQ(host_gather(x.bits, st, B, H, L, D, src), dout.download());
}

TEST(CudaRearrange, GilbertWithTextMatchesHostPermutation) {
  PSA_REQUIRE_GPU();
  Config cfg;
  cfg.use_rearrange = true;
  cfg.rearrange_method = PSA_REARRANGE_GILBERT;
  VideoGeometry geo;
  geo.set = true;
  geo.t = 3;
  geo.h = 5;
  geo.w = 7;
  geo.text_length = 9;
  geo.text_position = PSA_TEXT_FIRST;
  SequencePlan plan;
  ASSERT_EQ(PSA_OK, build_sequence_plan(cfg, geo, geo.total_tokens(), &plan));
  ASSERT_EQ(static_cast<size_t>(geo.total_tokens()), plan.src.size());
  // The permutation the device reads is the host one, bit for bit (round trip).
  DevBuf<int64_t> dsrc(plan.src);
  EXPECT_EQ(plan.src, dsrc.download());
  run_gather(plan.src, 2, 3, geo.total_tokens(), 64, 0);
  run_gather(plan.src, 1, 2, geo.total_tokens(), 128, 8);
}

TEST(CudaRearrange, StaAndIdentityAndUnalignedStrides) {
  PSA_REQUIRE_GPU();
  Config cfg;
  cfg.use_rearrange = true;
  cfg.rearrange_method = PSA_REARRANGE_STA;
  cfg.sta_tile[0] = 2;
  cfg.sta_tile[1] = 2;
  cfg.sta_tile[2] = 4;
  VideoGeometry geo;
  geo.set = true;
  geo.t = 4;
  geo.h = 4;
  geo.w = 8;
  SequencePlan plan;
  ASSERT_EQ(PSA_OK, build_sequence_plan(cfg, geo, geo.total_tokens(), &plan));
  run_gather(plan.src, 2, 2, geo.total_tokens(), 64, 0);
  run_gather(plan.src, 1, 3, geo.total_tokens(), 64, 3);  // rows not 16-byte aligned
  run_gather({}, 2, 2, 77, 128, 0);
  run_gather({}, 1, 1, 33, 64, 1);
}

}  // namespace
}  // namespace psa
