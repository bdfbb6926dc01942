// backend/cuda/cuda_backend.cpp -- placeholder until the CUDA backend lands: reports the
// backend as not built in. (Owned by the CUDA backend work; replace wholesale.)
#include "backend/backend.h"
#include "core/error.h"

namespace psa {

bool cuda_backend_available() { return false; }

psa_status make_cuda_backend(int32_t, std::unique_ptr<Backend>*) {
  return set_error(PSA_ERR_BACKEND_UNAVAILABLE,
                   "backend = PSA_BACKEND_CUDA: this build of libpsa has no CUDA backend");
}

}  // namespace psa
