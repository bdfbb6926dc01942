// benchmarks/fp8_accuracy.cpp -- accuracy of the 8-bit ("fp8") attention rule
// (attention/attention_fp8.h) on the standard shapes, before any kernel of that precision: the
// CPU oracle against dense attention, next to the bf16 path on the same mask. Host only.
//
// Per shape: a few heads of the CLI's video-like inputs (cli/synthetic.h, `psa run`'s), rounded
// to bf16, in the four variants of make_input below. Tokens in Gilbert order with the text at
// the end, as the model presets rearrange them. Mask: the importance stage (sample divisor 4,
// tie masses) and the topk rule at the configuration BENCHMARKS.md leads with
// (cli/standard_shapes.h: block_m 128, block_n 64, tile_n 32, ratio ends 0.10 / 0.15 / 0.15 /
// 0.35); the model's text rule and similarity cap are left out. A few query blocks per head
// (spread over the sequence) are evaluated against every key:
//   dense  = attention over all keys (fp32 arithmetic on the bf16 inputs),
//   bf16   = the mixed-level attention of the CPU oracle on the mask,
//   8-bit  = sparse_attention_fp8_cpu on the same mask, for the rule and its variants.
// Reported: rel-L2 against dense and the ratio to the bf16 path's (the target is <= 1.5), and the
// 8-bit path's own error (against bf16 on the same mask).
//
// --int8-importance: instead, the question whether the importance stage could run on int8
// operands (an 8-bit score kernel, at twice the 16-bit tensor rate): the mask from Q and K
// quantized by the rule (int8, one scale per query block / key block, K smoothed: the
// smoothing shifts each sampled row's logits by one constant, which the importance's a - m
// takes out) against the mask from the bf16 values; reported are the share of equal levels,
// the share of the bf16 mask's kept blocks that the int8 mask keeps, and the bf16 path's error
// against dense on each mask; then the same with Q's scale per query block taken over its
// sampled rows only: the rule precision fp8 runs since d49f773 (importance_spec.h,
// importance_int8_cpu on the rule's int8 K and its level-1 block scales: exact integer dots).
//
// Build from a CPU (or CUDA) build directory: cmake --build build --target fp8_accuracy
// Run: build/benchmarks/fp8_accuracy [--shapes cogvideox,wan13,wan14] [--heads 2] [--blocks 4]
//      [--int8-importance]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "attention/attention.h"
#include "attention/attention_fp8.h"
#include "cli/host_tensor.h"
#include "cli/standard_shapes.h"
#include "cli/synthetic.h"
#include "importance/importance.h"
#include "mask/mask.h"
#include "pool/pool.h"
#include "rearrange/rearrange.h"

