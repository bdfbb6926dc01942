// tests/attention/fp8_test.cpp -- the 8-bit ("fp8") path's formats and oracle: every e4m3 code
// against the format's definition, the rounding against a nearest-value search over the code
// table (ties to even, saturation, NaN, signed zero), the int8 rounding, the oracle against an
// independent double-precision evaluation of the rule and its variants (attention_fp8.h) on
// fresh random inputs, its error against the fp32 path, the K smoothing under a per-channel key
// bias, and edge rows.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attention/attention.h"
#include "attention/attention_fp8.h"
#include "attention/fp8_spec.h"
#include "common/test_util.h"
#include "pool/pool.h"

namespace {

// The non-negative finite e4m3 values indexed by code 0x00..0x7e, from the format's definition.
std::vector<double> positive_values() {
  std::vector<double> v;
  for (int code = 0; code < 0x7f; ++code) {
    const int e = code >> 3, m = code & 7;
    v.push_back(e == 0 ? std::ldexp(double(m), -9) : std::ldexp(double(8 + m), e - 10));
  }
  return v;
}

// x rounded to e4m3 by searching the table: nearest value, ties to the even code; |x| >= 448
// saturates; NaN stays NaN; the sign is kept (also on zero).
double ref_round(double x) {
  static const std::vector<double> vals = positive_values();
  if (std::isnan(x)) return x;
  const double a = std::fabs(x);
  double best = 448.0;
  if (a < 448.0) {
    int bc = 0;
    for (int c = 1; c < static_cast<int>(vals.size()); ++c) {
      const double dc = std::fabs(a - vals[c]), db = std::fabs(a - vals[bc]);
      if (dc < db || (dc == db && (c & 1) == 0)) bc = c;
    }
    best = vals[bc];
  }
  return std::signbit(x) ? -best : best;
}

// An integer in [lo, hi], ties to even (the default rounding mode of nearbyint).
double ref_round_int(double x, double lo, double hi) { return std::nearbyint(std::min(hi, std::max(lo, x))); }

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

TEST(Fp8Formats, EveryCodeDecodesToTheFormatsValue) {
  const std::vector<double> vals = positive_values();
  for (int code = 0; code < 256; ++code) {
    const float got = psa::e4m3_to_float(static_cast<uint8_t>(code));
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(got)) << code;
      continue;
    }
    const double want = (code & 0x80) != 0 ? -vals[code & 0x7f] : vals[code & 0x7f];
    EXPECT_EQ(bits(static_cast<float>(want)), bits(got)) << "code " << code;
    // And back: every finite code is a fixed point of the rounding.
    EXPECT_EQ(code, psa::float_to_e4m3(got)) << "code " << code;
  }
  EXPECT_EQ(448.0f, psa::e4m3_to_float(0x7e));
  EXPECT_EQ(1.0f, psa::e4m3_to_float(0x38));
  EXPECT_EQ(std::ldexp(1.0f, -6), psa::e4m3_to_float(0x08));
  EXPECT_EQ(std::ldexp(1.0f, -9), psa::e4m3_to_float(0x01));
}

TEST(Fp8Formats, RoundsToNearestEvenAndSaturates) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<float> xs = {0.0f, -0.0f, 448.0f, -448.0f, 447.99f, 448.01f, 464.0f, 480.0f, 1e30f, -1e30f,
                           INFINITY, -INFINITY, FLT_MIN, -FLT_MIN, std::ldexp(1.0f, -140), std::ldexp(1.0f, -10),
                           std::ldexp(3.0f, -11), std::ldexp(1.0f, -6), std::ldexp(15.0f, -10)};
  // Every midpoint between neighbouring codes (an exact tie) and one fp32 ulp either side.
  const std::vector<double> vals = positive_values();
  for (size_t c = 0; c + 1 < vals.size(); ++c) {
    const float mid = static_cast<float>((vals[c] + vals[c + 1]) / 2);  // exact in fp32
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  std::uniform_real_distribution<double> lg(-14.0, 10.0);
  for (int i = 0; i < 20000; ++i) {
    const float x = static_cast<float>(std::exp2(lg(rng)));
    xs.push_back(i % 2 ? -x : x);
  }
  for (float x : xs) {
    const float got = psa::round_e4m3(x);
    const float want = static_cast<float>(ref_round(static_cast<double>(x)));
    EXPECT_EQ(bits(want), bits(got)) << "x " << x << " (bits " << bits(x) << ")";
  }
  EXPECT_TRUE(std::isnan(psa::round_e4m3(NAN)));
  EXPECT_EQ(0x80, psa::float_to_e4m3(-0.0f));
  EXPECT_EQ(0x7e, psa::float_to_e4m3(INFINITY));
  EXPECT_EQ(0xfe, psa::float_to_e4m3(-INFINITY));
}

