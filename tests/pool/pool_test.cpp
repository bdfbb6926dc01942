// tests/pool/pool_test.cpp -- K/V pyramid pooling against a one-shot double mean of the
// replicate-padded sequence.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "pool/pool.h"

namespace {

void check_pool(int64_t len, int64_t d, int64_t block_n) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " len " + std::to_string(len) + " bn " + std::to_string(block_n));
  std::mt19937_64 rng(seed);
  const auto x = psa_test::random_vec(rng, static_cast<size_t>(len * d));
  const int64_t nb = (len + block_n - 1) / block_n, padded = nb * block_n;
  std::vector<float> o2(padded / 2 * d, NAN), o4(padded / 4 * d, NAN), o8(padded / 8 * d, NAN);
  psa::pool_pyramid_cpu(x.data(), len, d, nb, block_n, o2.data(), o4.data(), o8.data());
  const std::vector<float>* outs[3] = {&o2, &o4, &o8};
  for (int li = 0; li < 3; ++li) {
    const int p = 2 << li;
    for (int64_t t = 0; t < padded / p; ++t)
      for (int64_t c = 0; c < d; ++c) {
        double want = 0;
        for (int u = 0; u < p; ++u) want += x[std::min(t * p + u, len - 1) * d + c];
        want /= p;
        ASSERT_NEAR((*outs[li])[t * d + c], want, 1e-5) << "level " << p << " token " << t;
      }
  }
}

TEST(Pool, ExactBlocks) { check_pool(256, 16, 64); }
TEST(Pool, PartialLastBlockReplicatesLastToken) { check_pool(203, 8, 128); }
TEST(Pool, SmallBlocks) { check_pool(77, 4, 32); }
TEST(Pool, SingleToken) { check_pool(1, 8, 32); }

TEST(Pool, LastBlockOfOneTokenIsThatToken) {
  // len = 129 with block 128: the second block is token 128 replicated 128 times.
  std::mt19937_64 rng(psa_test::fresh_seed());
  const int64_t d = 4, len = 129, bn = 128;
  const auto x = psa_test::random_vec(rng, len * d);
  std::vector<float> o2(256 / 2 * d), o4(256 / 4 * d), o8(256 / 8 * d);
  psa::pool_pyramid_cpu(x.data(), len, d, 2, bn, o2.data(), o4.data(), o8.data());
  for (int64_t t = 16; t < 32; ++t)
    for (int64_t c = 0; c < d; ++c) EXPECT_FLOAT_EQ(o8[t * d + c], x[128 * d + c]);
}

}  // namespace