namespace {

constexpr int64_t kBlockM = 128, kBlockN = 64;
constexpr int kVariants = 13;
const char* const kVariantNames[kVariants] = {
    "rule",           "no K smoothing",       "K mean of all keys", "V scale per channel",
    "Q scale per row", "l from unquantized p", "Q, K as e4m3",       "P, V as uint8 / int8",
    "channel migration", "only Q, K rounded",  "only P rounded",     "only V rounded",
    "V scales not powers of two"};
psa::Fp8Rule variant_rule(int v) {
  psa::Fp8Rule r;  // the rule, then one change each
  r.smooth_k = v != 1;
  r.k_mean_block_firsts = v != 2;
  r.v_per_block = v != 3;
  r.q_per_row = v == 4;
  r.l_quantized = v != 5;
  r.qk_int8 = v != 6;
  r.pv_int8 = v == 7;
  r.migrate_channels = v == 8;
  r.v_scale_pow2 = v != 12;
  const bool only = v >= 9 && v <= 11;  // the attribution variants: one operand rounded
  r.round_qk = !only || v == 9;
  r.round_p = !only || v == 10;
  r.round_v = !only || v == 11;
  return r;
}

// Squared-error sums of one (shape, input) over heads and evaluated rows.
struct Sums {
  double dense2 = 0, bf16 = 0, fp8[kVariants] = {}, quant = 0, bf16_2 = 0;
  double work = 0, blocks = 0;
  // --int8-importance: levels equal, kept (level > 0) by the bf16 mask, kept by both, and the bf16
  // path's squared error against dense on the int8 importance's mask
  double equal = 0, kept = 0, kept_both = 0, bf16_on8 = 0;
  // the same with Q's scale per query block taken over its sampled rows only: importance_int8_cpu,
  // the rule precision fp8 runs
  double equal_s = 0, kept_both_s = 0, bf16_on8_s = 0;
  void add(const Sums& o) {
    equal += o.equal;
    kept += o.kept;
    kept_both += o.kept_both;
    bf16_on8 += o.bf16_on8;
    equal_s += o.equal_s;
    kept_both_s += o.kept_both_s;
    bf16_on8_s += o.bf16_on8_s;
    dense2 += o.dense2;
    bf16 += o.bf16;
    for (int v = 0; v < kVariants; ++v) fp8[v] += o.fp8[v];
    quant += o.quant;
    bf16_2 += o.bf16_2;
    work += o.work;
    blocks += o.blocks;
  }
};

double sq_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return s;
}
double sq_norm(const std::vector<float>& a) {
  double s = 0;
  for (float x : a) s += double(x) * x;
  return s;
}

bool int8_importance = false;  // --int8-importance

