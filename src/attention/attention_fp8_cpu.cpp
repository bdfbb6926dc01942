// attention/attention_fp8_cpu.cpp -- the FP8 (e4m3) attention path on the host (oracle; scalar,
// fp32 accumulation). Meaning in attention_fp8.h and fp8_spec.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "attention/attention_fp8.h"
#include "attention/attention_spec.h"
#include "pool/pool_spec.h"

namespace psa {
namespace {

// Quantizes rows [0, rows) of x [rows, d] in groups of `group` rows (the last may be shorter),
// one scale per group (fp8_scale, or fp8_scale_pow2 with pow2), after y = (x - mean[c]) * mul[c]
// (either NULL: none). `amaxes` (optional) receives each group's largest finite magnitude.
void quantize_groups(const float* x, int64_t rows, int64_t d, int64_t group, const float* mean, const float* mul,
                     bool round, bool int8, float* x8, float* scales, float* amaxes = nullptr, bool pow2 = false) {
  auto pre = [&](int64_t i) {
    const float y = mean != nullptr ? x[i] - mean[i % d] : x[i];
    return mul != nullptr ? y * mul[i % d] : y;
  };
  for (int64_t g0 = 0, gi = 0; g0 < rows; g0 += group, ++gi) {
    const int64_t g1 = std::min(rows, g0 + group);
    float amax = 0.0f;
    for (int64_t i = g0 * d; i < g1 * d; ++i) amax = fp8_amax(amax, pre(i));
    const float qmax = int8 ? kInt8Max : kE4m3Max;
    const Fp8Scale sc = pow2 ? fp8_scale_pow2(amax, qmax) : fp8_scale(amax, qmax);
    for (int64_t i = g0 * d; i < g1 * d; ++i) {
      const float y = pre(i);
      x8[i] = !round ? y * sc.inv : (int8 ? int8_quantize(y, sc.inv) : fp8_quantize(y, sc.inv));
    }
    scales[gi] = sc.s;
    if (amaxes != nullptr) amaxes[gi] = amax;
  }
}

// K's smoothing mean (Fp8Rule::smooth_k; zeros without it), [d].
std::vector<float> k_smoothing_mean(const Pyramid& k, int64_t lk, int64_t d, int64_t block_n, const Fp8Rule& rule) {
  const size_t ud = static_cast<size_t>(d);
  std::vector<float> mean(ud, 0.0f);
  if (rule.smooth_k && lk > 0) {
    std::vector<double> sum(ud, 0.0);
    const int64_t step = rule.k_mean_block_firsts ? block_n : 1;
    int64_t n = 0;
    for (int64_t t = 0; t < lk; t += step, ++n)
      for (int64_t c = 0; c < d; ++c) sum[static_cast<size_t>(c)] += static_cast<double>(k.level[0][t * d + c]);
    for (size_t c = 0; c < ud; ++c) mean[c] = static_cast<float>(sum[c] / static_cast<double>(n));
  }
  return mean;
}

// The K/V part with K's mean given and K's channels times k_mul (NULL: none).
Fp8KvCpu quantize_kv(const Pyramid& k, const Pyramid& v, int64_t lk, int64_t d, int64_t block_n, const Fp8Rule& rule,
                     std::vector<float> k_mean, const float* k_mul) {
  Fp8KvCpu h;
  h.lk = lk;
  h.d = d;
  h.block_n = block_n;
  h.rule = rule;
  h.k_mean = std::move(k_mean);
  const int64_t nk = (lk + block_n - 1) / block_n;
  const size_t ud = static_cast<size_t>(d);

  // V without v_per_block: one scale per channel from the full-resolution tokens.
  std::vector<Fp8Scale> vsc;
  if (!rule.v_per_block) {
    vsc.resize(ud);
    h.v_scale.resize(ud);
    for (int64_t c = 0; c < d; ++c) {
      float amax = 0.0f;
      for (int64_t t = 0; t < lk; ++t) amax = fp8_amax(amax, v.level[0][t * d + c]);
      vsc[static_cast<size_t>(c)] = fp8_scale(amax, rule.pv_int8 ? kInt8Max : kE4m3Max);
      h.v_scale[static_cast<size_t>(c)] = vsc[static_cast<size_t>(c)].s;
    }
  }
  std::vector<float> v_amax[4];  // v_per_block: each (level, key block)'s largest magnitude
  h.v_smax = 0.0f;

  for (int li = 0; li < 4; ++li) {
    const int level = pyramid_level(li);
    const int64_t len = li == 0 ? lk : pooled_length(nk, block_n, level);
    if (k.level[li] == nullptr || v.level[li] == nullptr) continue;  // level not provided
    h.k8[li].resize(static_cast<size_t>(len) * ud);
    h.k_scale[li].resize(static_cast<size_t>(nk));
    quantize_groups(k.level[li], len, d, block_n / level, h.k_mean.data(), k_mul, rule.round_qk, rule.qk_int8,
                    h.k8[li].data(), h.k_scale[li].data());
    h.v8[li].resize(static_cast<size_t>(len) * ud);
    if (rule.v_per_block) {  // one scale per (level, key block), as K's; the shares below
      h.v_share[li].resize(static_cast<size_t>(nk));
      v_amax[li].resize(static_cast<size_t>(nk));
      quantize_groups(v.level[li], len, d, block_n / level, nullptr, nullptr, rule.round_v, rule.pv_int8,
                      h.v8[li].data(), h.v_share[li].data(), v_amax[li].data(), rule.v_scale_pow2);
      for (size_t j = 0; j < h.v_share[li].size(); ++j)
        if (v_amax[li][j] > 0.0f) h.v_smax = std::max(h.v_smax, h.v_share[li][j]);
      continue;
    }
    for (int64_t t = 0; t < len; ++t)
      for (int64_t c = 0; c < d; ++c) {
        const float x = v.level[li][t * d + c], inv = vsc[static_cast<size_t>(c)].inv;
        h.v8[li][static_cast<size_t>(t * d + c)] =
            !rule.round_v ? x * inv : (rule.pv_int8 ? int8_quantize(x, inv) : fp8_quantize(x, inv));
      }
  }
  if (rule.v_per_block) {  // scales -> shares f = s / s_max; 1 for an all-zero block
    if (!(h.v_smax > 0.0f)) h.v_smax = 1.0f;
    for (int li = 0; li < 4; ++li)
      for (size_t j = 0; j < h.v_share[li].size(); ++j)
        h.v_share[li][j] = v_amax[li][j] > 0.0f ? h.v_share[li][j] / h.v_smax : 1.0f;
  }
  return h;
}

// The Q part against K/V's mean and rule, Q's channels times q_mul (NULL: none).
Fp8QCpu quantize_q(const float* q, int64_t lq, int64_t block_m, const Fp8KvCpu& kv, const float* q_mul) {
  Fp8QCpu h;
  h.lq = lq;
  h.block_m = block_m;
  const int64_t d = kv.d, mq = (lq + block_m - 1) / block_m;
  const Fp8Rule& rule = kv.rule;
  h.q8.resize(static_cast<size_t>(lq * d));
  h.q_scale.resize(static_cast<size_t>(rule.q_per_row ? lq : mq));
  quantize_groups(q, lq, d, rule.q_per_row ? 1 : block_m, nullptr, q_mul, rule.round_qk, rule.qk_int8, h.q8.data(),
                  h.q_scale.data());
  h.q_dot_mean.assign(static_cast<size_t>(lq), 0.0f);
  for (int64_t x = 0; x < lq; ++x) {
    float s = 0.0f;
    for (int64_t c = 0; c < d; ++c) s += q[x * d + c] * kv.k_mean[static_cast<size_t>(c)];
    h.q_dot_mean[static_cast<size_t>(x)] = s;
  }
  return h;
}

}  // namespace

Fp8KvCpu fp8_quantize_kv_cpu(const Pyramid& k, const Pyramid& v, int64_t lk, int64_t d, int64_t block_n,
                             const Fp8Rule& rule) {
  return quantize_kv(k, v, lk, d, block_n, rule, k_smoothing_mean(k, lk, d, block_n, rule), nullptr);
}

Fp8QCpu fp8_quantize_q_cpu(const float* q, int64_t lq, int64_t block_m, const Fp8KvCpu& kv) {
  return quantize_q(q, lq, block_m, kv, nullptr);
}

Fp8HeadCpu fp8_quantize_head_cpu(const float* q, int64_t lq, const Pyramid& k, const Pyramid& v, int64_t lk,
                                 int64_t d, int64_t block_m, int64_t block_n, const Fp8Rule& rule) {
  std::vector<float> k_mean = k_smoothing_mean(k, lk, d, block_n, rule);
  const size_t ud = static_cast<size_t>(d);
  // Channel migration: q_c * a_c and k_c / a_c, a_c = sqrt(amax_c(k - mean) / amax_c(q)).
  std::vector<float> q_mul, k_mul;
  if (rule.migrate_channels) {
    std::vector<float> aq(ud, 0.0f), ak(ud, 0.0f);
    for (int64_t x = 0; x < lq; ++x)
      for (int64_t c = 0; c < d; ++c) aq[static_cast<size_t>(c)] = fp8_amax(aq[static_cast<size_t>(c)], q[x * d + c]);
    for (int64_t t = 0; t < lk; ++t)
      for (int64_t c = 0; c < d; ++c)
        ak[static_cast<size_t>(c)] =
            fp8_amax(ak[static_cast<size_t>(c)], k.level[0][t * d + c] - k_mean[static_cast<size_t>(c)]);
    q_mul.resize(ud);
    k_mul.resize(ud);
    for (size_t c = 0; c < ud; ++c) {
      const float a = aq[c] > 0.0f && ak[c] > 0.0f ? std::sqrt(ak[c] / aq[c]) : 1.0f;
      q_mul[c] = a;
      k_mul[c] = 1.0f / a;
    }
  }
  Fp8HeadCpu h;
  static_cast<Fp8KvCpu&>(h) =
      quantize_kv(k, v, lk, d, block_n, rule, std::move(k_mean), k_mul.empty() ? nullptr : k_mul.data());
  static_cast<Fp8QCpu&>(h) = quantize_q(q, lq, block_m, h, q_mul.empty() ? nullptr : q_mul.data());
  return h;
}

void sparse_attention_fp8_cpu(const Fp8QCpu& hq, const Fp8KvCpu& h, const int8_t* levels, float scale, bool causal,
                              int64_t x0, int64_t rows, float* out, float* lse) {
  const int64_t d = h.d, lk = h.lk, nk = (lk + h.block_n - 1) / h.block_n, offset = lk - hq.lq;
  const float pmax = h.rule.pv_int8 ? kUint8Max : kE4m3Max;  // p is stored as p * pmax
  std::vector<float> acc(static_cast<size_t>(d));
  // The visible tokens of one row: logit, level index, token.
  struct Tok {
    float z;
    int li;
    int64_t t;
  };
  std::vector<Tok> toks;
  for (int64_t x = x0; x < x0 + rows; ++x) {
    const int64_t i = x / hq.block_m;
    const float* qx = hq.q8.data() + x * d;
    const float sq = hq.q_scale[static_cast<size_t>(h.rule.q_per_row ? x : i)];
    toks.clear();
    float m = neg_inf();
    for (int64_t j = 0; j < nk; ++j) {
      const int level = levels[i * nk + j];
      if (level == 0) continue;
      const int li = pyramid_slot(level);
      const int64_t per_block = h.block_n / level;
      const float bias = level_log_bias(level);
      const float kscale = sq * h.k_scale[li][static_cast<size_t>(j)] * scale;
      for (int64_t u = 0; u < per_block; ++u) {
        const int64_t t = j * per_block + u;
        if (!token_visible(x, t, level, lk, causal, offset)) continue;
        const float* kt = h.k8[li].data() + t * d;
        float s = 0.0f;
        for (int64_t c = 0; c < d; ++c) s += qx[c] * kt[c];
        const float z = s * kscale + bias;
        toks.push_back(Tok{z, li, t});
        m = std::max(m, z);
      }
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
    float l = 0.0f;
    for (const Tok& tk : toks) {  // a NaN logit (m skips it) makes l and the row NaN
      // With V scales per key block, p carries its block's share f = s_v(block) / s_v(max) <= 1
      // into the quantized weight, so that one scale (the largest) multiplies the product.
      const float f = h.rule.v_per_block ? h.v_share[tk.li][static_cast<size_t>(tk.t / (h.block_n >> tk.li))] : 1.0f;
      const float p = tk.z == neg_inf() ? 0.0f : std::exp(tk.z - m);
      const float w = p * f * pmax;
      const float p8 = !h.rule.round_p ? w : (h.rule.pv_int8 ? round_int(w, 0.0f, pmax) : round_e4m3(w));
      l += h.rule.l_quantized ? p8 / (pmax * f) : p;
      const float* vt = h.v8[tk.li].data() + tk.t * d;
      for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += p8 * vt[c];
    }
    float* o = out + (x - x0) * d;
    const bool empty = l == 0.0f;
    for (int64_t c = 0; c < d; ++c)
      o[c] = empty ? 0.0f
                   : acc[static_cast<size_t>(c)] * (h.rule.v_per_block ? h.v_smax : h.v_scale[static_cast<size_t>(c)]) /
                         pmax / l;
    if (lse != nullptr)  // the logits left out q . k_mean * scale (the smoothing)
      lse[x - x0] = empty ? neg_inf() : m + std::log(l) + hq.q_dot_mean[static_cast<size_t>(x)] * scale;
  }
}

void sparse_attention_fp8_cpu(const Fp8HeadCpu& h, const int8_t* levels, float scale, bool causal, int64_t x0,
                              int64_t rows, float* out, float* lse) {
  sparse_attention_fp8_cpu(h, h, levels, scale, causal, x0, rows, out, lse);
}

}  // namespace psa
