// tests/rearrange/sequence_plan_test.cpp -- rearrange stage: build_sequence_plan layouts
// (spec 7.2, 7.3, 8.2), round trips and error reporting. Host only; no CUDA.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "rearrange/rearrange.h"

namespace {

using psa::SequencePlan;
using psa::VideoGeometry;

VideoGeometry geometry(int64_t t, int64_t h, int64_t w, int64_t text,
                       psa_text_position where) {
  VideoGeometry g;
  g.set = true;
  g.t = t;
  g.h = h;
  g.w = w;
  g.text_length = text;
  g.text_position = where;
  return g;
}

psa::Config rearranging(psa_rearrange method) {
  psa::Config c;
  c.use_rearrange = true;
  c.rearrange_method = method;
  return c;
}

// Token values stand for their caller index so that a wrong map is visible in the values.
std::vector<int64_t> caller_tokens(int64_t n) {
  std::vector<int64_t> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = 1000 + i;
  return x;
}

// x_r[i] = x[src[i]]
std::vector<int64_t> apply(const SequencePlan& p, const std::vector<int64_t>& x) {
  std::vector<int64_t> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = x[static_cast<size_t>(p.src[i])];
  return r;
}

// out[src[i]] = out_r[i]
std::vector<int64_t> invert(const SequencePlan& p, const std::vector<int64_t>& r) {
  std::vector<int64_t> out(r.size(), -1);
  for (size_t i = 0; i < r.size(); ++i) out[static_cast<size_t>(p.src[i])] = r[i];
  return out;
}

void expect_round_trip(const SequencePlan& p, int64_t n) {
  ASSERT_EQ(static_cast<int64_t>(p.src.size()), n);
  const std::vector<int64_t> x = caller_tokens(n);
  EXPECT_EQ(invert(p, apply(p, x)), x);
}

TEST(SequencePlan, GilbertNoText) {
  SequencePlan p;
  ASSERT_EQ(psa::build_sequence_plan(rearranging(PSA_REARRANGE_GILBERT),
                                     geometry(3, 5, 7, 0, PSA_TEXT_NONE), 105, &p),
            PSA_OK);
  EXPECT_EQ(p.length, 105);
  EXPECT_EQ(p.src, psa::gilbert3d_order(7, 5, 3));  // W = w, H = h, D = t
  EXPECT_EQ(p.text_begin, p.text_end);
  expect_round_trip(p, 105);
}

TEST(SequencePlan, GilbertTextFirstMovesTextToTheEnd) {
  const int64_t T = 5, N = 2 * 4 * 6;
  SequencePlan p;
  ASSERT_EQ(psa::build_sequence_plan(rearranging(PSA_REARRANGE_GILBERT),
                                     geometry(2, 4, 6, T, PSA_TEXT_FIRST), N + T, &p),
            PSA_OK);
  const std::vector<int64_t> f = psa::gilbert3d_order(6, 4, 2);
  for (int64_t i = 0; i < N; ++i) EXPECT_EQ(p.src[i], T + f[i]) << i;
  for (int64_t j = 0; j < T; ++j) EXPECT_EQ(p.src[N + j], j) << j;
  EXPECT_EQ(p.text_begin, N);
  EXPECT_EQ(p.text_end, N + T);
  expect_round_trip(p, N + T);
}

TEST(SequencePlan, GilbertTextLastStaysAtTheEnd) {
  const int64_t T = 3, N = 3 * 3 * 5;
  SequencePlan p;
  ASSERT_EQ(psa::build_sequence_plan(rearranging(PSA_REARRANGE_GILBERT),
                                     geometry(3, 3, 5, T, PSA_TEXT_LAST), N + T, &p),
            PSA_OK);
  const std::vector<int64_t> f = psa::gilbert3d_order(5, 3, 3);
  for (int64_t i = 0; i < N; ++i) EXPECT_EQ(p.src[i], f[i]) << i;
  for (int64_t j = 0; j < T; ++j) EXPECT_EQ(p.src[N + j], N + j) << j;
  EXPECT_EQ(p.text_begin, N);
  EXPECT_EQ(p.text_end, N + T);
  expect_round_trip(p, N + T);
}

TEST(SequencePlan, GilbertCogVideoX5B) {
  const int64_t T = 226, N = 13 * 30 * 45;
  SequencePlan p;
  ASSERT_EQ(psa::build_sequence_plan(rearranging(PSA_REARRANGE_GILBERT),
                                     geometry(13, 30, 45, T, PSA_TEXT_FIRST), N + T, &p),
            PSA_OK);
  EXPECT_EQ(p.length, 17776);
  EXPECT_EQ(p.text_begin, 17550);
  EXPECT_EQ(p.text_end, 17776);
  EXPECT_EQ(p.src[1], T + 1350);  // spec 7.1: F[1] = 1350, shifted past the text prefix
  expect_round_trip(p, N + T);
}

TEST(SequencePlan, StaKeepsTextWhereItIs) {
  const int64_t N = 4 * 6 * 8;
  const std::vector<int64_t> f = psa::sta_order(8, 6, 4, 2, 3, 4);
  psa::Config c = rearranging(PSA_REARRANGE_STA);
  c.sta_tile[0] = 2;
  c.sta_tile[1] = 3;
  c.sta_tile[2] = 4;
  for (int64_t T : {int64_t{0}, int64_t{7}}) {
    for (psa_text_position where : {PSA_TEXT_FIRST, PSA_TEXT_LAST}) {
      SCOPED_TRACE("T = " + std::to_string(T) + ", position " + std::to_string(where));
      SequencePlan p;
      ASSERT_EQ(psa::build_sequence_plan(c, geometry(4, 6, 8, T, where), N + T, &p), PSA_OK);
      const int64_t video = where == PSA_TEXT_FIRST ? T : 0;
      const int64_t text = where == PSA_TEXT_FIRST ? 0 : N;
      for (int64_t i = 0; i < N; ++i) EXPECT_EQ(p.src[video + i], video + f[i]) << i;
      for (int64_t j = 0; j < T; ++j) EXPECT_EQ(p.src[text + j], text + j) << j;
      EXPECT_EQ(p.text_end - p.text_begin, T);
      if (T > 0) {
        EXPECT_EQ(p.text_begin, text);
      }
      expect_round_trip(p, N + T);
    }
  }
}

TEST(SequencePlan, StaGridNotDivisibleIsInvalidConfig) {
  SequencePlan p;
  p.length = 42;  // must survive a failed call
  const psa_status s = psa::build_sequence_plan(rearranging(PSA_REARRANGE_STA),
                                                geometry(13, 30, 45, 226, PSA_TEXT_FIRST),
                                                17776, &p);
  EXPECT_EQ(s, PSA_ERR_INVALID_CONFIG);
  const std::string msg = psa::last_error_message();
  EXPECT_NE(msg.find("[2, 8, 8]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("13*30*45"), std::string::npos) << msg;
  EXPECT_EQ(p.length, 42);
  EXPECT_TRUE(p.src.empty());
}

TEST(SequencePlan, SeqLenMismatchIsInvalidShape) {
  SequencePlan p;
  EXPECT_EQ(psa::build_sequence_plan(rearranging(PSA_REARRANGE_GILBERT),
                                     geometry(21, 30, 52, 0, PSA_TEXT_NONE), 1000, &p),
            PSA_ERR_INVALID_SHAPE);
  EXPECT_STREQ(psa::last_error_message(),
               "seq_len = 1000: expected t*h*w + text_length = 21*30*52 + 0 = 32760");

  // Checked even when no rearrangement is requested: the text span depends on it.
  EXPECT_EQ(psa::build_sequence_plan(psa::Config{}, geometry(13, 30, 45, 226, PSA_TEXT_FIRST),
                                     17550, &p),
            PSA_ERR_INVALID_SHAPE);
  const std::string msg = psa::last_error_message();
  EXPECT_NE(msg.find("17550"), std::string::npos) << msg;
  EXPECT_NE(msg.find("17776"), std::string::npos) << msg;
}

TEST(SequencePlan, GeometryNotSetIsIdentity) {
  SequencePlan p;
  p.src = {1, 0};
  ASSERT_EQ(psa::build_sequence_plan(rearranging(PSA_REARRANGE_GILBERT), VideoGeometry{}, 4096,
                                     &p),
            PSA_OK);
  EXPECT_TRUE(p.src.empty());
  EXPECT_EQ(p.length, 4096);
  EXPECT_EQ(p.text_begin, 0);
  EXPECT_EQ(p.text_end, 0);
}

TEST(SequencePlan, RearrangeOffIsIdentityWithTextSpan) {
  const int64_t T = 226, N = 13 * 30 * 45;
  psa::Config off;  // use_rearrange defaults to false
  SequencePlan p;
  ASSERT_EQ(psa::build_sequence_plan(off, geometry(13, 30, 45, T, PSA_TEXT_FIRST), N + T, &p),
            PSA_OK);
  EXPECT_TRUE(p.src.empty());
  EXPECT_EQ(p.length, N + T);
  EXPECT_EQ(p.text_begin, 0);
  EXPECT_EQ(p.text_end, T);

  ASSERT_EQ(psa::build_sequence_plan(off, geometry(13, 30, 45, T, PSA_TEXT_LAST), N + T, &p),
            PSA_OK);
  EXPECT_TRUE(p.src.empty());
  EXPECT_EQ(p.text_begin, N);
  EXPECT_EQ(p.text_end, N + T);
}

TEST(SequencePlan, KMeansMethodsAreUnsupported) {
  for (psa_rearrange m : {PSA_REARRANGE_SEMANTIC_AWARE, PSA_REARRANGE_HYBRID}) {
    SequencePlan p;
    EXPECT_EQ(psa::build_sequence_plan(rearranging(m), geometry(2, 2, 2, 0, PSA_TEXT_NONE), 8,
                                       &p),
              PSA_ERR_UNSUPPORTED);
    const std::string msg = psa::last_error_message();
    EXPECT_NE(msg.find(m == PSA_REARRANGE_HYBRID ? "Hybrid" : "SemanticAware"),
              std::string::npos)
        << msg;
  }
}

TEST(SequencePlan, InvalidArguments) {
  const psa::Config c = rearranging(PSA_REARRANGE_GILBERT);
  SequencePlan p;
  EXPECT_EQ(psa::build_sequence_plan(c, geometry(2, 2, 2, 0, PSA_TEXT_NONE), 8, nullptr),
            PSA_ERR_NULL_POINTER);
  EXPECT_EQ(psa::build_sequence_plan(c, geometry(2, 2, 2, 4, PSA_TEXT_NONE), 12, &p),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(psa::build_sequence_plan(c, geometry(0, 2, 2, 0, PSA_TEXT_NONE), 0, &p),
            PSA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(psa::build_sequence_plan(c, geometry(2, 2, 2, -1, PSA_TEXT_FIRST), 7, &p),
            PSA_ERR_INVALID_ARGUMENT);
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(psa::build_sequence_plan(c, geometry(big, big, 2, 0, PSA_TEXT_NONE), 8, &p),
            PSA_ERR_INVALID_SHAPE);
  psa::Config bad_tile = rearranging(PSA_REARRANGE_STA);
  bad_tile.sta_tile[1] = 0;
  EXPECT_EQ(psa::build_sequence_plan(bad_tile, geometry(2, 2, 2, 0, PSA_TEXT_NONE), 8, &p),
            PSA_ERR_INVALID_CONFIG);
}

}  // namespace