TEST(Fp8Formats, IntegerRounding) {
  EXPECT_EQ(2.0f, psa::round_int(2.5f, -127, 127));  // ties to even
  EXPECT_EQ(4.0f, psa::round_int(3.5f, -127, 127));
  EXPECT_EQ(-2.0f, psa::round_int(-2.5f, -127, 127));
  EXPECT_EQ(127.0f, psa::round_int(1e9f, -127, 127));
  EXPECT_EQ(-127.0f, psa::round_int(-200.4f, -127, 127));
  EXPECT_EQ(0.0f, psa::round_int(-3.0f, 0, 255));
  EXPECT_EQ(255.0f, psa::round_int(254.6f, 0, 255));
  EXPECT_TRUE(std::isnan(psa::int8_quantize(INFINITY, 1.0f)));
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-300.0f, 300.0f);
  for (int i = 0; i < 10000; ++i) {
    const float x = u(rng);
    EXPECT_EQ(static_cast<float>(ref_round_int(x, -127, 127)), psa::round_int(x, -127, 127)) << x;
  }
}

TEST(Fp8Formats, ScaleRule) {
  const psa::Fp8Scale s = psa::fp8_scale(3.5f);
  EXPECT_EQ(448.0f / 3.5f, s.inv);
  EXPECT_EQ(3.5f / 448.0f, s.s);
  for (float amax : {0.0f, NAN, 1e-40f}) {  // 448 / 1e-40 overflows
    EXPECT_EQ(1.0f, psa::fp8_scale(amax).inv) << amax;
    EXPECT_EQ(1.0f, psa::fp8_scale(amax).s) << amax;
  }
  float amax = 0.0f;
  for (float x : {1.0f, -7.5f, NAN, INFINITY, -INFINITY, 2.0f}) amax = psa::fp8_amax(amax, x);
  EXPECT_EQ(7.5f, amax);
  EXPECT_EQ(448.0f, psa::fp8_quantize(7.5f, 448.0f / 7.5f));
  EXPECT_EQ(-448.0f, psa::fp8_quantize(-7.5f, 448.0f / 7.5f));
  for (float x : {NAN, INFINITY, -INFINITY}) EXPECT_TRUE(std::isnan(psa::fp8_quantize(x, 1.0f))) << x;
}

TEST(Fp8Formats, PowerOfTwoScaleRule) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> lg(-100.0, 120.0);  // quotients stay normal
  for (int i = 0; i < 20000; ++i) {
    const float amax = static_cast<float>(std::exp2(lg(rng)));
    const float qmax = i % 2 == 0 ? 448.0f : 127.0f;
    const psa::Fp8Scale s = psa::fp8_scale_pow2(amax, qmax);
    int e = 0;
    ASSERT_EQ(0.5, std::frexp(static_cast<double>(s.s), &e)) << amax << ": a power of two";
    ASSERT_EQ(1.0f, s.s * s.inv) << amax << ": inv = 1 / s exactly";
    const float r = amax / qmax;
    ASSERT_GE(s.s, r) << amax << ": the values stay within qmax";
    ASSERT_LT(s.s / 2.0f, r) << amax << ": the smallest such power";
  }
  EXPECT_EQ(1.0f, psa::fp8_scale_pow2(448.0f).s);        // already a power of two: kept
  EXPECT_EQ(0.25f, psa::fp8_scale_pow2(112.0f).s);
  EXPECT_EQ(0.5f, psa::fp8_scale_pow2(112.5f).s);
  EXPECT_EQ(2.0f, psa::fp8_scale_pow2(112.5f).inv);
  EXPECT_EQ(std::ldexp(1.0f, -126), psa::fp8_scale_pow2(1e-40f).s);  // subnormal quotient: 2^-126
  for (float amax : {0.0f, NAN, -1.0f}) {
    EXPECT_EQ(1.0f, psa::fp8_scale_pow2(amax).inv) << amax;
    EXPECT_EQ(1.0f, psa::fp8_scale_pow2(amax).s) << amax;
  }
}

