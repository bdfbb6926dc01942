// attention/attention_fp8.h -- the 8-bit ("fp8") attention path on the host: the CPU oracle that a
// GPU kernel of that precision is judged by, and the model its accuracy study runs on
// (benchmarks/fp8_accuracy.cpp, BENCHMARKS.md "8-bit attention: accuracy of the rule"). Formats
// and scale rule: attention/fp8_spec.h.
//
// The rule, chosen by that study (Fp8Rule's defaults): Q and K as int8, P and V as e4m3. e4m3
// for Q and K (3 mantissa bits) put 1.3-8.3x the bf16 path's error on inputs with a few
// channels x30, where int8 (7 bits against each group's amax) gives 1.03-5.1x; Hopper's wgmma
// multiplies s8 at the e4m3 rate, with exact int32 accumulation. P keeps e4m3 because a uint8 p
// drops every weight below 1/510 of the row's largest (a long flat tail of a 75k-token row).
// What is quantized, and with which scales (fp8_spec.h: fp8_scale of each group's largest finite
// magnitude, for V's groups fp8_scale_pow2, then fp8_quantize / int8_quantize per value, so a
// NaN or inf stays in its own row or token). Every group is local to a query block or a key block, so that a kernel can quantize
// in the gather + pyramid pass; the only statistic over the whole head is K's mean, taken over
// one token per key block (a pass over 1 / block_n of K):
//   Q  per query block (block_m rows, all channels), or per row (Fp8Rule::q_per_row);
//   K  smoothed first: m_k = the per-channel mean of the first token of every key block
//      (summed in double, rounded once to fp32; Fp8Rule::k_mean_block_firsts false: of all lk
//      tokens) is subtracted from every level's tokens. q . m_k is one constant per query row,
//      so the softmax does not change (any constant vector would do; the mean keeps the
//      quantized range small). Then one scale per (level, key block): block_n / p tokens x all
//      channels;
//   V  one scale s_v(level, block) per (level, key block), as K's, without smoothing, rounded up
//      to a power of two (fp8_scale_pow2; e4m3's relative precision does not depend on the
//      scale). Its share f = s_v(level, block) / s_v,max (<= 1; s_v,max the largest scale of a
//      block with a non-zero value, 1 if there is none; f = 1 for an all-zero block, whose values
//      are 0 anyway) multiplies the weight before it is rounded, so one scale, s_v,max,
//      multiplies the whole product (Fp8Rule::v_per_block false: one scale per channel over the
//      lk tokens instead). f and 1 / f are powers of two, exact in fp32 and, up to 2^8, in e4m3:
//      a kernel sums l below on the tensor cores (P times a column of 1 / f);
//   P  after the row maximum m: p = exp(z - m) in (0, 1]; the weight w = p * f * 448 is stored as
//      e4m3(w) and the product divided by 448 again. The oracle uses the row's final maximum; a
//      kernel may take any m from max (z + log2 f) up to it (its running maximum, or a maximum of
//      z + log2 f, which makes w = 2^(z + log2 f - m) * 448 one exponential, still <= 448): its p
//      are larger and no less accurate. With the latter, a block with f < 2^-23 (rule weight 0)
//      is dropped outright.
// Logit z = (q8 . k8) * (s_q * s_k) * scale + ln(p) with fp32 accumulation over the channels
// (exact for int8); out = (sum w8 * v8) * s_v,max / 448 / l, where l = sum w8 / (448 f), the
// weights that actually multiply V (so they sum to 1; Fp8Rule::l_quantized false: l = sum p).
// lse = m + ln(l) + (q . m_k) * scale with the unquantized q (the smoothing's constant put back
// exactly, so that shards of one row, each with its own key mean, merge by their lse).
// Causal visibility and empty rows as attention.h.
#pragma once
#include <cstdint>
#include <vector>

#include "attention/attention.h"
#include "attention/fp8_spec.h"

