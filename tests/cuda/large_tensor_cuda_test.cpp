// tests/cuda/large_tensor_cuda_test.cpp -- 64-bit indexing: one forward on tensors of more
// than 2^31 elements (q, k, v, out each 2,149,580,800 bf16 values, ~4.3 GB); the heads that
// sit past element 2^31 must equal the same heads computed in a small tensor, and constant
// heads below 2^31 (head 0 included, where a wrapped offset would land) must stay exact.
// Skips without a device or without the device memory the shape needs (~31-38 GB).
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "cuda/pool/pool_cuda.h"
#include "cuda/rearrange/gather_cuda.h"
#include "cuda_test_util.h"

namespace {

using psa::test::DevBuf;

// One CUDA context planned for BNSD bf16 tensors [1, heads, len, d]. Every failure keeps the
// status, psa_last_error_message() of the call that failed (the next API call clears it) and
// any CUDA error, so that a failing run says why.
struct LargeRun {
  psa_context* ctx = nullptr;
  psa_tensor_desc desc{};
  uint64_t ws_bytes = 0;
  psa_status status = PSA_OK;
  std::string what;

  bool fail(psa_status st, const char* call) {
    status = st;
    what = std::string(call) + ": " + psa_status_name(st) + ": " + psa_last_error_message();
    return false;
  }
  bool plan(psa_config* cfg, int64_t heads, int64_t len, int64_t d) {
    psa_status st = psa_context_create(cfg, PSA_BACKEND_CUDA, -1, &ctx);
    if (st != PSA_OK) return fail(st, "psa_context_create");
    st = psa_tensor_desc_init(&desc, PSA_LAYOUT_BNSD, PSA_DTYPE_BF16, 1, heads, len, d);
    if (st != PSA_OK) return fail(st, "psa_tensor_desc_init");
    st = psa_workspace_size(ctx, &desc, &desc, &desc, &desc, &ws_bytes);
    if (st != PSA_OK) return fail(st, "psa_workspace_size");
    return true;
  }
  bool forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out) {
    DevBuf<unsigned char> ws(ws_bytes);
    if (ws_bytes > 0 && ws.get() == nullptr) {
      (void)cudaGetLastError();
      status = PSA_ERR_OUT_OF_MEMORY;
      what = "cudaMalloc of the workspace (" + std::to_string(ws_bytes) + " bytes) failed";
      return false;
    }
    const psa_status st = psa_attention_forward(ctx, &desc, q, &desc, k, &desc, v, &desc, out, nullptr,
                                                ws.get(), ws_bytes, nullptr);
    if (st != PSA_OK) return fail(st, "psa_attention_forward");
    const cudaError_t e = cudaDeviceSynchronize();  // kernel faults surface here, not in the status
    if (e != cudaSuccess) {
      status = PSA_ERR_CUDA;
      what = std::string("after psa_attention_forward: cudaDeviceSynchronize: ") + cudaGetErrorName(e) +
             ": " + cudaGetErrorString(e);
      return false;
    }
    return true;
  }
  // Fraction of block pairs at level 1 in the last forward (1 for a dense one).
  double level1_fraction() {
    psa_stats st{};
    st.struct_size = sizeof(psa_stats);
    return psa_context_get_stats(ctx, &st) == PSA_OK ? st.level_fraction[PSA_STAT_LEVEL_1] : -1.0;
  }
  ~LargeRun() { psa_context_destroy(ctx); }
};

// Number of elements of `got` that differ from `want` (or from `want[0]` when `want` has one
// element); the first difference goes to `first` as "head h, row x, col c: got .. want ..".
int64_t count_diffs(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want, int64_t head0,
                    int64_t len, int64_t d, std::string* first) {
  int64_t diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const uint16_t w = want.size() == 1 ? want[0] : want[i];
    if (got[i] == w) continue;
    if (diff++ == 0) {
      const int64_t e = static_cast<int64_t>(i);
      char buf[200];
      std::snprintf(buf, sizeof buf, "head %lld, row %lld, col %lld: got 0x%04x (%g), want 0x%04x (%g)",
                    static_cast<long long>(head0 + e / (len * d)), static_cast<long long>(e / d % len),
                    static_cast<long long>(e % d), got[i], psa::bf16_to_float(got[i]), w,
                    psa::bf16_to_float(w));
      *first = buf;
    }
  }
  return diff;
}

class LargeTensor : public ::testing::TestWithParam<int> {};