// One head: q, k, v [L, d] fp32 (bf16 values) in the rearranged order.
Sums run_head(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, int64_t L,
              int64_t d, int64_t head, int blocks) {
  Sums s;
  const int64_t mq = (L + kBlockM - 1) / kBlockM, nk = (L + kBlockN - 1) / kBlockN;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Importance and mask.
  auto mask_of = [&](const float* qm, const float* km, const psa::Int8Keys* k8 = nullptr) {
    std::vector<float> scores(mq * nk), ties(mq * nk);
    std::vector<int32_t> shuffle(std::max(kBlockM, kBlockN)), qo(kBlockM / 4), ko(kBlockN / 4);
    psa::ImportanceSampling smp;
    smp.seed = 42;
    smp.head = head;
    smp.q_count = static_cast<int32_t>(kBlockM / 4);
    smp.k_count = static_cast<int32_t>(kBlockN / 4);
    psa::importance_head_cpu(qm, L, km, L, d, kBlockM, kBlockN, scale, smp, shuffle.data(), qo.data(), ko.data(),
                             scores.data(), ties.data(), k8);
    psa::MaskRowParams mp;
    mp.mode = PSA_MASK_MODE_TOPK;
    mp.block_n = kBlockN;
    mp.tile_n = 32;
    const double ends[5] = {0.10, 0.15, 0.15, 0.35, 1.0};
    std::copy(ends, ends + 5, mp.ratio_end);
    std::vector<int8_t> lv(mq * nk);
    for (int64_t i = 0; i < mq; ++i)
      psa::build_mask_row(scores.data() + i * nk, nk, mp, lv.data() + i * nk, nullptr, nullptr, ties.data() + i * nk);
    return lv;
  };
  const std::vector<int8_t> levels = mask_of(q.data(), k.data());
  for (int8_t l : levels) s.work += l > 0 ? 1.0 / l : 0.0;
  s.blocks = static_cast<double>(mq * nk);
  // Pyramids.
  const int64_t padded = nk * kBlockN;
  std::vector<float> kl[3], vl[3];
  float* kout[3];
  float* vout[3];
  for (int i = 0; i < 3; ++i) {
    kl[i].resize(padded / (2 << i) * d);
    vl[i].resize(padded / (2 << i) * d);
    kout[i] = kl[i].data();
    vout[i] = vl[i].data();
  }
  psa::pool_kv_cpu(k.data(), v.data(), L, d, nk, kBlockN, kout, vout);
  psa::Pyramid kp, vp;
  kp.level[0] = k.data();
  vp.level[0] = v.data();
  for (int i = 0; i < 3; ++i) {
    kp.level[i + 1] = kl[i].data();
    vp.level[i + 1] = vl[i].data();
  }
  std::vector<psa::Fp8HeadCpu> h8;
  std::vector<int8_t> levels8, levels8s;
  if (int8_importance) {
    // Q and K as the rule quantizes them (K smoothed), dequantized: what an int8 score kernel's
    // int32 products times s_q * s_k give (fp32 accumulation order aside).
    const psa::Fp8HeadCpu r = psa::fp8_quantize_head_cpu(q.data(), L, kp, vp, L, d, kBlockM, kBlockN);
    std::vector<float> qd(q.size()), kd(k.size());
    for (int64_t x = 0; x < L; ++x)
      for (int64_t c = 0; c < d; ++c) {
        qd[x * d + c] = r.q8[x * d + c] * r.q_scale[x / kBlockM];
        kd[x * d + c] = r.k8[0][x * d + c] * r.k_scale[0][x / kBlockN];
      }
    levels8 = mask_of(qd.data(), kd.data());
    // The rule precision fp8 runs: Q's scale over the sampled rows of each query block, exact
    // integer dots (importance_int8_cpu).
    const psa::Int8Keys keys{r.k8[0].data(), r.k_scale[0].data()};
    levels8s = mask_of(q.data(), k.data(), &keys);
    for (size_t e = 0; e < levels.size(); ++e) {
      s.equal += levels[e] == levels8[e];
      s.kept += levels[e] > 0;
      s.kept_both += levels[e] > 0 && levels8[e] > 0;
      s.equal_s += levels[e] == levels8s[e];
      s.kept_both_s += levels[e] > 0 && levels8s[e] > 0;
    }
  } else {
    for (int vi = 0; vi < kVariants; ++vi)
      h8.push_back(psa::fp8_quantize_head_cpu(q.data(), L, kp, vp, L, d, kBlockM, kBlockN, variant_rule(vi)));
  }
  // Query blocks spread over the sequence.
  for (int b = 0; b < blocks; ++b) {
    const int64_t i = std::min(mq - 1, static_cast<int64_t>((b + 0.5) * static_cast<double>(mq) / blocks));
    const int64_t x0 = i * kBlockM, rows = std::min(kBlockM, L - x0);
    std::vector<float> dense(rows * d), bf16(rows * d), fp8(rows * d);
    psa::dense_attention_cpu(q.data() + x0 * d, rows, k.data(), v.data(), L, d, scale, false, dense.data(),
                             nullptr);
    psa::sparse_attention_cpu(q.data() + x0 * d, rows, kp, vp, L, d, kBlockM, kBlockN, levels.data() + i * nk,
                              scale, false, bf16.data(), nullptr);
    s.dense2 += sq_norm(dense);
    s.bf16 += sq_diff(bf16, dense);
    s.bf16_2 += sq_norm(bf16);
    if (int8_importance) {
      psa::sparse_attention_cpu(q.data() + x0 * d, rows, kp, vp, L, d, kBlockM, kBlockN, levels8.data() + i * nk,
                                scale, false, fp8.data(), nullptr);
      s.bf16_on8 += sq_diff(fp8, dense);
      psa::sparse_attention_cpu(q.data() + x0 * d, rows, kp, vp, L, d, kBlockM, kBlockN, levels8s.data() + i * nk,
                                scale, false, fp8.data(), nullptr);
      s.bf16_on8_s += sq_diff(fp8, dense);
      continue;
    }
    for (int vi = 0; vi < kVariants; ++vi) {
      psa::sparse_attention_fp8_cpu(h8[vi], levels.data(), scale, false, x0, rows, fp8.data(), nullptr);
      s.fp8[vi] += sq_diff(fp8, dense);
      if (vi == 0) s.quant += sq_diff(fp8, bf16);
    }
  }
  return s;
}

