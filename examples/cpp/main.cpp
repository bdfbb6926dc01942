// examples/cpp/main.cpp -- libpsa from C++ through find_package(psa): RAII handles, errors as
// exceptions carrying the library's message. Loads a preset, runs a sparse forward on a
// small video-like input on the CPU backend and compares it with a dense forward (a second
// context with PSA_PARAM_METHOD = PSA_METHOD_DENSE). Same input as examples/c/video_input.h.
#include <psa.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Error : std::runtime_error {
  psa_status status;
  Error(psa_status s, const std::string& what)
      : std::runtime_error(std::string(psa_status_name(s)) + ": " + what), status(s) {}
};

void check(psa_status status) {
  if (status != PSA_OK) throw Error(status, psa_last_error_message());
}

struct ConfigDeleter {
  void operator()(psa_config* c) const { psa_config_destroy(c); }
};
struct ContextDeleter {
  void operator()(psa_context* c) const { psa_context_destroy(c); }
};
using Config = std::unique_ptr<psa_config, ConfigDeleter>;
using Context = std::unique_ptr<psa_context, ContextDeleter>;

Config load_preset(const char* model, const char* preset) {
  psa_config* raw = nullptr;
  check(psa_config_load_embedded(model, preset, &raw));
  return Config(raw);
}

constexpr int64_t kHeads = 2, kT = 4, kH = 16, kW = 16, kDim = 64, kLen = kT * kH * kW;

// Counter-based splitmix64 draw `i` in [0, 1): identical in every example's language.
double uniform(uint64_t i) {
  uint64_t z = 42u + (i + 1u) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

// q, k: a unit-variance plane wave per head and channel (+ noise); v: another wave.
void video_qkv(std::vector<float>& q, std::vector<float>& k, std::vector<float>& v) {
  const double two_pi = 6.283185307179586;
  const uint64_t noise_base = static_cast<uint64_t>(kHeads * 2 * kDim * 4);
  for (int64_t hd = 0; hd < kHeads; ++hd)
    for (int64_t l = 0; l < kLen; ++l) {
      const double tt = double(l / (kH * kW)) / kT, hh = double((l / kW) % kH) / kH,
                   ww = double(l % kW) / kW;
      for (int64_t d = 0; d < kDim; ++d) {
        double wave[2];
        for (int c = 0; c < 2; ++c) {
          const uint64_t base = static_cast<uint64_t>(((hd * 2 + c) * kDim + d) * 4);
          const double ft = 3 * uniform(base) - 1.5, fh = 3 * uniform(base + 1) - 1.5,
                       fw = 3 * uniform(base + 2) - 1.5, phase = two_pi * uniform(base + 3);
          wave[c] = std::cos(two_pi * (ft * tt + fh * hh + fw * ww) + phase);
        }
        const int64_t at = (hd * kLen + l) * kDim + d;
        const uint64_t n = noise_base + static_cast<uint64_t>(at) * 2u;
        q[at] = static_cast<float>(1.4142135623730951 * wave[0] + 0.2 * (uniform(n) - 0.5));
        k[at] = static_cast<float>(1.4142135623730951 * wave[0] + 0.2 * (uniform(n + 1) - 0.5));
        v[at] = static_cast<float>(wave[1]);
      }
    }
}

psa_stats forward(const psa_config* cfg, int64_t step, const std::vector<float>& q,
                  const std::vector<float>& k, const std::vector<float>& v,
                  std::vector<float>& out) {
  psa_context* raw = nullptr;
  check(psa_context_create(cfg, PSA_BACKEND_CPU, -1, &raw));
  Context ctx(raw);
  check(psa_context_set_video_grid(ctx.get(), kT, kH, kW, 0, PSA_TEXT_NONE));
  check(psa_context_set_step(ctx.get(), step));
  psa_tensor_desc desc;
  check(psa_tensor_desc_init(&desc, PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, kHeads, kLen, kDim));
  uint64_t bytes = 0;
  check(psa_workspace_size(ctx.get(), &desc, &desc, &desc, &desc, &bytes));
  std::vector<unsigned char> workspace(bytes);
  check(psa_attention_forward(ctx.get(), &desc, q.data(), &desc, k.data(), &desc, v.data(), &desc,
                              out.data(), nullptr, bytes ? workspace.data() : nullptr, bytes,
                              nullptr));
  psa_stats stats{};
  stats.struct_size = sizeof stats;
  check(psa_context_get_stats(ctx.get(), &stats));
  return stats;
}

}  // namespace

int main() try {
  const size_t n = kHeads * kLen * kDim;
  std::vector<float> q(n), k(n), v(n), sparse(n), dense(n);
  video_qkv(q, k, v);

  Config cfg = load_preset("Wan2.1_1.3b", "psa_balanced");
  int64_t warmup = 0;
  check(psa_config_get_int(cfg.get(), PSA_PARAM_WARMUP_STEPS, &warmup));
  const psa_stats s = forward(cfg.get(), warmup, q, k, v, sparse);  // first sparse step
  check(psa_config_set_int(cfg.get(), PSA_PARAM_METHOD, PSA_METHOD_DENSE));
  const psa_stats d = forward(cfg.get(), warmup, q, k, v, dense);

  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(sparse[i]) - dense[i]) * (double(sparse[i]) - dense[i]);
    den += double(dense[i]) * dense[i];
  }
  const double err = std::sqrt(num / den);
  std::printf("libpsa %s via find_package(psa)\n", psa_version_string());
  std::printf("density %.4f, rel-L2 vs dense %.4e, time sparse %.1f ms, dense %.1f ms\n",
              s.density, err, s.stage_ms[PSA_STAGE_TOTAL], d.stage_ms[PSA_STAGE_TOTAL]);
  // The library reports a failure as an exception here, with its own message:
  try {
    load_preset("Wan2.1_1.3b", "no_such_preset");
  } catch (const Error& e) {
    std::printf("expected error: %s\n", e.what());
  }
  return s.density > 0 && s.density < 1 && d.ran_dense && err < 0.5 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
