// config/params.cpp -- configuration stage: the parameter table turned into lookups, bound checks
// and typed member access for psa_config_set/get and the YAML loader. Checks single values only;
// never looks at other parameters.
#include "config/params.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "core/error.h"

namespace psa {
namespace {

#define PSA_PARAM_ROW(id, name, bounds, member) ParamInfo{id, name, bounds},
constexpr ParamInfo kParams[] = {PSA_PARAM_TABLE(PSA_PARAM_ROW)};
#undef PSA_PARAM_ROW

static_assert(count_of(kParams) == PSA_PARAM_COUNT_, "one table row per psa_param");

constexpr bool rows_in_id_order() {
  for (int i = 0; i < count_of(kParams); ++i)
    if (kParams[i].id != static_cast<psa_param>(i)) return false;
  return true;
}
static_assert(rows_in_id_order(), "PSA_PARAM_TABLE rows must follow psa_param values");

template <typename T>
int64_t as_int(const T& member) {
  return static_cast<int64_t>(member);
}
template <typename T>
double as_double(const T& member) {
  return static_cast<double>(member);
}

std::string int_text(int64_t v) { return std::to_string(v); }

}  // namespace

const ParamInfo* param_info(psa_param id) {
  const int i = static_cast<int>(id);
  if (i < 0 || i >= count_of(kParams)) return nullptr;
  return &kParams[i];
}

const ParamInfo* param_by_name(const char* name) {
  if (name == nullptr) return nullptr;
  for (const ParamInfo& p : kParams)
    if (std::strcmp(p.name, name) == 0) return &p;
  return nullptr;
}

void param_bounds(const ParamInfo& p, double* lower, double* upper) {
  switch (p.kind) {
    case ParamKind::kReal:
      *lower = p.lo;
      *upper = p.hi;
      return;
    case ParamKind::kRealOpenHi:
      *lower = p.lo;
      *upper = std::nextafter(p.hi, p.lo);
      return;
    case ParamKind::kRealOpenLo:
      *lower = std::nextafter(p.lo, p.hi);
      *upper = p.hi;
      return;
    default:
      *lower = static_cast<double>(p.ilo);
      *upper = static_cast<double>(p.ihi);
      return;
  }
}

std::string format_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string param_enum_list(const ParamInfo& p) {
  std::string out;
  for (int i = 0; i < p.count; ++i) {
    if (i) out += ", ";
    out += p.names[i];
  }
  return out;
}

std::string param_allowed_text(const ParamInfo& p) {
  std::string out;
  switch (p.kind) {
    case ParamKind::kIntRange:
      if (p.ihi == std::numeric_limits<int64_t>::max()) return ">= " + int_text(p.ilo);
      return "[" + int_text(p.ilo) + ", " + int_text(p.ihi) + "]";
    case ParamKind::kIntSet:
      for (int i = 0; i < p.count; ++i) out += (i ? ", " : "") + int_text(p.values[i]);
      return out;
    case ParamKind::kEnum:
      for (int i = 0; i < p.count; ++i)
        out += (i ? ", " : "") + int_text(i) + " (" + p.names[i] + ")";
      return out;
    case ParamKind::kBool:
      return "0 (false), 1 (true)";
    case ParamKind::kReal:
      if (p.hi == kRealMax) return "finite, >= " + format_double(p.lo);
      if (p.hi == kFloatMax)
        return "[" + format_double(p.lo) + ", " + format_double(p.hi) +
               "] (FLT_MAX: the kernels compute in float)";
      return "[" + format_double(p.lo) + ", " + format_double(p.hi) + "]";
    case ParamKind::kRealOpenHi:
      return "[" + format_double(p.lo) + ", " + format_double(p.hi) + ")";
    case ParamKind::kRealOpenLo:
      return "(" + format_double(p.lo) + ", " + format_double(p.hi) + "]";
  }
  return out;
}

int param_enum_lookup(const ParamInfo& p, const std::string& text) {
  if (p.kind != ParamKind::kEnum) return -1;
  for (int i = 0; i < p.count; ++i)
    if (text == p.names[i]) return i;
  return -1;
}

psa_status param_check_int(const ParamInfo& p, int64_t value, const std::string& display,
                           psa_status code) {
  bool ok = value >= p.ilo && value <= p.ihi;
  if (ok && p.kind == ParamKind::kIntSet) {
    ok = false;
    for (int i = 0; i < p.count; ++i) ok = ok || p.values[i] == value;
  }
  PSA_RETURN_IF(!ok, code, "%s = %lld: allowed %s", display.c_str(), static_cast<long long>(value),
                param_allowed_text(p).c_str());
  return PSA_OK;
}

psa_status param_check_double(const ParamInfo& p, double value, const std::string& display,
                              psa_status code) {
  // Written so that NaN fails every comparison and is rejected.
  bool ok = false;
  switch (p.kind) {
    case ParamKind::kRealOpenHi:
      ok = value >= p.lo && value < p.hi;
      break;
    case ParamKind::kRealOpenLo:
      ok = value > p.lo && value <= p.hi;
      break;
    default:
      ok = value >= p.lo && value <= p.hi;
      break;
  }
  PSA_RETURN_IF(!ok, code, "%s = %s: allowed %s", display.c_str(), format_double(value).c_str(),
                param_allowed_text(p).c_str());
  return PSA_OK;
}

#define PSA_PARAM_LOAD_INT(id, name, bounds, member) \
  case id:                                           \
    return as_int(c.member);
int64_t param_load_int(const Config& c, psa_param id) {
  switch (id) {
    PSA_PARAM_TABLE(PSA_PARAM_LOAD_INT)
    default:
      return 0;
  }
}
#undef PSA_PARAM_LOAD_INT

#define PSA_PARAM_LOAD_DOUBLE(id, name, bounds, member) \
  case id:                                              \
    return as_double(c.member);
double param_load_double(const Config& c, psa_param id) {
  switch (id) {
    PSA_PARAM_TABLE(PSA_PARAM_LOAD_DOUBLE)
    default:
      return 0.0;
  }
}
#undef PSA_PARAM_LOAD_DOUBLE

// decltype(c.member) keeps enum and bool members typed; the caller checked the range.
#define PSA_PARAM_STORE(id, name, bounds, member)                               \
  case id:                                                                      \
    c.member = static_cast<std::remove_reference_t<decltype(c.member)>>(value); \
    return;
void param_store_int(Config& c, psa_param id, int64_t value) {
  switch (id) {
    PSA_PARAM_TABLE(PSA_PARAM_STORE)
    default:
      return;
  }
}
void param_store_double(Config& c, psa_param id, double value) {
  switch (id) {
    PSA_PARAM_TABLE(PSA_PARAM_STORE)
    default:
      return;
  }
}
#undef PSA_PARAM_STORE

namespace {

psa_status lookup_typed(psa_param id, psa_param_type want, const char* call,
                        const ParamInfo** out) {
  const ParamInfo* p = param_info(id);
  PSA_RETURN_IF(p == nullptr, PSA_ERR_INVALID_ARGUMENT, "param = %d: allowed 0..%d",
                static_cast<int>(id), PSA_PARAM_COUNT_ - 1);
  const psa_param_type have = param_type(*p);
  PSA_RETURN_IF(have != want, PSA_ERR_INVALID_ARGUMENT,
                "param %s is of type %s: use psa_config_%s_%s", p->name,
                have == PSA_PARAM_TYPE_INT ? "int" : "double", call,
                have == PSA_PARAM_TYPE_INT ? "int" : "double");
  *out = p;
  return PSA_OK;
}

}  // namespace

psa_status param_set_int(Config& c, psa_param id, int64_t value) {
  const ParamInfo* p = nullptr;
  PSA_TRY(lookup_typed(id, PSA_PARAM_TYPE_INT, "set", &p));
  PSA_TRY(param_check_int(*p, value, p->name, PSA_ERR_INVALID_ARGUMENT));
  param_store_int(c, id, value);
  return PSA_OK;
}

psa_status param_set_double(Config& c, psa_param id, double value) {
  const ParamInfo* p = nullptr;
  PSA_TRY(lookup_typed(id, PSA_PARAM_TYPE_DOUBLE, "set", &p));
  PSA_TRY(param_check_double(*p, value, p->name, PSA_ERR_INVALID_ARGUMENT));
  param_store_double(c, id, value);
  return PSA_OK;
}

psa_status param_get_int(const Config& c, psa_param id, int64_t* value) {
  const ParamInfo* p = nullptr;
  PSA_TRY(lookup_typed(id, PSA_PARAM_TYPE_INT, "get", &p));
  *value = param_load_int(c, id);
  return PSA_OK;
}

psa_status param_get_double(const Config& c, psa_param id, double* value) {
  const ParamInfo* p = nullptr;
  PSA_TRY(lookup_typed(id, PSA_PARAM_TYPE_DOUBLE, "get", &p));
  *value = param_load_double(c, id);
  return PSA_OK;
}

}  // namespace psa