// Inputs: the CLI's video-like heads as they are (q and k read one smooth field, so a query's
// logits peak sharply at its neighbours: the mask loses almost nothing); the same with q x 0.5
// (softer rows: the bf16 path loses 0.4-5% on the standard shapes); and the
// softer heads with four channels multiplied by 30, in k only and in q, k and v. Every value is
// rounded to bf16 again.
constexpr int kInputs = 4;
const char* const kInputNames[kInputs] = {"video-like (CLI)", "video-like, q x 0.5", "q x 0.5, 4 channels of k x30",
                                          "q x 0.5, 4 channels of q, k, v x30"};
void make_input(int kind, std::vector<float>& q, std::vector<float>& k, std::vector<float>& v, int64_t d) {
  const int64_t L = static_cast<int64_t>(q.size()) / d;
  if (kind >= 1)
    for (float& x : q) x = psa_cli::round_to_dtype(0.5f * x, PSA_DTYPE_BF16);
  if (kind >= 2) {
    const int64_t chans[4] = {1, 7, 33, 50};
    for (std::vector<float>* x : {&q, &k, &v}) {
      if (kind == 2 && x != &k) continue;
      for (int64_t i = 0; i < L; ++i)
        for (int64_t c : chans) (*x)[i * d + c] = psa_cli::round_to_dtype(30.0f * (*x)[i * d + c], PSA_DTYPE_BF16);
    }
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a <= s.size()) {
    const size_t b = std::min(s.find(',', a), s.size());
    if (b > a) out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

}  // namespace

void print_header() {
  if (int8_importance) {
    std::printf("| shape | inputs | density | levels equal | bf16 mask's kept blocks kept | bf16 PSA vs dense, bf16 "
                "importance | bf16 PSA vs dense, int8 importance (ratio) | precision fp8's rule (Q scale over the sampled "
                "rows, importance_int8_cpu): levels equal, kept, bf16 PSA vs dense (ratio) |\n|---|---|---|---|---|---|---|---|\n");
    return;
  }
  std::printf("| shape | inputs | density | bf16 PSA vs dense | 8-bit PSA vs dense (ratio to bf16) | 8-bit vs bf16 PSA |");
  for (int vi = 1; vi < kVariants; ++vi) std::printf(" %s |", kVariantNames[vi]);
  std::printf("\n|---|---|---|---|---|---|");
  for (int vi = 1; vi < kVariants; ++vi) std::printf("---|");
  std::printf("\n");
}

// One table row: the sums of every head of one input, the heads spread over the cores.
void print_row(const std::string& label, const char* inputs, std::vector<std::vector<float>>& hq,
               std::vector<std::vector<float>>& hk, std::vector<std::vector<float>>& hv, int64_t L, int64_t d,
               int blocks) {
  const int64_t H = static_cast<int64_t>(hq.size());
  std::vector<Sums> per(H);
  std::vector<std::thread> pool;
  const int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  for (int64_t w = 0; w < threads; ++w)
    pool.emplace_back([&, w] {
      for (int64_t h = w; h < H; h += threads) per[h] = run_head(hq[h], hk[h], hv[h], L, d, h, blocks);
    });
  for (auto& t : pool) t.join();
  Sums s;
  for (const Sums& p : per) s.add(p);
  const double e_bf16 = std::sqrt(s.bf16 / s.dense2);
  if (int8_importance) {
    const double e8 = std::sqrt(s.bf16_on8 / s.dense2), e8s = std::sqrt(s.bf16_on8_s / s.dense2);
    std::printf("| %s | %s | %.3f | %.4f | %.4f | %.4f | %.4f (%.3fx) | %.4f, %.4f, %.4f (%.3fx) |\n", label.c_str(),
                inputs, s.work / s.blocks, s.equal / s.blocks, s.kept_both / std::max(s.kept, 1.0), e_bf16, e8,
                e8 / e_bf16, s.equal_s / s.blocks, s.kept_both_s / std::max(s.kept, 1.0), e8s, e8s / e_bf16);
    std::fflush(stdout);
    return;
  }
  std::printf("| %s | %s | %.3f | %.4f |", label.c_str(), inputs, s.work / s.blocks, e_bf16);
  const double e_fp8 = std::sqrt(s.fp8[0] / s.dense2);
  std::printf(" %.4f (%.2fx) | %.4f |", e_fp8, e_fp8 / e_bf16, std::sqrt(s.quant / s.bf16_2));
  for (int vi = 1; vi < kVariants; ++vi) {
    const double e = std::sqrt(s.fp8[vi] / s.dense2);
    std::printf(" %.4f (%.2fx) |", e, e / e_bf16);
  }
  std::printf("\n");
  std::fflush(stdout);
}

// The rearranged order of a grid: video tokens along the Gilbert curve, then the text.
std::vector<int64_t> gilbert_then_text(const psa_cli::VideoGrid& grid) {
  const std::vector<int64_t> curve = psa::gilbert3d_order(grid.w, grid.h, grid.t);
  const int64_t text0 = grid.position == PSA_TEXT_FIRST ? 0 : grid.video_tokens();
  const int64_t video0 = grid.position == PSA_TEXT_FIRST ? grid.text : 0;
  std::vector<int64_t> src;
  for (int64_t r : curve) src.push_back(video0 + r);
  for (int64_t t = 0; t < grid.text; ++t) src.push_back(text0 + t);
  return src;
}

// --npy: the caller's q, k, v of batch 0 (GQA: query head h reads KV head h / (Hq / Hkv)).
int run_files(const std::vector<std::string>& files, psa_layout layout, const std::vector<int64_t>& grid_arg,
              int heads, int blocks) {
  psa_cli::HostTensor t[3];
  for (int i = 0; i < 3; ++i) t[i] = psa_cli::load_npy_tensor(files[i], layout, -1);
  const int64_t L = t[0].seq_len(), d = t[0].head_dim(), hq = t[0].heads(), hkv = t[1].heads();
  if (t[1].seq_len() != L || t[2].seq_len() != L || t[1].head_dim() != d || t[2].head_dim() != d ||
      t[2].heads() != hkv || hkv < 1 || hq % hkv != 0 || L < 1) {
    std::fprintf(stderr,
                 "fp8_accuracy: q, k, v must share L and D, k and v their heads, and q's heads must be a multiple "
                 "of k's (heads x L x D: q %lldx%lldx%lld, k %lldx%lldx%lld, v %lldx%lldx%lld)\n",
                 static_cast<long long>(hq), static_cast<long long>(L), static_cast<long long>(d),
                 static_cast<long long>(hkv), static_cast<long long>(t[1].seq_len()),
                 static_cast<long long>(t[1].head_dim()), static_cast<long long>(t[2].heads()),
                 static_cast<long long>(t[2].seq_len()), static_cast<long long>(t[2].head_dim()));
    return 2;
  }
  std::vector<int64_t> src;
  if (!grid_arg.empty()) {
    psa_cli::VideoGrid grid;
    grid.t = grid_arg[0];
    grid.h = grid_arg[1];
    grid.w = grid_arg[2];
    grid.text = grid_arg.size() > 3 ? grid_arg[3] : 0;
    grid.position = grid.text > 0 ? (grid_arg.size() > 4 && grid_arg[4] == 0 ? PSA_TEXT_LAST : PSA_TEXT_FIRST)
                                  : PSA_TEXT_NONE;
    if (grid.t < 1 || grid.h < 1 || grid.w < 1 || grid.tokens() != L) {
      std::fprintf(stderr, "fp8_accuracy: --grid %lldx%lldx%lld + %lld text tokens does not cover L = %lld\n",
                   static_cast<long long>(grid.t), static_cast<long long>(grid.h), static_cast<long long>(grid.w),
                   static_cast<long long>(grid.text), static_cast<long long>(L));
      return 2;
    }
    src = gilbert_then_text(grid);
  } else {
    for (int64_t i = 0; i < L; ++i) src.push_back(i);
  }
  const int64_t H = std::min<int64_t>(heads, hq), group = hq / hkv;
  std::vector<std::vector<float>> q(H), k(H), v(H);
  for (int64_t h = 0; h < H; ++h) {
    for (auto* p : {&q, &k, &v}) (*p)[h].resize(L * d);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t c = 0; c < d; ++c) {
        q[h][i * d + c] = t[0].values[t[0].offset(0, h, src[i], c)];
        k[h][i * d + c] = t[1].values[t[1].offset(0, h / group, src[i], c)];
        v[h][i * d + c] = t[2].values[t[2].offset(0, h / group, src[i], c)];
      }
  }
  const std::string label = files[0] + " (" + std::to_string(H) + " of " + std::to_string(hq) + " heads, " +
                            std::to_string(L) + " tokens, d" + std::to_string(d) + ")";
  print_header();
  print_row(label, grid_arg.empty() ? "file, token order as given" : "file, Gilbert order", q, k, v, L, d, blocks);
  return 0;
}

