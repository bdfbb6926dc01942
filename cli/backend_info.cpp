// cli/backend_info.cpp -- the backend line of `psa run`, `psa bench` and `psa version`.
#include "backend_info.h"

#include "cuda_runtime.h"

namespace psa_cli {

const char* backend_name(psa_backend b) {
  return b == PSA_BACKEND_CUDA ? "cuda" : b == PSA_BACKEND_CPU ? "cpu" : "auto";
}

std::string cuda_availability(std::string* detail) {
  psa_config* cfg = nullptr;
  if (psa_config_create(&cfg) != PSA_OK) return "unknown";
  psa_context* ctx = nullptr;
  const psa_status st = psa_context_create(cfg, PSA_BACKEND_CUDA, -1, &ctx);
  if (detail != nullptr) *detail = st == PSA_OK ? "" : psa_last_error_message();
  psa_context_destroy(ctx);
  psa_config_destroy(cfg);
  switch (st) {
    case PSA_OK: return "available";
    case PSA_ERR_BACKEND_UNAVAILABLE: return "not built in";
    case PSA_ERR_NO_DEVICE: return "built in, no usable device";
    default: return std::string("unavailable (") + psa_status_name(st) + ")";
  }
}

std::string backend_reason(psa_backend requested, psa_backend chosen) {
  if (chosen == PSA_BACKEND_CUDA) {
    std::string device;
    try {
      device = CudaRuntime::get().device_name();
    } catch (...) {
      device = "device 0";
    }
    return std::string("cuda: ") + device +
           (requested == PSA_BACKEND_CUDA
                ? " (asked for with --backend cuda)"
                : " (--backend auto: the CUDA backend is built in and a device is usable)");
  }
  if (requested == PSA_BACKEND_CPU) return "cpu: asked for with --backend cpu";
  std::string detail;
  const std::string cuda = cuda_availability(&detail);
  if (cuda == "not built in") return "cpu: --backend auto: this libpsa was built without CUDA";
  if (cuda == "built in, no usable device") {
    // The library's message already says "no usable CUDA device (<the runtime's reason>)",
    // after the backend and device it was asked for.
    const size_t at = detail.find("no usable CUDA device");
    if (at != std::string::npos) return "cpu: --backend auto: " + detail.substr(at);
    return "cpu: --backend auto: no usable CUDA device" + (detail.empty() ? "" : " (" + detail + ")");
  }
  return "cpu: --backend auto: cuda " + cuda;
}

}  // namespace psa_cli