// One head with its pyramid (fp32, pool_pyramid_cpu) and a random level map.
struct Head {
  int64_t lq, lk, d, bm, bn;
  std::vector<float> q, k[4], v[4];
  std::vector<int8_t> levels;
  psa::Pyramid kp, vp;
  Head(std::mt19937_64& rng, int64_t lq_, int64_t lk_, int64_t d_, int64_t bm_, int64_t bn_, float kbias = 0.0f)
      : lq(lq_), lk(lk_), d(d_), bm(bm_), bn(bn_) {
    q = psa_test::random_vec(rng, lq * d);
    k[0] = psa_test::random_vec(rng, lk * d);
    v[0] = psa_test::random_vec(rng, lk * d);
    // A per-channel bias shared by every key (drawn also when kbias is 0, so that heads of one
    // seed differ only by it).
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> b(d);
    for (auto& x : b) x = kbias * n(rng);
    for (int64_t i = 0; i < lk * d; ++i) k[0][i] += b[i % d];
    pool();
    const int64_t nk = this->nk();
    std::uniform_int_distribution<int> pick(0, 4);
    const int8_t lv[5] = {0, 1, 2, 4, 8};
    levels.resize(mq() * nk);
    for (auto& l : levels) l = lv[pick(rng)];
    for (int64_t i = 0; i < mq(); ++i) levels[i * nk + (i % nk)] = 1;  // no empty row
  }
  // The pooled levels of k[0] and v[0] (again after a change to them).
  void pool() {
    const int64_t nk = this->nk(), padded = nk * bn;
    for (int li = 1; li < 4; ++li) {
      k[li].assign(padded / (1 << li) * d, 0.0f);
      v[li].assign(padded / (1 << li) * d, 0.0f);
    }
    psa::pool_pyramid_cpu(k[0].data(), lk, d, nk, bn, k[1].data(), k[2].data(), k[3].data());
    psa::pool_pyramid_cpu(v[0].data(), lk, d, nk, bn, v[1].data(), v[2].data(), v[3].data());
    for (int li = 0; li < 4; ++li) {
      kp.level[li] = k[li].data();
      vp.level[li] = v[li].data();
    }
  }
  int64_t mq() const { return (lq + bm - 1) / bm; }
  int64_t nk() const { return (lk + bn - 1) / bn; }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(d)); }
  std::vector<float> fp32(std::vector<float>* lse = nullptr) const {
    std::vector<float> out(lq * d), l(lq);
    psa::sparse_attention_cpu(q.data(), lq, kp, vp, lk, d, bm, bn, levels.data(), scale(), false, out.data(),
                              l.data());
    if (lse) *lse = l;
    return out;
  }
  std::vector<float> fp8(const psa::Fp8Rule& rule, std::vector<float>* lse = nullptr) const {
    const psa::Fp8HeadCpu h = psa::fp8_quantize_head_cpu(q.data(), lq, kp, vp, lk, d, bm, bn, rule);
    std::vector<float> out(lq * d), l(lq);
    psa::sparse_attention_fp8_cpu(h, levels.data(), scale(), false, 0, lq, out.data(), l.data());
    if (lse) *lse = l;
    return out;
  }
};