// Non-negative integers separated by commas; false if any is not.
bool parse_ints(const std::string& s, std::vector<int64_t>* out) {
  for (const std::string& part : split(s)) {
    char* end = nullptr;
    const long long x = std::strtoll(part.c_str(), &end, 10);
    if (end == part.c_str() || *end != '\0' || x < 0 || x > (int64_t{1} << 40)) return false;
    out->push_back(x);
  }
  return true;
}

const char* const kUsage =
    "usage: fp8_accuracy [--shapes cogvideox,wan13,wan14] [--heads N] [--blocks N] [--int8-importance]\n"
    "       fp8_accuracy --npy Q.npy,K.npy,V.npy [--layout bnsd|bsnd] [--grid T,H,W[,TEXT[,FIRST]]]\n"
    "                    [--heads N] [--blocks N] [--int8-importance]\n"
    "  --npy    your own q, k, v (batch 0; [B, H, L, D] for bnsd, [B, L, H, D] for bsnd; f32, f16 or bf16)\n"
    "  --grid   their latent grid: tokens in Gilbert order as the presets rearrange them (TEXT text tokens,\n"
    "           first unless FIRST is 0); without it the token order of the files\n"
    "  --int8-importance  the mask from int8 Q and K (the rule's quantization) against the bf16 mask\n";