namespace psa {

// Variants of the rule, for the accuracy study; the defaults are the rule.
struct Fp8Rule {
  bool smooth_k = true;              // subtract a per-channel mean from K before quantizing
  bool k_mean_block_firsts = true;   // that mean over the first token of every key block
  bool q_per_row = false;             // one Q scale per row instead of per query block
  bool l_quantized = true;            // the row sum l from the quantized probabilities
  // Formats: Q and K as int8 (scales 127 / amax) or e4m3; P and V as e4m3 or as uint8 (p * 255)
  // and int8 per channel.
  bool qk_int8 = true, pv_int8 = false;
  // V with one scale per (level, key block) over all channels, folded into the weights (else one
  // scale per channel over all tokens: a pass over all of V before the quantization).
  bool v_per_block = true;
  // V's block scales rounded up to powers of two (fp8_scale_pow2): every share f and 1 / f is
  // then an exact power of two, so that a kernel can sum l = sum w8 / (448 f) on the tensor
  // cores (1 / f exact in e4m3 up to 2^8). false: fp8_scale's exact amax / 448.
  bool v_scale_pow2 = true;
  // Q's channels times a_c and K's divided by it before quantizing (the product is unchanged),
  // a_c = sqrt(amax_c(k - mean) / amax_c(q)) over the head: balances channels whose magnitude
  // differs between Q and K (a pass over both before the quantization).
  bool migrate_channels = false;
  // Which operands are rounded at all (the study's attribution of the error; the rule rounds
  // all): false keeps that operand in fp32, scaled as the rule says.
  bool round_qk = true, round_p = true, round_v = true;
};

// One head quantized for the 8-bit path: the int8 / e4m3 values stored as float (exactly
// representable), and the dequantization scales. The K/V part depends on K and V alone (and on
// Q only through channel migration), so a K/V head shared by several query heads (GQA) is
// quantized once: fp8_quantize_kv_cpu, then fp8_quantize_q_cpu per query head.
struct Fp8KvCpu {
  int64_t lk = 0, d = 0, block_n = 0;
  Fp8Rule rule;
  std::vector<float> k8[4], k_scale[4];  // level li: [len_li, d]; [nk] per level
  std::vector<float> v8[4], v_scale;   // level li: [len_li, d]; [d] (without v_per_block)
  std::vector<float> v_share[4];       // Fp8Rule::v_per_block: f per key block [nk], per level
  float v_smax = 0.0f;                 // and s_v,max
  std::vector<float> k_mean;           // [d] (zeros without smoothing)
};
struct Fp8QCpu {
  int64_t lq = 0, block_m = 0;
  std::vector<float> q8, q_scale;      // [lq, d]; [ceil(lq / block_m)] or [lq] (q_per_row)
  std::vector<float> q_dot_mean;       // [lq]: q . k_mean (fp32, channel order), for the lse
};
struct Fp8HeadCpu : Fp8KvCpu, Fp8QCpu {};

// Quantizes one head: q [lq, d], and the K/V pyramids of pool_kv_cpu (level[0] = [lk, d],
// level[li] = [nk * block_n / p, d]).
Fp8HeadCpu fp8_quantize_head_cpu(const float* q, int64_t lq, const Pyramid& k, const Pyramid& v, int64_t lk,
                                 int64_t d, int64_t block_m, int64_t block_n, const Fp8Rule& rule = Fp8Rule{});

// The same in two parts, for a rule without channel migration (Fp8Rule::migrate_channels
// false; fp8_quantize_kv_cpu ignores it): K and V once per K/V head, then Q [lq, kv.d] of each
// query head against them. Equal to fp8_quantize_head_cpu's parts bit for bit.
Fp8KvCpu fp8_quantize_kv_cpu(const Pyramid& k, const Pyramid& v, int64_t lk, int64_t d, int64_t block_n,
                             const Fp8Rule& rule = Fp8Rule{});
Fp8QCpu fp8_quantize_q_cpu(const float* q, int64_t lq, int64_t block_m, const Fp8KvCpu& kv);

// Mixed-level sparse attention on the quantized head (levels [mq, nk] as sparse_attention_cpu).
// Rows [x0, x0 + rows) of the head are computed (x0 a multiple of block_m; out and lse point at
// row x0's entries), so a caller can evaluate a few query blocks of a long sequence.
void sparse_attention_fp8_cpu(const Fp8QCpu& q, const Fp8KvCpu& kv, const int8_t* levels, float scale, bool causal,
                              int64_t x0, int64_t rows, float* out, float* lse);
void sparse_attention_fp8_cpu(const Fp8HeadCpu& h, const int8_t* levels, float scale, bool causal, int64_t x0,
                              int64_t rows, float* out, float* lse);

}  // namespace psa