// The rule of attention_fp8.h evaluated independently: quantization with the fp32 steps the rule
// fixes (scale divisions, products, smoothing subtraction) and ref_round / ref_round_int,
// attention in double.
std::vector<double> reference(const Head& h, const psa::Fp8Rule& rule) {
  const int64_t d = h.d, nk = h.nk();
  const float qk_max = rule.qk_int8 ? 127.0f : 448.0f, v_max = rule.pv_int8 ? 127.0f : 448.0f;
  const double p_max = rule.pv_int8 ? 255.0 : 448.0;
  // Groups of `group` rows, one scale each, of y = (x - mean) * mul (per channel).
  std::vector<double> amaxes;  // of the last call's groups
  // pow2: the scale rounded up to a power of two (2^ceil(log2(amax / qmax)), at least 2^-126).
  auto quant = [&](const std::vector<float>& x, int64_t rows, int64_t group, const std::vector<float>& mean,
                   const std::vector<float>& mul, bool int8, float qmax, std::vector<double>& x8,
                   std::vector<double>& sc, bool pow2 = false) {
    x8.assign(rows * d, 0);
    sc.clear();
    amaxes.clear();
    for (int64_t g0 = 0; g0 < rows; g0 += group) {
      const int64_t g1 = std::min(rows, g0 + group);
      float amax = 0;
      for (int64_t i = g0 * d; i < g1 * d; ++i) amax = std::max(amax, std::fabs((x[i] - mean[i % d]) * mul[i % d]));
      float inv = amax > 0 ? qmax / amax : 1.0f, s = amax > 0 ? amax / qmax : 1.0f;
      if (pow2 && amax > 0) {
        const double e = std::max(std::ceil(std::log2(static_cast<double>(amax / qmax))), -126.0);
        s = static_cast<float>(std::ldexp(1.0, static_cast<int>(e)));
        inv = static_cast<float>(std::ldexp(1.0, -static_cast<int>(e)));
      }
      for (int64_t i = g0 * d; i < g1 * d; ++i) {
        const float y = static_cast<float>((x[i] - mean[i % d]) * mul[i % d] * inv);
        x8[i] = int8 ? ref_round_int(y, -127, 127) : ref_round(y);
      }
      sc.push_back(s);
      amaxes.push_back(amax);
    }
  };
  const std::vector<float> zero(d, 0.0f), one(d, 1.0f);
  std::vector<float> mean(d, 0.0f), qmul(d, 1.0f), kmul(d, 1.0f);
  if (rule.smooth_k) {
    const int64_t step = rule.k_mean_block_firsts ? h.bn : 1;  // the first token of each block
    for (int64_t c = 0; c < d; ++c) {
      double s = 0;
      int64_t n = 0;
      for (int64_t t = 0; t < h.lk; t += step, ++n) s += h.k[0][t * d + c];
      mean[c] = static_cast<float>(s / n);
    }
  }
  if (rule.migrate_channels) {
    for (int64_t c = 0; c < d; ++c) {
      float aq = 0, ak = 0;
      for (int64_t x = 0; x < h.lq; ++x) aq = std::max(aq, std::fabs(h.q[x * d + c]));
      for (int64_t t = 0; t < h.lk; ++t) ak = std::max(ak, std::fabs(h.k[0][t * d + c] - mean[c]));
      qmul[c] = std::sqrt(ak / aq);
      kmul[c] = 1.0f / qmul[c];
    }
  }
  std::vector<double> q8, qs, k8[4], ks[4], v8[4], vs(d), vinv(d), vbs[4];
  quant(h.q, h.lq, rule.q_per_row ? 1 : h.bm, zero, qmul, rule.qk_int8, qk_max, q8, qs);
  for (int64_t c = 0; c < d; ++c) {
    float amax = 0;
    for (int64_t t = 0; t < h.lk; ++t) amax = std::max(amax, std::fabs(h.v[0][t * d + c]));
    vinv[c] = v_max / amax;
    vs[c] = amax / v_max;
  }
  double vsmax = 0;
  std::vector<double> vamax[4];
  for (int li = 0; li < 4; ++li) {
    const int64_t len = li == 0 ? h.lk : nk * h.bn >> li;
    quant(h.k[li], len, h.bn >> li, mean, kmul, rule.qk_int8, qk_max, k8[li], ks[li]);
    if (rule.v_per_block) {
      quant(h.v[li], len, h.bn >> li, zero, one, rule.pv_int8, v_max, v8[li], vbs[li], rule.v_scale_pow2);
      vamax[li] = amaxes;
      for (size_t j = 0; j < vbs[li].size(); ++j)
        if (vamax[li][j] > 0) vsmax = std::max(vsmax, vbs[li][j]);
      continue;
    }
    v8[li].resize(len * d);
    for (int64_t i = 0; i < len * d; ++i) {
      const float y = static_cast<float>(h.v[li][i] * static_cast<float>(vinv[i % d]));
      v8[li][i] = rule.pv_int8 ? ref_round_int(y, -127, 127) : ref_round(y);
    }
  }
  std::vector<double> out(h.lq * d, 0.0);
  for (int64_t x = 0; x < h.lq; ++x) {
    const int64_t i = x / h.bm;
    const double sq = qs[rule.q_per_row ? x : i];
    struct Tok {
      double z, f;  // logit; with v_per_block the block's share of the largest V scale
      const double* v;
    };
    std::vector<Tok> zs;
    double m = -INFINITY;
    for (int64_t j = 0; j < nk; ++j) {
      const int level = h.levels[i * nk + j];
      if (level == 0) continue;
      const int li = level == 1 ? 0 : level == 2 ? 1 : level == 4 ? 2 : 3;
      for (int64_t u = 0; u < h.bn / level; ++u) {
        const int64_t t = j * (h.bn / level) + u;
        if (level == 1 && t >= h.lk) continue;
        double s = 0;
        for (int64_t c = 0; c < d; ++c) s += q8[x * d + c] * k8[li][t * d + c];
        const double z = s * sq * ks[li][j] * h.scale() + std::log(double(level));
        const double f = !rule.v_per_block ? 1.0 : vamax[li][j] > 0 ? double(static_cast<float>(vbs[li][j] / vsmax)) : 1.0;
        zs.push_back({z, f, v8[li].data() + t * d});
        m = std::max(m, z);
      }
    }
    double l = 0;
    for (const Tok& tk : zs) {
      const double p = std::exp(tk.z - m), w = p * tk.f * p_max;
      const double p8 = rule.pv_int8 ? ref_round_int(w, 0, 255) : ref_round(w);
      l += rule.l_quantized ? p8 / (p_max * tk.f) : p;
      for (int64_t c = 0; c < d; ++c) out[x * d + c] += p8 * tk.v[c];
    }
    for (int64_t c = 0; c < d; ++c) out[x * d + c] *= (rule.v_per_block ? vsmax : vs[c]) / p_max / l;
  }
  return out;
}

