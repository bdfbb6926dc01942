// cli/backend_info.h -- which backend a command ran on and why, in one line ("cuda: NVIDIA
// H100 80GB HBM3 (device 0); --backend auto: ..." / "cpu: --backend auto: built without CUDA").
#pragma once
#include <string>

#include "psa.h"

namespace psa_cli {

// What the CUDA backend can do here, from a context creation: "available", "not built in",
// "built in, no usable device" (plus the library's reason in `detail` when not empty).
std::string cuda_availability(std::string* detail = nullptr);

// The backend line: `chosen` (what the context reports) with the reason, given what was
// asked for. Never throws (a failing device-name query gives "device 0").
std::string backend_reason(psa_backend requested, psa_backend chosen);

const char* backend_name(psa_backend b);  // "cpu", "cuda", "auto"

}  // namespace psa_cli
