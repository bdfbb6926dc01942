// cli/cli.cpp -- the out-of-line part of cli.h: the text of a library error.
#include "cli.h"

#include <string>

namespace psa_cli {

std::string library_error(psa_status status) {
  std::string msg = psa_last_error_message();
  if (msg.empty()) msg = psa_status_string(status);
  return msg + " (" + psa_status_name(status) + ")";
}

}  // namespace psa_cli