// Rows x of got whose relative L2 distance to want's row exceeds tol (rows of d values).
template <typename G>
int64_t rows_off(const std::vector<G>& got, const std::vector<double>& want, int64_t rows, int64_t d, double tol) {
  int64_t n = 0;
  for (int64_t x = 0; x < rows; ++x) {
    double num = 0, den = 0;
    for (int64_t c = 0; c < d; ++c) {
      const double e = static_cast<double>(got[x * d + c]) - want[x * d + c];
      num += e * e;
      den += want[x * d + c] * want[x * d + c];
    }
    n += !(num <= tol * tol * den);
  }
  return n;
}

TEST(Fp8Attention, OracleFollowsTheRule) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Head h(rng, 96, 200, 32, 32, 32, 2.0f);
  // Key block 2's values all zero, the others small: its default scale (1) must not become
  // s_v,max (the other blocks' weights would then round to almost nothing).
  for (int64_t t = 64; t < 96; ++t)
    for (int64_t c = 0; c < h.d; ++c) h.v[0][t * h.d + c] = 0.0f;
  for (float& x : h.v[0]) x *= 1e-3f;
  h.pool();
  EXPECT_LT(psa_test::rel_l2(h.fp8(psa::Fp8Rule{}), h.fp32()), 0.08);
  for (int variant = 0; variant < 10; ++variant) {
    psa::Fp8Rule rule;  // the rule, then one change each
    rule.smooth_k = variant != 1;
    rule.k_mean_block_firsts = variant != 2;
    rule.v_per_block = variant != 3;
    rule.q_per_row = variant == 4;
    rule.l_quantized = variant != 5;
    rule.qk_int8 = variant != 6;
    rule.pv_int8 = variant == 7;
    rule.migrate_channels = variant == 8;
    rule.v_scale_pow2 = variant != 9;
    SCOPED_TRACE("variant " + std::to_string(variant));
    const std::vector<double> want = reference(h, rule);
    // The fp32 logits and exp of the oracle against the double ones: the rows agree to about
    // 1e-7, except where a value sits on a rounding boundary of its 8-bit code (a quantized
    // probability, or an int8 code of q or k): fp32 and double then round it apart, and that
    // row moves by up to a few percent (one e4m3 step is 6-12% of a weight). Measured over
    // 3,000 seeds x 10 variants: at most one of the 96 rows past 1e-4, every variant's
    // rel-L2 up to 2.3e-3 from that one row, so the check counts rows instead.
    EXPECT_LE(rows_off(h.fp8(rule), want, h.lq, h.d, 1e-4), 2);
    // The rule's variants differ from each other in most rows (at least 89 of 96 in the same
    // 3,000 seeds).
    if (variant > 0) {
      EXPECT_GT(rows_off(h.fp8(psa::Fp8Rule{}), want, h.lq, h.d, 1e-4), h.lq / 2);
    }
  }
}

