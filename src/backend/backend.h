// backend/backend.h -- the interface both backends implement. The pipeline
// (pipeline/forward.cpp) validates, picks dense vs sparse and calls one of these; a backend
// never sees psa_tensor_desc or YAML.
#pragma once
#include <cstdint>
#include <memory>

#include "context/plan.h"

namespace psa {

struct RingTensors;  // ring/ring_cpu.h

// Per-call arguments: raw pointers and 64-bit element strides [B, H, L, D].
struct ForwardArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;  // optional, fp32 [B, Hq, Lq] contiguous
  int64_t q_stride[4] = {0, 0, 0, 0};
  int64_t k_stride[4] = {0, 0, 0, 0};
  int64_t v_stride[4] = {0, 0, 0, 0};
  int64_t o_stride[4] = {0, 0, 0, 0};
  void* workspace = nullptr;
  uint64_t workspace_bytes = 0;
  void* stream = nullptr;
  bool dense = false;  // method dense or a warm-up step
  // Injected importance samples (experimental API), host memory [B, Hq, count]; NULL =
  // the seeded sampler.
  const int32_t* q_offsets = nullptr;
  const int32_t* k_offsets = nullptr;
};

// A plan keeps the level map of its last sparse forward (psa_context_get_level_map) when it
// is at most this many bytes (batch * heads * q_blocks * k_blocks); a larger shape still plans
// and runs, and reading its map reports PSA_ERR_OUT_OF_MEMORY naming this bound.
inline constexpr uint64_t kMaxKeptLevelMapBytes = uint64_t{1} << 30;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual psa_backend kind() const = 0;
  // Completes `plan` for this backend: sets plan->workspace_bytes and backend_data. Reads the
  // plan's route, never the Config.
  virtual psa_status prepare(Plan* plan) = 0;
  // Checks that every pointer of `args` lives in this backend's memory space.
  virtual psa_status check_pointers(const Plan& plan, const ForwardArgs& args) = 0;
  // Runs one forward. CPU: synchronous, fills *counts. CUDA: enqueues on args.stream and
  // writes counts into the workspace; read them later with read_counts().
  virtual psa_status forward(const Plan& plan, const ForwardArgs& args, LevelCounts* counts) = 0;
  // Per-stage GPU timing of this backend's sparse forwards (psa_context_set_stage_timing):
  // CUDA records events at the stage boundaries only while it is on and fills
  // LevelCounts::stage_ms from them in read_counts. The CPU backend always times (host clock).
  virtual psa_status set_stage_timing(bool on) {
    (void)on;
    return PSA_OK;
  }
  // Fetches the counts of the last sparse forward (CUDA: synchronises its stream; with stage
  // timing on, also its stage times).
  virtual psa_status read_counts(LevelCounts* counts) = 0;
  // Copies the level map [B, Hq, Mq, Nk] int8 that the last sparse forward with `plan` kept
  // (in plan-owned memory sized by prepare) into host memory `dst`. CUDA: synchronises the
  // last forward's stream, then copies device to host.
  virtual psa_status read_levels(const Plan& plan, int8_t* dst) = 0;
  // The PSA ring halves (api/ring_api.cpp, which checks the arguments and runs the CPU
  // backend's in ring/ring_cpu.cpp) on a device backend: workspace bytes (level_map: half 1,
  // else half 2), the level map (enqueues; counts as read_counts reads them) and the shard
  // attention. Default: PSA_ERR_UNSUPPORTED.
  virtual psa_status ring_workspace(const Plan& plan, bool level_map, uint64_t* bytes);
  virtual psa_status ring_level_map(const Plan& plan, const RingTensors& t, bool dense,
                                    int8_t* levels, void* workspace, void* stream);
  virtual psa_status ring_shard_attention(const Plan& plan, const RingTensors& t,
                                          const int8_t* levels, int64_t map_nk, int64_t begin,
                                          void* workspace, void* stream);
};

std::unique_ptr<Backend> make_cpu_backend();
// The CPU backend's kept level map of `plan` (host, [B, Hq, Mq, Nk]); NULL when it keeps none.
int8_t* cpu_kept_levels(const Plan& plan);
// Returns PSA_ERR_BACKEND_UNAVAILABLE when CUDA is not built in, PSA_ERR_NO_DEVICE when no
// device can be used.
psa_status make_cuda_backend(int32_t device, std::unique_ptr<Backend>* out);
// True when CUDA is built in and at least one device is usable (for PSA_BACKEND_AUTO).
bool cuda_backend_available();

}  // namespace psa

namespace psa {
// Where a pointer lives, as the CUDA runtime reports it (always kHost without CUDA).
enum class MemorySpace { kHost, kDevice, kManaged };
MemorySpace memory_space_of(const void* ptr);
// PSA_ERR_MISALIGNED_POINTER naming `name` unless `ptr` is a multiple of `align` bytes (the
// CPU backend reads and writes tensors as float / uint16_t: their element size).
psa_status check_element_alignment(const void* ptr, unsigned align, const char* name);
}  // namespace psa
