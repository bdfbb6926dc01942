// tests/methods/method_test_util.h -- helpers for the rf_v2 / ada_bsa mask tests: plan a
// self-attention shape the way a context does, and run build_method_levels on one head.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "context/context.h"
#include "methods/methods.h"

namespace psa_test {

inline psa::Config method_config(psa_method m, double sparsity) {
  psa::Config c;
  c.method = m;
  c.block_m = 128;
  c.block_n = 128;
  c.sparsity = sparsity;
  return c;
}

inline psa::VideoGeometry grid(int64_t t, int64_t h, int64_t w, int64_t text = 0,
                               psa_text_position pos = PSA_TEXT_FIRST) {
  psa::VideoGeometry g;
  g.set = true;
  g.t = t;
  g.h = h;
  g.w = w;
  g.text_length = text;
  g.text_position = text > 0 ? pos : PSA_TEXT_NONE;
  return g;
}

inline psa::Plan plan_for(const psa::Config& cfg, const psa::VideoGeometry& geo, int64_t len,
                          int64_t d, double scale = 0.0) {
  psa::Config c = cfg;
  c.scale = scale;
  psa::Problem pb;
  pb.batch = 1;
  pb.heads_q = pb.heads_kv = 1;
  pb.len_q = pb.len_k = len;
  pb.head_dim = d;
  pb.dtype = PSA_DTYPE_F32;
  psa::Plan plan;
  const psa_status st = psa::make_plan(c, geo, pb, &plan);
  EXPECT_EQ(st, PSA_OK) << psa_last_error_message();
  return plan;
}

// Level map [nb, nb] of one head; q, k already in the plan's token order.
inline std::vector<int8_t> levels_of(const psa::Plan& plan,
                                     const std::vector<float>& q, const std::vector<float>& k,
                                     psa_status* status = nullptr) {
  std::vector<float> scratch(static_cast<size_t>(psa::method_scratch_floats(plan)));
  std::vector<int8_t> lv(static_cast<size_t>(plan.q_blocks * plan.k_blocks), -1);
  const psa_status st = psa::build_method_levels(plan, q.data(), k.data(), scratch.data(), lv.data());
  if (status) {
    *status = st;
  } else {
    EXPECT_EQ(st, PSA_OK) << psa_last_error_message();
  }
  return lv;
}

// "1101/0110/..." rows of a level map, for readable expectations.
inline std::string mask_string(const std::vector<int8_t>& lv, int64_t nb) {
  std::string s;
  for (int64_t i = 0; i < nb; ++i) {
    if (i) s += '/';
    for (int64_t j = 0; j < nb; ++j) s += static_cast<char>('0' + lv[static_cast<size_t>(i * nb + j)]);
  }
  return s;
}

// Local-attention video-like head (as tests/pipeline's preset test builds it): q and k share
// one smooth field over the t x h x w grid plus independent noise (0.3), so a query attends
// mostly to tokens near it, as positional structure makes it in video DiTs; v is its own
// field. Each vector is [t*h*w, d].
struct VideoHead {
  std::vector<float> q, k, v;
};
inline VideoHead local_video_head(std::mt19937_64& rng, int64_t t, int64_t h, int64_t w, int64_t d) {
  VideoHead r;
  const std::vector<float> field = video_like(rng, t, h, w, d, 0.0f);
  r.q = field;
  r.k = field;
  const std::vector<float> nq = random_vec(rng, field.size(), 0.3f), nk = random_vec(rng, field.size(), 0.3f);
  for (size_t e = 0; e < field.size(); ++e) {
    r.q[e] += nq[e];
    r.k[e] += nk[e];
  }
  r.v = video_like(rng, t, h, w, d);
  return r;
}

}  // namespace psa_test
