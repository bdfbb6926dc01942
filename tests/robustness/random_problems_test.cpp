// tests/robustness/random_problems_test.cpp -- forward problems drawn at random
// (common/random_problem.h: a shipped preset with parameters drawn over it, shapes, layouts, text
// tokens, Lq != Lk, sometimes a NaN in V) on the CPU backend, checked against what psa.h promises:
//   - psa_config_validate refuses exactly the configurations psa_context_create refuses, with the
//     same status;
//   - psa_check_supported gives the status of psa_workspace_size and of the forward itself;
//   - a failing forward writes nothing (the output and lse keep their poison);
//   - a forward that runs is deterministic (a second context: the same bits, the same level map);
//     its output is finite without the NaN in V; its lse is finite or -inf, never NaN (lse does
//     not depend on V);
//   - its statistics are its level map's: levels 0, 1, 2, 4, 8 only (1 everywhere for a dense
//     forward), the level fractions the map's counts, the density their sum of 1 / p.
// The seed is fresh per run (PSA_TEST_SEED replays it) and printed; PSA_RANDOM_PROBLEMS sets
// the count (30 by default).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/random_problem.h"
#include "psa.h"

namespace psa {
namespace {

using test::Operands;
using test::Outcome;
using test::Problem;

constexpr uint32_t kLsePoison = 0x7fc00123u;  // a NaN no forward writes

struct Ran {
  psa_status status = PSA_OK;
  std::string message;
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

// One forward on a context: output and lse poisoned first; the workspace from `bytes`, or 1 MiB
// when the workspace query failed (then the forward must fail as the query did).
Ran forward(psa_context* ctx, const Operands& in, const Problem& p, uint64_t bytes) {
  Ran r;
  r.out.assign(in.q.size(), 0xffffu);
  r.lse.assign(static_cast<size_t>(p.B * p.Hq * p.Lq), 0.0f);
  for (float& x : r.lse) std::memcpy(&x, &kLsePoison, 4);
  std::vector<unsigned char> ws(static_cast<size_t>(std::max<uint64_t>(bytes, 1)));
  r.status = psa_attention_forward(ctx, &in.qd, in.q.data(), &in.kd, in.k.data(), &in.vd, in.v.data(), &in.od,
                                   r.out.data(), r.lse.data(), ws.data(), ws.size(), nullptr);
  r.message = psa_last_error_message();
  return r;
}

bool untouched(const Ran& r) {
  for (uint16_t e : r.out)
    if (e != 0xffffu) return false;
  for (float x : r.lse) {
    uint32_t bits = 0;
    std::memcpy(&bits, &x, 4);
    if (bits != kLsePoison) return false;
  }
  return true;
}

TEST(RandomProblems, EntryPointsAgreeAndStatisticsAreTheLevelMaps) {
  const test::Sweep sweep = test::begin_sweep("random problems", "PSA_RANDOM_PROBLEMS", 30);
  const uint64_t seed = sweep.seed;
  const int problems = sweep.problems;
  std::mt19937_64 rng(seed);
  psa_catalog* cat = nullptr;
  ASSERT_EQ(PSA_OK, psa_catalog_open(nullptr, &cat)) << psa_last_error_message();
  int ran = 0, sparse = 0, refused_config = 0, refused_shape = 0;
  for (int n = 0; n < problems; ++n) {
    Problem p = test::draw(rng, cat);
    ASSERT_NE(nullptr, p.cfg);
    SCOPED_TRACE(testing::Message() << "seed " << seed << " problem " << n << ": " << p.describe);
    const Operands in = test::make_operands(p, static_cast<uint32_t>(rng()));
    const psa_status valid = psa_config_validate(p.cfg);
    psa_context* ctx = test::make_context(p, p.cfg, PSA_BACKEND_CPU);
    if (ctx == nullptr) {
      EXPECT_EQ(valid, psa_last_error_status()) << "psa_context_create refused what psa_config_validate gave "
                                                << psa_status_name(valid);
      EXPECT_NE(PSA_OK, valid);
      std::printf("[random problems] %3d %s: %s (%.160s)\n", n, p.describe.c_str(), psa_status_name(valid),
                  psa_last_error_message());
      ++refused_config;
      psa_config_destroy(p.cfg);
      continue;
    }
    EXPECT_EQ(PSA_OK, valid) << "psa_config_validate refused what psa_context_create took";
    const psa_status check = psa_check_supported(ctx, &in.qd, &in.kd, &in.vd, &in.od);
    const std::string check_message = psa_last_error_message();
    uint64_t bytes = 0;
    const psa_status sized = psa_workspace_size(ctx, &in.qd, &in.kd, &in.vd, &in.od, &bytes);
    EXPECT_EQ(check, sized) << "psa_check_supported: " << check_message;
    const Ran first = forward(ctx, in, p, sized == PSA_OK ? bytes : uint64_t{1} << 20);
    EXPECT_EQ(check, first.status) << "psa_check_supported: " << check_message << " / forward: " << first.message;
    if (first.status != PSA_OK) {
      EXPECT_TRUE(untouched(first)) << "a failing forward wrote its output or lse";
      EXPECT_FALSE(first.message.empty());
      std::printf("[random problems] %3d %s: %s (%.160s)\n", n, p.describe.c_str(), psa_status_name(first.status),
                  first.message.c_str());
      ++refused_shape;
      psa_context_destroy(ctx);
      psa_config_destroy(p.cfg);
      continue;
    }
    ++ran;
    Outcome o;
    test::read_back(ctx, &o);
    psa_context_destroy(ctx);

    // A second context gives the same bits and the same level map.
    psa_context* again = test::make_context(p, p.cfg, PSA_BACKEND_CPU);
    ASSERT_NE(nullptr, again) << psa_last_error_message();
    const Ran second = forward(again, in, p, bytes);
    ASSERT_EQ(PSA_OK, second.status) << second.message;
    Outcome o2;
    test::read_back(again, &o2);
    psa_context_destroy(again);
    EXPECT_TRUE(first.out == second.out) << "the output differs between two runs";
    EXPECT_EQ(0, std::memcmp(first.lse.data(), second.lse.data(), first.lse.size() * 4)) << "lse differs";
    EXPECT_TRUE(o.levels == o2.levels) << "the level map differs between two runs";

    // Values: finite output without a NaN in V (the strided buffer's padding keeps its poison);
    // lse finite or -inf.
    const std::vector<float> out = test::unpack(first.out, in.od, [&](uint16_t e) { return test::from16(e, p.dtype); });
    int64_t non_finite = 0, bad_lse = 0;
    for (float x : out) non_finite += !std::isfinite(x);
    for (float x : first.lse) bad_lse += !(std::isfinite(x) || x == -INFINITY);
    if (!p.nan_v) {
      EXPECT_EQ(0, non_finite) << "finite inputs gave non-finite output elements";
    }
    EXPECT_EQ(0, bad_lse) << "lse values neither finite nor -inf";

    // Statistics against the level map.
    const psa_stats& st = o.stats;
    ASSERT_EQ(static_cast<size_t>(p.B * p.Hq * st.query_blocks * st.key_blocks), o.levels.size());
    int64_t count[5] = {0, 0, 0, 0, 0};  // levels 1, 2, 4, 8, 0 (PSA_STAT_LEVEL_* order)
    double inverse_sum = 0;
    for (int8_t l : o.levels) {
      switch (l) {
        case 1: ++count[PSA_STAT_LEVEL_1]; break;
        case 2: ++count[PSA_STAT_LEVEL_2]; break;
        case 4: ++count[PSA_STAT_LEVEL_4]; break;
        case 8: ++count[PSA_STAT_LEVEL_8]; break;
        case 0: ++count[PSA_STAT_LEVEL_SKIP]; break;
        default: ADD_FAILURE() << "level " << static_cast<int>(l) << " in the map"; break;
      }
      if (l > 0) inverse_sum += 1.0 / l;
    }
    const double pairs = static_cast<double>(o.levels.size());
    for (int s = 0; s < 5; ++s)
      EXPECT_NEAR(static_cast<double>(count[s]) / pairs, st.level_fraction[s], 1e-12) << "level slot " << s;
    if (st.ran_dense) {
      EXPECT_EQ(o.levels.size(), static_cast<size_t>(count[PSA_STAT_LEVEL_1])) << "a dense forward's map holds 1";
      EXPECT_EQ(1.0, st.density);
    } else {
      EXPECT_NEAR(inverse_sum / pairs, st.density, 1e-12);
    }
    sparse += st.density < 1.0;
    psa_config_destroy(p.cfg);
  }
  psa_catalog_destroy(cat);
  std::printf("[random problems] %d problems: %d ran (%d sparse), %d configurations and %d problems refused\n",
              problems, ran, sparse, refused_config, refused_shape);
  EXPECT_GT(ran, problems / 3);
}

}  // namespace
}  // namespace psa
