// methods/methods.cpp -- placeholder dispatch for rf_v2 / ada_bsa until their mask
// builders land (owned by the methods work; replace wholesale).
#include "methods/methods.h"

#include "core/error.h"

namespace psa {

psa_status build_method_levels(const Config&, const Plan&, const float*, const float*, float*,
                               int8_t*) {
  return set_error(PSA_ERR_UNSUPPORTED, "type: rf_v2 / ada_bsa are not implemented yet");
}

int64_t method_scratch_floats(const Config&, const Plan&) { return 0; }

}  // namespace psa
