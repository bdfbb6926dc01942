// backend/backend_ring.cpp -- the Backend interface's default for the PSA ring halves: a
// backend without its own (the CPU backend's run in ring/ring_cpu.cpp, called by
// api/ring_api.cpp) refuses them naming itself.
#include "backend/backend.h"
#include "core/error.h"

namespace psa {
namespace {

psa_status ring_unsupported(const Backend& b) {
  return set_error(PSA_ERR_UNSUPPORTED,
                   "backend = %d: psa_compute_level_map and psa_shard_attention are not "
                   "implemented on this backend",
                   static_cast<int>(b.kind()));
}

}  // namespace

psa_status Backend::ring_workspace(const Plan& plan, bool level_map, uint64_t* bytes) {
  (void)plan;
  (void)level_map;
  (void)bytes;
  return ring_unsupported(*this);
}

psa_status Backend::ring_level_map(const Plan& plan, const RingTensors& t, bool dense,
                                   int8_t* levels, void* workspace, void* stream) {
  (void)plan;
  (void)t;
  (void)dense;
  (void)levels;
  (void)workspace;
  (void)stream;
  return ring_unsupported(*this);
}

psa_status Backend::ring_shard_attention(const Plan& plan, const RingTensors& t,
                                         const int8_t* levels, int64_t map_nk, int64_t begin,
                                         void* workspace, void* stream) {
  (void)plan;
  (void)t;
  (void)levels;
  (void)map_nk;
  (void)begin;
  (void)workspace;
  (void)stream;
  return ring_unsupported(*this);
}

}  // namespace psa
