// tests/cuda/ring_cuda_test.cpp -- the PSA ring entries (psa_compute_level_map,
// psa_shard_attention) on a CUDA context: not implemented on the CUDA backend in this
// release, so every entry refuses with PSA_ERR_UNSUPPORTED naming the backend, writes
// nothing and does not touch the context's statistics. Skips without a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "psa.h"

namespace {

using psa::test::DevBuf;

TEST(RingCuda, EntriesRefuseTheCudaBackendCleanly) {
  PSA_REQUIRE_GPU();
  psa_config* cfg = nullptr;
  PSA_OK_MSG(psa_config_load_embedded("Wan2.1_1.3b", "psa_balanced", &cfg));
  PSA_OK_MSG(psa_config_set_int(cfg, PSA_PARAM_USE_REARRANGE, 0));
  psa_context* ctx = nullptr;
  PSA_OK_MSG(psa_context_create(cfg, PSA_BACKEND_CUDA, -1, &ctx));
  psa_tensor_desc q, k;
  PSA_OK_MSG(psa_tensor_desc_init(&q, PSA_LAYOUT_BNSD, PSA_DTYPE_BF16, 1, 2, 256, 64));
  PSA_OK_MSG(psa_tensor_desc_init(&k, PSA_LAYOUT_BNSD, PSA_DTYPE_BF16, 1, 2, 256, 64));
  uint64_t bytes = 7;
  EXPECT_EQ(psa_level_map_workspace_size(ctx, &q, &k, &bytes), PSA_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(psa_last_error_message()).find("backend = CUDA"), std::string::npos)
      << psa_last_error_message();
  EXPECT_EQ(bytes, 7u);
  EXPECT_EQ(psa_shard_attention_workspace_size(ctx, &q, &k, &k, &q, &bytes), PSA_ERR_UNSUPPORTED);
  DevBuf<uint16_t> dq(std::vector<uint16_t>(1 * 2 * 256 * 64, 0));
  std::vector<int8_t> sentinel(2 * 2 * 2, 5);
  DevBuf<int8_t> levels(sentinel);
  EXPECT_EQ(psa_compute_level_map(ctx, &q, dq.get(), &k, dq.get(), levels.get(), nullptr, 0, nullptr),
            PSA_ERR_UNSUPPORTED);
  EXPECT_EQ(levels.download(), sentinel);
  psa_stats st{};
  st.struct_size = sizeof(st);
  EXPECT_EQ(psa_context_get_stats(ctx, &st), PSA_ERR_INVALID_STATE);  // no forward ran
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
}

}  // namespace