TEST(Fp8Attention, CloseToFp32AndLseKeepsTheSmoothedConstant) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int64_t d : {64, 128}) {
    const Head h(rng, 256, 700, d, 128, 64, 3.0f);
    std::vector<float> l32, l8;
    const std::vector<float> o32 = h.fp32(&l32), o8 = h.fp8(psa::Fp8Rule{}, &l8);
    const double e = psa_test::rel_l2(o8, o32);
    EXPECT_GT(e, 1e-3) << "quantization had no effect";
    EXPECT_LT(e, 0.08);
    // The logits carry the quantization error (about 0.05 here; the lse follows the largest):
    // without the smoothing's constant q . mean * scale put back, lse would be off by that
    // constant (a few units with this key bias), and with the quantized q in it by 0.1-0.4.
    double sum = 0;
    for (int64_t x = 0; x < h.lq; ++x) {
      EXPECT_NEAR(l32[x], l8[x], 0.3) << "row " << x;
      sum += std::fabs(l32[x] - l8[x]);
    }
    EXPECT_LT(sum / h.lq, 0.06);
  }
}

TEST(Fp8Attention, SmoothingAbsorbsAPerChannelKeyBias) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::mt19937_64 rng2 = rng;
  const Head plain(rng, 256, 512, 64, 128, 64), biased(rng2, 256, 512, 64, 128, 64, 20.0f);
  psa::Fp8Rule off;
  off.smooth_k = false;
  const double e_plain = psa_test::rel_l2(plain.fp8(psa::Fp8Rule{}), plain.fp32());
  const double e_on = psa_test::rel_l2(biased.fp8(psa::Fp8Rule{}), biased.fp32());
  const double e_off = psa_test::rel_l2(biased.fp8(off), biased.fp32());
  EXPECT_LT(e_on, 1.5 * e_plain) << e_on << " vs " << e_plain;
  EXPECT_GT(e_off, 2.0 * e_on) << e_off << " vs " << e_on;
}

TEST(Fp8Attention, EdgeRows) {
  const uint64_t seed = psa_test::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Head h(rng, 256, 256, 32, 128, 64);
  const int64_t nk = h.nk(), d = h.d;
  for (int64_t j = 0; j < nk; ++j) h.levels[j] = 0;         // query block 0: no key
  for (int64_t x = 128; x < 256; ++x)                        // query block 1: all-zero queries
    for (int64_t c = 0; c < d; ++c) h.q[x * d + c] = 0.0f;
  for (int64_t j = 0; j < nk; ++j) h.levels[nk + j] = 1;     // ... over every key at level 1
  std::vector<float> lse;
  const std::vector<float> o = h.fp8(psa::Fp8Rule{}, &lse);
  for (int64_t x = 0; x < 128; ++x) {
    EXPECT_EQ(-INFINITY, lse[x]);
    for (int64_t c = 0; c < d; ++c) ASSERT_EQ(0.0f, o[x * d + c]);
  }
  // Zero queries: equal weights, so the mean of the quantized values (within FP8 of V's mean).
  for (int64_t c = 0; c < d; ++c) {
    double mean = 0;
    for (int64_t t = 0; t < h.lk; ++t) mean += h.v[0][t * d + c];
    mean /= static_cast<double>(h.lk);
    EXPECT_NEAR(mean, o[128 * d + c], 0.02);
  }
  // l sums the rounded weights w8 / (448 f): 256 within the e4m3 rounding of each.
  EXPECT_NEAR(std::log(256.0), lse[128], 0.03);
  // A NaN query makes its row NaN instead of a finite number.
  h.q[130 * d + 3] = NAN;
  const std::vector<float> o2 = h.fp8(psa::Fp8Rule{});
  EXPECT_TRUE(std::isnan(o2[130 * d]));
}

}  // namespace
