// api/core_api.cpp -- extern "C" entry points for version, status strings, last error and
// tensor descriptor helpers. Thin: all logic lives in core/.
#include "api/guard.h"
#include "core/tensor.h"

extern "C" {

PSA_API unsigned psa_version_number(void) { return PSA_VERSION_NUMBER; }
PSA_API const char* psa_version_string(void) { return PSA_VERSION_STRING; }

PSA_API const char* psa_status_string(psa_status status) {
  switch (status) {
#define PSA_STATUS_TEXT_(name, value, text) \
  case name:                                \
    return text;
    PSA_STATUS_TABLE(PSA_STATUS_TEXT_)
#undef PSA_STATUS_TEXT_
    default:
      return "unknown status";
  }
}

PSA_API const char* psa_status_name(psa_status status) {
  switch (status) {
#define PSA_STATUS_NAME_(name, value, text) \
  case name:                                \
    return #name;
    PSA_STATUS_TABLE(PSA_STATUS_NAME_)
#undef PSA_STATUS_NAME_
    default:
      return "PSA_STATUS_UNKNOWN";
  }
}

PSA_API const char* psa_last_error_message(void) { return psa::last_error_message(); }
PSA_API psa_status psa_last_error_status(void) { return psa::last_error_status(); }

PSA_API int32_t psa_dtype_size(psa_dtype dtype) { return psa::dtype_size(dtype); }

PSA_API psa_status psa_tensor_desc_init(psa_tensor_desc* desc, psa_layout layout, psa_dtype dtype,
                                        int64_t batch, int64_t heads, int64_t seq_len,
                                        int64_t head_dim) {
  PSA_API_BEGIN
  return psa::tensor_desc_init(desc, layout, dtype, batch, heads, seq_len, head_dim);
  PSA_API_END
}

}  // extern "C"