TEST_P(LargeTensor, HeadsPastTwoToThe31MatchASmallRun) {
  PSA_REQUIRE_GPU();
  const int64_t H = 2050, L = 8192, D = 128, head = L * D;
  const int64_t total = H * head;
  ASSERT_GT(total, int64_t{1} << 31);
  const int64_t off = (H - 2) * head;  // heads 2048 and 2049: element 2^31 onwards
  ASSERT_GE(off, int64_t{1} << 31);

  psa_config* cfg = nullptr;
  PSA_OK_MSG(psa_config_create(&cfg));
  std::unique_ptr<psa_config, void (*)(psa_config*)> cfg_guard(cfg, psa_config_destroy);
  if (GetParam() == 0) {
    PSA_OK_MSG(psa_config_set_int(cfg, PSA_PARAM_METHOD, PSA_METHOD_DENSE));
  } else {  // sparse path with every block at level 1 (mask independent of the head index)
    for (psa_param p : {PSA_PARAM_RATIO_L1, PSA_PARAM_RATIO_L2, PSA_PARAM_RATIO_L4, PSA_PARAM_RATIO_L8,
                        PSA_PARAM_RATIO_L0})
      PSA_OK_MSG(psa_config_set_double(cfg, p, 1.0));
  }

  std::vector<uint16_t> big_tail(2 * head);
  std::vector<std::vector<uint16_t>> const_heads;
  const int64_t checked[4] = {0, 1, 1024, H - 3};  // H - 3 ends just below element 2^31
  std::mt19937_64 rng(20261121);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> hq(2 * head), hk(2 * head), hv(2 * head);
  for (auto* hv_ : {&hq, &hk, &hv})
    for (auto& x : *hv_) x = psa::float_to_bf16(nd(rng));
  {
    LargeRun run;
    ASSERT_TRUE(run.plan(cfg, H, L, D)) << run.what;
    size_t free_b = 0, total_b = 0;
    PSA_CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
    const uint64_t need = 4 * static_cast<uint64_t>(total) * 2 + run.ws_bytes + (uint64_t{1} << 30);
    if (free_b < need)
      GTEST_SKIP() << "needs " << (need >> 20) << " MiB of free device memory, has " << (free_b >> 20) << " MiB";
    std::printf("[large] %s: 4 tensors of %lld elements + %llu MiB workspace\n",
                GetParam() == 0 ? "dense" : "sparse", static_cast<long long>(total),
                static_cast<unsigned long long>(run.ws_bytes >> 20));

    DevBuf<uint16_t> q(total), k(total), v(total), out(total);
    for (DevBuf<uint16_t>* b : {&q, &k, &v, &out})
      ASSERT_NE(b->get(), nullptr) << "cudaMalloc of " << total * 2 << " bytes failed: "
                                   << cudaGetErrorString(cudaGetLastError());
    // Every head holds bf16 0x3c3c (0.0115) except the last two, which get random values.
    for (DevBuf<uint16_t>* b : {&q, &k, &v}) b->fill_bytes(0x3c);
    out.fill_bytes(0xff);
    PSA_CUDA_OK(cudaMemcpy(q.get() + off, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
    PSA_CUDA_OK(cudaMemcpy(k.get() + off, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
    PSA_CUDA_OK(cudaMemcpy(v.get() + off, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice));
    ASSERT_TRUE(run.forward(q.get(), k.get(), v.get(), out.get())) << run.what;
    EXPECT_EQ(1.0, run.level1_fraction()) << "every block pair should be at level 1";
    PSA_CUDA_OK(cudaMemcpy(big_tail.data(), out.get() + off, big_tail.size() * 2, cudaMemcpyDeviceToHost));
    for (int64_t h : checked) {
      const_heads.emplace_back(head);
      PSA_CUDA_OK(cudaMemcpy(const_heads.back().data(), out.get() + h * head, head * 2, cudaMemcpyDeviceToHost));
    }
  }
  // A constant head's output is exactly v: every logit equal, p = 1, sums of at most 2^13
  // values of 8 significant bits are exact in fp32.
  for (size_t c = 0; c < const_heads.size(); ++c) {
    std::string first;
    const int64_t diff = count_diffs(const_heads[c], {0x3c3c}, checked[c], L, D, &first);
    EXPECT_EQ(diff, 0) << "constant head " << checked[c] << " differs from 0x3c3c; first: " << first;
  }

  LargeRun small_run;
  ASSERT_TRUE(small_run.plan(cfg, 2, L, D)) << small_run.what;
  DevBuf<uint16_t> sq(hq), sk(hk), sv(hv), so(2 * head);
  so.fill_bytes(0xff);
  ASSERT_TRUE(small_run.forward(sq.get(), sk.get(), sv.get(), so.get())) << small_run.what;
  const std::vector<uint16_t> small = so.download();
  std::string first;
  const int64_t diff = count_diffs(big_tail, small, H - 2, L, D, &first);
  EXPECT_EQ(diff, 0) << "elements of the heads past 2^31 that differ from the small run; first: " << first;
}

// The rearrange and pool stages on their own over the same 2^31+ element shape, so that a
// failure of the forward above points at a stage: a reversing gather, then the pyramid; the
// last two heads must equal the same stages run on those heads alone.
TEST(LargeTensorStages, GatherAndPoolPastTwoToThe31) {
  PSA_REQUIRE_GPU();
  const int64_t H = 2050, L = 8192, D = 128, head = L * D, bn = 64, nk = L / bn;
  const int64_t total = H * head, off = (H - 2) * head;
  size_t free_b = 0, total_b = 0;
  PSA_CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  const uint64_t need = static_cast<uint64_t>(total) * 2 * 3 + (uint64_t{1} << 30);  // x, gathered, pyramid (7/8)
  if (free_b < need) GTEST_SKIP() << "needs " << (need >> 20) << " MiB of free device memory";

  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> tail(2 * head);
  for (auto& x : tail) x = psa::float_to_bf16(nd(rng));
  std::vector<int64_t> rev(L);
  for (int64_t i = 0; i < L; ++i) rev[i] = L - 1 - i;
  DevBuf<int64_t> index(rev);
  DevBuf<uint16_t> gathered(total);
  ASSERT_NE(gathered.get(), nullptr);
  {
    DevBuf<uint16_t> x(total);
    ASSERT_NE(x.get(), nullptr);
    x.fill_bytes(0x3c);
    PSA_CUDA_OK(cudaMemcpy(x.get() + off, tail.data(), tail.size() * 2, cudaMemcpyHostToDevice));
    psa::gpu::GatherArgs ga;
    ga.dtype = PSA_DTYPE_BF16;
    ga.src = x.get();
    const int64_t stride[4] = {total, head, D, 1};
    std::copy(stride, stride + 4, ga.stride);
    ga.dst = gathered.get();
    ga.batch = 1;
    ga.heads = H;
    ga.len = L;
    ga.head_dim = D;
    ga.index = index.get();
    ASSERT_EQ(PSA_OK, psa::gpu::gather_rows_cuda(ga, nullptr)) << psa_last_error_message();
    PSA_CUDA_OK(cudaDeviceSynchronize());
  }
  std::vector<uint16_t> want(2 * head), got(2 * head);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < L; ++i)
      std::copy_n(tail.data() + (h * L + rev[i]) * D, D, want.data() + (h * L + i) * D);
  PSA_CUDA_OK(cudaMemcpy(got.data(), gathered.get() + off, got.size() * 2, cudaMemcpyDeviceToHost));
  std::string first;
  int64_t diff = count_diffs(got, want, H - 2, L, D, &first);
  EXPECT_EQ(0, diff) << "gather: heads past 2^31 differ; first: " << first;

  // Pyramid of every head, and of the last two heads alone.
  auto pyramid = [&](const uint16_t* x, int64_t heads, std::vector<std::unique_ptr<DevBuf<uint16_t>>>* out) {
    psa::gpu::PoolArgs pa;
    pa.dtype = PSA_DTYPE_BF16;
    pa.x = x;
    pa.heads = heads;
    pa.len = L;
    pa.head_dim = D;
    pa.n_blocks = nk;
    pa.block_n = bn;
    for (int l = 0; l < 3; ++l) {
      out->push_back(std::make_unique<DevBuf<uint16_t>>(static_cast<size_t>(heads * (L >> (l + 1)) * D)));
      pa.out[l] = out->back()->get();
    }
    const psa_status st = psa::gpu::pool_pyramid_cuda(pa, nullptr);
    cudaDeviceSynchronize();
    return st;
  };
  std::vector<std::unique_ptr<DevBuf<uint16_t>>> big, small;
  ASSERT_EQ(PSA_OK, pyramid(gathered.get(), H, &big)) << psa_last_error_message();
  for (const auto& b : big) ASSERT_NE(b->get(), nullptr);
  DevBuf<uint16_t> small_x(want);
  ASSERT_EQ(PSA_OK, pyramid(small_x.get(), 2, &small)) << psa_last_error_message();
  for (int l = 0; l < 3; ++l) {
    const int64_t lp = L >> (l + 1);
    std::vector<uint16_t> b_tail(2 * lp * D), b_head0(lp * D);
    PSA_CUDA_OK(cudaMemcpy(b_tail.data(), big[l]->get() + (H - 2) * lp * D, b_tail.size() * 2, cudaMemcpyDeviceToHost));
    PSA_CUDA_OK(cudaMemcpy(b_head0.data(), big[l]->get(), b_head0.size() * 2, cudaMemcpyDeviceToHost));
    diff = count_diffs(b_tail, small[l]->download(), H - 2, lp, D, &first);
    EXPECT_EQ(0, diff) << "pool level " << (2 << l) << ": heads past 2^31 differ; first: " << first;
    diff = count_diffs(b_head0, {0x3c3c}, 0, lp, D, &first);
    EXPECT_EQ(0, diff) << "pool level " << (2 << l) << ": constant head 0 differs; first: " << first;
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, LargeTensor, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) { return i.param == 0 ? "dense" : "sparse_all_level1"; });

}  // namespace
