/* tests/c11/header_check.c -- psa.h compiled as strict C11 (-Wall -Wextra -pedantic
 * -Werror) and linked against libpsa; also checks the header/library version agree. */
#include <stdio.h>
#include <string.h>

#include "psa.h"

int main(void) {
  psa_tensor_desc d;
  psa_config* cfg = NULL;
  psa_status st;
  if (psa_version_number() != PSA_VERSION_NUMBER) {
    fprintf(stderr, "header %d != library %u\n", PSA_VERSION_NUMBER, psa_version_number());
    return 1;
  }
  if (strcmp(psa_version_string(), PSA_VERSION_STRING) != 0) return 1;
  st = psa_tensor_desc_init(&d, PSA_LAYOUT_BSND, PSA_DTYPE_BF16, 1, 2, 3, 64);
  if (st != PSA_OK || d.strides[2] != 128) return 1;
  st = psa_config_create(NULL);
  if (st != PSA_ERR_NULL_POINTER || strstr(psa_last_error_message(), "out") == NULL) return 1;
  if (psa_config_create(&cfg) != PSA_OK) return 1;
  psa_config_destroy(cfg);
  psa_config_destroy(NULL);
  printf("psa.h C11 check: library %s\n", psa_version_string());
  return 0;
}
