// tests/robustness/new_api_edges_test.cpp -- hostile arguments to the entry points of the
// sequence-parallel and diagnostics API (psa_merge_attention, psa_context_sequence_order,
// the level map, token order and mask pictures) and to psa_sparse_attention on the CPU:
// each fails with a status whose message names the argument, and leaves outputs untouched.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "context/context.h"
#include "robustness/robust_env.h"

namespace psa_robust {
namespace {

constexpr float kSentinel = 12345.0f;

bool mentions(const char* what) {
  return std::string(psa_last_error_message()).find(what) != std::string::npos;
}

psa_tensor_desc bnsd(int64_t b, int64_t h, int64_t l, int64_t d) {
  psa_tensor_desc x{};
  EXPECT_EQ(psa_tensor_desc_init(&x, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, b, h, l, d), PSA_OK);
  return x;
}

ContextPtr ran_context(int64_t len = 256) {
  psa_config* c = nullptr;
  EXPECT_EQ(psa_config_create(&c), PSA_OK);
  ConfigPtr cfg(c);
  psa_context* x = nullptr;
  EXPECT_EQ(psa_context_create(c, PSA_BACKEND_CPU, -1, &x), PSA_OK);
  ContextPtr ctx(x);
  const psa_tensor_desc d = bnsd(1, 2, len, 32);
  std::vector<float> q(static_cast<size_t>(2 * len * 32), 0.5f), k(q), v(q), out(q.size());
  uint64_t ws = 0;
  EXPECT_EQ(psa_workspace_size(x, &d, &d, &d, &d, &ws), PSA_OK);
  std::vector<uint8_t> work(static_cast<size_t>(ws) + 1);
  EXPECT_EQ(psa_attention_forward(x, &d, q.data(), &d, k.data(), &d, v.data(), &d, out.data(),
                                  nullptr, work.data(), ws, nullptr),
            PSA_OK)
      << psa_last_error_message();
  return ctx;
}

TEST(NewApiEdges, MergeNamesTheDescriptorNotQ) {
  psa_tensor_desc d = bnsd(1, 1, 4, 4);
  d.strides[3] = 2;
  std::vector<float> a(64, 1.0f), lse(4, 0.0f), out(64, kSentinel);
  const void* outs[1] = {a.data()};
  const float* lses[1] = {lse.data()};
  EXPECT_EQ(psa_merge_attention(1, &d, outs, lses, out.data(), nullptr, PSA_BACKEND_CPU, nullptr),
            PSA_ERR_INVALID_STRIDE);
  EXPECT_TRUE(mentions("desc: strides[3]")) << psa_last_error_message();
  d = bnsd(1, 1, 4, 4);
  d.shape[1] = 0;
  EXPECT_NE(psa_merge_attention(1, &d, outs, lses, out.data(), nullptr, PSA_BACKEND_CPU, nullptr),
            PSA_OK);
  EXPECT_TRUE(mentions("desc:")) << psa_last_error_message();
  for (float x : out) EXPECT_EQ(x, kSentinel);
}

TEST(NewApiEdges, MergeRejectsPartialOverlapAndKeepsInPlace) {
  const psa_tensor_desc d = bnsd(1, 1, 4, 4);
  std::vector<float> buf(17 + 16, 1.0f), b(16, 2.0f), l(4, 0.0f), l2(4, 0.0f);
  const void* outs[2] = {buf.data(), b.data()};
  const float* lses[2] = {l.data(), l2.data()};
  // out shifted by one element into outs[0]
  EXPECT_EQ(psa_merge_attention(2, &d, outs, lses, buf.data() + 1, nullptr, PSA_BACKEND_CPU,
                                nullptr),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("out: overlaps outs[0]")) << psa_last_error_message();
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(buf[i], 1.0f);
  // lse shifted into lses[0]
  std::vector<float> lbuf(8, 0.0f), out(16, kSentinel);
  const float* lses2[2] = {lbuf.data(), l2.data()};
  EXPECT_EQ(psa_merge_attention(2, &d, outs, lses2, out.data(), lbuf.data() + 1, PSA_BACKEND_CPU,
                                nullptr),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("lse: overlaps lses[0]")) << psa_last_error_message();
  for (float x : out) EXPECT_EQ(x, kSentinel);
  // lse over out
  EXPECT_EQ(psa_merge_attention(2, &d, outs, lses, out.data(), out.data(), PSA_BACKEND_CPU,
                                nullptr),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("lse: overlaps")) << psa_last_error_message();
  // In place (out is outs[0], lse is lses[0]) stays allowed and correct: equal lses -> mean.
  EXPECT_EQ(psa_merge_attention(2, &d, outs, lses, buf.data(), l.data(), PSA_BACKEND_CPU,
                                nullptr),
            PSA_OK)
      << psa_last_error_message();
  for (size_t i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(buf[i], 1.5f);
}

TEST(NewApiEdges, MergeNullsAndCounts) {
  const psa_tensor_desc d = bnsd(1, 1, 4, 4);
  std::vector<float> a(16, 1.0f), l(4, 0.0f), out(16, kSentinel);
  const void* outs[1] = {a.data()};
  const float* lses[1] = {l.data()};
  const void* null_outs[1] = {nullptr};
  EXPECT_EQ(psa_merge_attention(0, &d, outs, lses, out.data(), nullptr, PSA_BACKEND_CPU, nullptr),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("count")) << psa_last_error_message();
  EXPECT_EQ(psa_merge_attention(65, &d, outs, lses, out.data(), nullptr, PSA_BACKEND_CPU, nullptr),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(psa_merge_attention(1, nullptr, outs, lses, out.data(), nullptr, PSA_BACKEND_CPU,
                                nullptr),
            PSA_ERR_NULL_POINTER);
  EXPECT_EQ(psa_merge_attention(1, &d, null_outs, lses, out.data(), nullptr, PSA_BACKEND_CPU,
                                nullptr),
            PSA_ERR_NULL_POINTER);
  EXPECT_TRUE(mentions("outs[0]")) << psa_last_error_message();
  EXPECT_EQ(psa_merge_attention(1, &d, outs, lses, out.data(), nullptr,
                                static_cast<psa_backend>(7), nullptr),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("backend")) << psa_last_error_message();
  for (float x : out) EXPECT_EQ(x, kSentinel);
}

TEST(NewApiEdges, SequenceOrderBadLengths) {
  ContextPtr ctx = ran_context();
  std::vector<int64_t> order(8, -7);
  int64_t b = -7, e = -7;
  EXPECT_EQ(psa_context_sequence_order(nullptr, 8, order.data(), &b, &e), PSA_ERR_NULL_POINTER);
  EXPECT_EQ(psa_context_sequence_order(ctx.get(), 0, order.data(), &b, &e), PSA_ERR_INVALID_SHAPE);
  EXPECT_TRUE(mentions("seq_len")) << psa_last_error_message();
  EXPECT_EQ(psa_context_sequence_order(ctx.get(), std::numeric_limits<int64_t>::min(),
                                       order.data(), &b, &e),
            PSA_ERR_INVALID_SHAPE);
  ASSERT_EQ(psa_context_set_video_grid(ctx.get(), 1, 4, 4, 0, PSA_TEXT_NONE), PSA_OK);
  EXPECT_EQ(psa_context_sequence_order(ctx.get(), int64_t{1} << 62, order.data(), &b, &e),
            PSA_ERR_INVALID_SHAPE);
  for (int64_t x : order) EXPECT_EQ(x, -7);
  EXPECT_EQ(b, -7);
  // No order buffer: only the scalars.
  EXPECT_EQ(psa_context_sequence_order(ctx.get(), 16, nullptr, nullptr, nullptr), PSA_OK);
  // An order of more than 2^31 - 1 tokens: refused before anything is built or written, for
  // a grid of that size (otherwise a terabyte-sized Gilbert curve) and without a grid (the
  // identity). The text span alone (order = NULL) is still given.
  const int64_t side = int64_t{1} << 20;
  ASSERT_EQ(psa_context_set_video_grid(ctx.get(), 1, side, side, 0, PSA_TEXT_NONE), PSA_OK);
  EXPECT_EQ(psa_context_sequence_order(ctx.get(), side * side, order.data(), &b, &e), PSA_ERR_INVALID_SHAPE);
  EXPECT_TRUE(mentions("2^31 - 1")) << psa_last_error_message();
  EXPECT_EQ(psa_context_sequence_order(ctx.get(), side * side, nullptr, nullptr, nullptr), PSA_OK);
  ASSERT_EQ(psa_context_clear_video_grid(ctx.get()), PSA_OK);
  EXPECT_EQ(psa_context_sequence_order(ctx.get(), int64_t{1} << 31, order.data(), &b, &e), PSA_ERR_INVALID_SHAPE);
  EXPECT_TRUE(mentions("seq_len")) << psa_last_error_message();
  for (int64_t x : order) EXPECT_EQ(x, -7);
  EXPECT_EQ(b, -7);
}

TEST(NewApiEdges, LevelMapAndTokenOrderBuffers) {
  ContextPtr ctx = ran_context();
  int64_t B = 0, H = 0, M = 0, N = 0;
  ASSERT_EQ(psa_context_level_map_shape(ctx.get(), &B, &H, &M, &N), PSA_OK);
  EXPECT_EQ(psa_context_level_map_shape(ctx.get(), nullptr, nullptr, nullptr, nullptr), PSA_OK);
  const size_t need = static_cast<size_t>(B * H * M * N);
  std::vector<int8_t> map(need, 99);
  EXPECT_EQ(psa_context_get_level_map(ctx.get(), map.data(), need - 1), PSA_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(psa_context_get_level_map(ctx.get(), nullptr, need), PSA_ERR_NULL_POINTER);
  EXPECT_TRUE(mentions("levels")) << psa_last_error_message();
  for (int8_t x : map) EXPECT_EQ(x, 99);
  std::vector<int64_t> order(256, -7);
  int64_t len = 0, b = 0, e = 0;
  EXPECT_EQ(psa_context_get_token_order(ctx.get(), 2, order.data(), 256, &len, &b, &e),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("sequence")) << psa_last_error_message();
  EXPECT_EQ(psa_context_get_token_order(ctx.get(), 1, order.data(), 255, &len, &b, &e),
            PSA_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(psa_context_get_token_order(ctx.get(), 1, order.data(), -1, &len, &b, &e),
            PSA_ERR_BUFFER_TOO_SMALL);
  for (int64_t x : order) EXPECT_EQ(x, -7);
  EXPECT_EQ(psa_context_get_token_order(ctx.get(), 0, nullptr, -5, &len, nullptr, nullptr), PSA_OK);
  EXPECT_EQ(len, 256);
}

// A map above what a plan keeps is refused before anything is allocated for it (it used to
// allocate the whole map first: terabytes under a lying capacity, an abort under ASan).
TEST(NewApiEdges, LevelMapAboveTheKeptBoundAllocatesNothing) {
  ContextPtr ctx = ran_context();
  psa::Plan* plan = const_cast<psa::Plan*>(ctx->last_plan);
  const int64_t batch = plan->problem.batch;
  plan->problem.batch = int64_t{1} << 40;
  int8_t one = 99;
  EXPECT_EQ(psa_context_get_level_map(ctx.get(), &one, std::numeric_limits<uint64_t>::max()),
            PSA_ERR_OUT_OF_MEMORY);
  EXPECT_TRUE(mentions("level map")) << psa_last_error_message();
  EXPECT_EQ(one, 99);
  const std::string path = ::testing::TempDir() + "psa_new_api_big_map.png";
  EXPECT_EQ(psa_context_write_mask_png(ctx.get(), path.c_str(), PSA_MASK_VIEW_BLOCKS, 0, 0, -1,
                                       nullptr, 0),
            PSA_ERR_OUT_OF_MEMORY);
  plan->problem.batch = batch;
}

TEST(NewApiEdges, MaskPicturePathsAndArguments) {
  ContextPtr ctx = ran_context();
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(psa_context_write_mask_png(ctx.get(), dir.c_str(), PSA_MASK_VIEW_BLOCKS, 0, -1, -1,
                                       nullptr, 0),
            PSA_ERR_IO);
  EXPECT_TRUE(mentions("path")) << psa_last_error_message();
  EXPECT_EQ(psa_context_write_mask_png(ctx.get(), "/nonexistent-dir/x.png", PSA_MASK_VIEW_BLOCKS,
                                       0, -1, -1, nullptr, 0),
            PSA_ERR_IO);
  EXPECT_EQ(psa_context_write_mask_png(ctx.get(), nullptr, PSA_MASK_VIEW_BLOCKS, 0, -1, -1,
                                       nullptr, 0),
            PSA_ERR_NULL_POINTER);
  const std::string p = dir + "psa_new_api_edges.png";
  const struct {
    int64_t batch, head, qb;
    int32_t cell, view;
    const char* name;
  } bad[] = {{1, -1, -1, 0, 0, "batch"},      {-1, -1, -1, 0, 0, "batch"},
             {0, 2, -1, 0, 0, "head"},        {0, -2, -1, 0, 0, "head"},
             {0, -1, -1, 65, 0, "cell"},      {0, -1, -1, -1, 0, "cell"},
             {0, -1, -1, 0, 2, "view"},       {0, -1, -1, 0, -1, "view"},
             {0, -1, -1, 0, 1, "head"},       {0, 0, -1, 0, 1, "video grid"}};
  for (const auto& c : bad) {
    EXPECT_NE(psa_context_write_mask_png(ctx.get(), p.c_str(), static_cast<psa_mask_view>(c.view),
                                         c.batch, c.head, c.qb, nullptr, c.cell),
              PSA_OK)
        << c.name;
    EXPECT_TRUE(mentions(c.name)) << c.name << ": " << psa_last_error_message();
  }
  ASSERT_EQ(psa_context_set_video_grid(ctx.get(), 1, 16, 16, 0, PSA_TEXT_NONE), PSA_OK);
  const int64_t outside[3] = {0, 16, 0};
  EXPECT_NE(psa_context_write_mask_png(ctx.get(), p.c_str(), PSA_MASK_VIEW_VIDEO, 0, 0, -1,
                                       outside, 0),
            PSA_OK);
}

// A picture beyond kMaxPicturePixels is refused with a message naming cell, instead of an
// allocation of hundreds of gigabytes (64 heads x 1024^2 blocks at 64 pixels a block).
TEST(NewApiEdges, MaskPictureTooLargeIsRefused) {
  const int64_t heads = 64, blocks = 1024;
  std::vector<int8_t> levels(static_cast<size_t>(heads * blocks * blocks), 1);
  const std::string p = ::testing::TempDir() + "psa_new_api_huge.png";
  std::remove(p.c_str());
  EXPECT_EQ(psa_mask_write_png(p.c_str(), levels.data(), heads, blocks, blocks, -1, 64),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("cell = 64")) << psa_last_error_message();
  std::FILE* f = std::fopen(p.c_str(), "rb");
  EXPECT_EQ(f, nullptr);
  if (f) std::fclose(f);
  EXPECT_EQ(psa_mask_write_png(p.c_str(), levels.data(), 1, blocks, blocks, -1, 64),
            PSA_ERR_INVALID_ARGUMENT);
  // Bad sizes and NULLs.
  EXPECT_EQ(psa_mask_write_png(nullptr, levels.data(), 1, 1, 1, -1, 0), PSA_ERR_NULL_POINTER);
  EXPECT_EQ(psa_mask_write_png(p.c_str(), nullptr, 1, 1, 1, -1, 0), PSA_ERR_NULL_POINTER);
  EXPECT_EQ(psa_mask_write_png(p.c_str(), levels.data(), 0, 1, 1, -1, 0), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(psa_mask_write_png(p.c_str(), levels.data(), 1, -1, 1, -1, 0), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(psa_mask_write_png(p.c_str(), levels.data(), 1, 1, int64_t{1} << 40, -1, 0),
            PSA_ERR_INVALID_ARGUMENT);
  // Each size inside its own bound, their product far past what could be read (2^68
  // entries): refused by the product before a byte of the map is read.
  EXPECT_EQ(psa_mask_write_png(p.c_str(), levels.data(), 1 << 20, 1 << 24, 1 << 24, (1 << 20) - 1, 1),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("heads * q_blocks * k_blocks = 1048576 * 16777216 * 16777216"))
      << psa_last_error_message();
  EXPECT_EQ(psa_mask_write_png(p.c_str(), levels.data(), 2, 1 << 15, (1 << 15) + 1, 0, 1),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(psa_mask_write_png(p.c_str(), levels.data(), 1, 1, 1, 1, 0), PSA_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(mentions("head")) << psa_last_error_message();
  EXPECT_EQ(psa_mask_write_png(::testing::TempDir().c_str(), levels.data(), 1, 1, 1, -1, 0),
            PSA_ERR_IO);
}

TEST(NewApiEdges, SparseAttentionCpuArguments) {
  const int64_t L = 256, D = 32;
  std::vector<float> q(static_cast<size_t>(L * D), 0.25f), out(q.size(), kSentinel);
  const int64_t latent[3] = {1, 16, 16};
  const int64_t bad_latent[3] = {int64_t{1} << 62, int64_t{1} << 62, 4};
  struct Case {
    int64_t b, h, l, d, txt;
    const int64_t* latent;
    psa_method m;
    double sparsity, cdf, scale;
    int32_t layout, backend;
    const char* name;
  } cases[] = {
      {0, 1, L, D, 0, latent, PSA_METHOD_RF_V2, 0.5, 1, 0, 0, 1, "batch"},
      {1, -1, L, D, 0, latent, PSA_METHOD_RF_V2, 0.5, 1, 0, 0, 1, "heads"},
      {int64_t{1} << 40, int64_t{1} << 40, L, D, 0, latent, PSA_METHOD_RF_V2, 0.5, 1, 0, 0, 1,
       "overflows"},
      {1, 1, L, D, -1, latent, PSA_METHOD_RF_V2, 0.5, 1, 0, 0, 1, "txt_len"},
      {1, 1, L, D, L + 1, latent, PSA_METHOD_RF_V2, 0.5, 1, 0, 0, 1, "txt_len"},
      {1, 1, L, D, 0, nullptr, PSA_METHOD_RF_V2, 0.5, 1, 0, 0, 1, "latent_shape_q"},
      {1, 1, L, D, 0, bad_latent, PSA_METHOD_RF_V2, 0.5, 1, 0, 0, 1, "latent_shape_q"},
      {1, 1, L, D, 0, latent, PSA_METHOD_RF_V2, std::nan(""), 1, 0, 0, 1, "sparsity"},
      {1, 1, L, D, 0, latent, PSA_METHOD_ADA_BSA, 0.5, std::nan(""), 0, 0, 1, "cdf_threshold"},
      {1, 1, L, D, 0, latent, PSA_METHOD_ADA_BSA, 0.5, 1, -1, 0, 1, "scale"},
      {1, 1, L, D, 0, latent, PSA_METHOD_ADA_BSA, 0.5, 1, std::nan(""), 0, 1, "scale"},
      {1, 1, L, D, 0, latent, PSA_METHOD_ADA_BSA, 0.5, 1, 0, 9, 1, "layout"},
      {1, 1, L, D, 0, latent, PSA_METHOD_ADA_BSA, 0.5, 1, 0, 0, 9, "backend"},
      {1, 1, L, D, 0, latent, static_cast<psa_method>(42), 0.5, 1, 0, 0, 1, "method"},
  };
  for (const Case& c : cases) {
    EXPECT_NE(psa_sparse_attention(q.data(), q.data(), q.data(), out.data(), PSA_DTYPE_F32, c.b,
                                   c.h, c.l, c.d, static_cast<psa_layout>(c.layout), c.m,
                                   c.sparsity, c.txt, c.latent, 1, 1, c.cdf, c.scale, 0,
                                   static_cast<psa_backend>(c.backend), nullptr),
              PSA_OK)
        << c.name;
    EXPECT_TRUE(mentions(c.name)) << c.name << ": " << psa_last_error_message();
  }
  // out aliasing q: refused.
  std::vector<float> qq(q);
  EXPECT_NE(psa_sparse_attention(qq.data(), q.data(), q.data(), qq.data(), PSA_DTYPE_F32, 1, 1, L,
                                 D, PSA_LAYOUT_BNSD, PSA_METHOD_ADA_BSA, 0.5, 0, nullptr, 1, 1, 1,
                                 0, 0, PSA_BACKEND_CPU, nullptr),
            PSA_OK);
  EXPECT_TRUE(mentions("out")) << psa_last_error_message();
  for (float x : out) EXPECT_EQ(x, kSentinel);
  EXPECT_EQ(psa_sparse_attention(nullptr, q.data(), q.data(), out.data(), PSA_DTYPE_F32, 1, 1, L,
                                 D, PSA_LAYOUT_BNSD, PSA_METHOD_DENSE, 0, 0, nullptr, 1, 1, 1, 0,
                                 0, PSA_BACKEND_CPU, nullptr),
            PSA_ERR_NULL_POINTER);
}

}  // namespace
}  // namespace psa_robust