int main(int argc, char** argv) {
  std::string shapes = "cogvideox,wan13,wan14";
  int heads = 2, blocks = 4;
  std::vector<std::string> files;
  std::vector<int64_t> grid_arg;
  psa_layout layout = PSA_LAYOUT_BNSD;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const bool has_value = a + 1 < argc;
    if (arg == "--shapes" && has_value) {
      shapes = argv[++a];
    } else if ((arg == "--heads" || arg == "--blocks") && has_value) {
      std::vector<int64_t> n;
      if (!parse_ints(argv[++a], &n) || n.size() != 1 || n[0] < 1 || n[0] > 1000000) {
        std::fprintf(stderr, "fp8_accuracy: %s takes one integer in [1, 1000000] (got '%s')\n", arg.c_str(), argv[a]);
        return 2;
      }
      (arg == "--heads" ? heads : blocks) = static_cast<int>(n[0]);
    } else if (arg == "--int8-importance") {
      int8_importance = true;
    } else if (arg == "--npy" && has_value) {
      files = split(argv[++a]);
      if (files.size() != 3) {
        std::fprintf(stderr, "fp8_accuracy: --npy takes three files, Q,K,V (got '%s')\n", argv[a]);
        return 2;
      }
    } else if (arg == "--layout" && has_value) {
      const std::string l = argv[++a];
      if (l != "bnsd" && l != "bsnd") {
        std::fprintf(stderr, "fp8_accuracy: --layout is bnsd or bsnd (got '%s')\n", l.c_str());
        return 2;
      }
      layout = l == "bsnd" ? PSA_LAYOUT_BSND : PSA_LAYOUT_BNSD;
    } else if (arg == "--grid" && has_value) {
      if (!parse_ints(argv[++a], &grid_arg) || grid_arg.size() < 3 || grid_arg.size() > 5) {
        std::fprintf(stderr, "fp8_accuracy: --grid is T,H,W[,TEXT[,FIRST]] (got '%s')\n", argv[a]);
        return 2;
      }
    } else {
      const bool help = arg == "--help" || arg == "-h";
      std::fputs(kUsage, help ? stdout : stderr);
      return help ? 0 : 2;
    }
  }
  if (!files.empty()) {
    try {
      return run_files(files, layout, grid_arg, heads, blocks);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fp8_accuracy: %s\n", e.what());
      return 1;
    }
  }
  std::vector<const psa_cli::StandardShape*> picked;
  for (const std::string& key : split(shapes)) {
    const psa_cli::StandardShape* sh = nullptr;
    for (const auto& s : psa_cli::kStandardShapes)
      if (key == s.key) sh = &s;
    if (sh == nullptr) {
      std::fprintf(stderr, "fp8_accuracy: unknown shape '%s' (cogvideox, wan13, wan14)\n", key.c_str());
      return 2;
    }
    picked.push_back(sh);
  }
  if (picked.empty()) {
    std::fprintf(stderr, "fp8_accuracy: --shapes names no shape (cogvideox, wan13, wan14)\n");
    return 2;
  }
  print_header();
  for (const psa_cli::StandardShape* sh : picked) {
    psa_cli::VideoGrid grid;
    grid.t = sh->t;
    grid.h = sh->h;
    grid.w = sh->w;
    grid.text = sh->text;
    grid.position = sh->position;
    const int64_t L = grid.tokens(), d = sh->head_dim, H = std::min<int64_t>(heads, sh->heads);
    psa_cli::HostTensor q = psa_cli::make_tensor(PSA_LAYOUT_BNSD, PSA_DTYPE_BF16, 1, H, L, d);
    psa_cli::HostTensor k = psa_cli::make_tensor(PSA_LAYOUT_BNSD, PSA_DTYPE_BF16, 1, H, L, d);
    psa_cli::HostTensor v = psa_cli::make_tensor(PSA_LAYOUT_BNSD, PSA_DTYPE_BF16, 1, H, L, d);
    psa_cli::fill_synthetic(q, k, v, grid, 1, psa_cli::SyntheticFill::kFast);
    const std::vector<int64_t> src = gilbert_then_text(grid);
    const std::string label = std::string(sh->label) + " (" + std::to_string(H) + " of " + std::to_string(sh->heads) +
                              " heads, " + std::to_string(L) + " tokens, d" + std::to_string(d) + ")";
    for (int kind = 0; kind < kInputs; ++kind) {
      std::vector<std::vector<float>> hq(H), hk(H), hv(H);
      for (int64_t h = 0; h < H; ++h) {
        for (auto* p : {&hq, &hk, &hv}) (*p)[h].resize(L * d);
        for (int64_t i = 0; i < L; ++i)
          for (int64_t c = 0; c < d; ++c) {
            const int64_t at = (h * L + src[i]) * d + c;
            hq[h][i * d + c] = q.values[at];
            hk[h][i * d + c] = k.values[at];
            hv[h][i * d + c] = v.values[at];
          }
        make_input(kind, hq[h], hk[h], hv[h], d);
      }
      print_row(label, kInputNames[kind], hq, hk, hv, L, d, blocks);
    }
  }
  return 0;
}
