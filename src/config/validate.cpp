// config/validate.cpp -- configuration stage: every cross-parameter rule of a Config, checked
// once before a config is used (psa_config_validate, the YAML loader, context creation).
// Reads a Config only; knows nothing about YAML, shapes or backends.
#include <string>

#include "config/config.h"
#include "config/params.h"
#include "core/error.h"

namespace psa {
namespace {

std::string key(const std::string& where, const char* name) {
  return where.empty() ? std::string(name) : where + "." + name;
}

const char* enum_name(psa_param id, int64_t v) {
  const ParamInfo* p = param_info(id);
  return (v >= 0 && v < p->count) ? p->names[v] : "?";
}

// A Config built in C++ (not through set calls) may hold anything, so the single-value bounds
// are re-checked here with the same messages the set calls give.
psa_status check_bounds(const Config& c, const std::string& where) {
  for (int i = 0; i < PSA_PARAM_COUNT_; ++i) {
    const auto id = static_cast<psa_param>(i);
    const ParamInfo& p = *param_info(id);
    if (param_type(p) == PSA_PARAM_TYPE_INT)
      PSA_TRY(
          param_check_int(p, param_load_int(c, id), key(where, p.name), PSA_ERR_INVALID_CONFIG));
    else
      PSA_TRY(param_check_double(p, param_load_double(c, id), key(where, p.name),
                                 PSA_ERR_INVALID_CONFIG));
  }
  return PSA_OK;
}

// Only the ends are read (spec 4.1); the mask builder walks the levels in slot order, which
// matches both the reference's topk dict order and its thresholdbound sort only when the ends
// do not decrease along 1, 2, 4, 8, 0.
psa_status check_ratios(const Config& c, const std::string& where) {
  static const char* const kNames[kNumSlots] = {"mask_ratios.1", "mask_ratios.2", "mask_ratios.4",
                                                "mask_ratios.8", "mask_ratios.0"};
  for (int s = 1; s < kNumSlots; ++s) {
    PSA_RETURN_IF(c.ratio_end[s] < c.ratio_end[s - 1], PSA_ERR_INVALID_CONFIG,
                  "%s = %s: must be >= %s = %s (ratio ends are non-decreasing in level order 1, 2, "
                  "4, 8, 0)",
                  key(where, kNames[s]).c_str(), format_double(c.ratio_end[s]).c_str(),
                  kNames[s - 1], format_double(c.ratio_end[s - 1]).c_str());
  }
  return PSA_OK;
}

// The reference's legacy kernel and the similarity cap exist for 128x128 blocks only; the
// separator-format kernel supports block_n 32/64/128 (spec 9.4).
psa_status check_mask_format(const Config& c, const std::string& where) {
  if (c.mask_format == PSA_MASK_FORMAT_LEVELS) {
    PSA_RETURN_IF(c.block_m != 128, PSA_ERR_INVALID_CONFIG,
                  "%s = %lld: attn_impl old_mask_type allows only 128",
                  key(where, "block_size.m").c_str(), static_cast<long long>(c.block_m));
    PSA_RETURN_IF(c.block_n != 128, PSA_ERR_INVALID_CONFIG,
                  "%s = %lld: attn_impl old_mask_type allows only 128",
                  key(where, "block_size.n").c_str(), static_cast<long long>(c.block_n));
    return PSA_OK;
  }
  PSA_RETURN_IF(c.block_n != 32 && c.block_n != 64 && c.block_n != 128, PSA_ERR_INVALID_CONFIG,
                "%s = %lld: attn_impl new_mask_type allows 32, 64, 128",
                key(where, "block_size.n").c_str(), static_cast<long long>(c.block_n));
  const char* fmt_name = enum_name(PSA_PARAM_MASK_FORMAT, c.mask_format);
  PSA_RETURN_IF(c.use_sim_mask, PSA_ERR_INVALID_CONFIG,
                "%s = true: allowed only with attn_impl old_mask_type (attn_impl = %s); allowed "
                "here: false",
                key(where, "use_sim_mask").c_str(), fmt_name);
  PSA_RETURN_IF(c.text_rule == PSA_TEXT_RULE_REFERENCE_SUFFIX, PSA_ERR_INVALID_CONFIG,
                "%s = reference_suffix: allowed only with attn_impl old_mask_type (attn_impl = "
                "%s); allowed here: span",
                key(where, "text_rule").c_str(), fmt_name);
  return PSA_OK;
}

// A tile packs whole pooled blocks: bn // tn == 0 is the reference's ZeroDivisionError.
psa_status check_blocks(const Config& c, const std::string& where) {
  PSA_RETURN_IF(c.tile_n > c.block_n, PSA_ERR_INVALID_CONFIG,
                "%s = %lld: must be <= block_size.n (%lld)",
                key(where, "block_size.tile_n").c_str(), static_cast<long long>(c.tile_n),
                static_cast<long long>(c.block_n));
  // Every block needs at least one importance sample.
  const int64_t smallest = c.block_m < c.block_n ? c.block_m : c.block_n;
  PSA_RETURN_IF(c.sample_divisor < 1 || smallest / c.sample_divisor < 1, PSA_ERR_INVALID_CONFIG,
                "%s = %lld: block_size (%lld) / sample_divisor must be >= 1",
                key(where, "sample_divisor").c_str(), static_cast<long long>(c.sample_divisor),
                static_cast<long long>(smallest));
  return PSA_OK;
}

// rf_v2 and ada_bsa are defined on 128x128 blocks only (rainfusion-adabsa spec 4).
psa_status check_block_sparse_methods(const Config& c, const std::string& where) {
  if (route_of(c.method) != Route::kBlockMethod) return PSA_OK;
  const char* m = enum_name(PSA_PARAM_METHOD, c.method);
  PSA_RETURN_IF(c.block_m != 128, PSA_ERR_INVALID_CONFIG, "%s = %lld: type %s allows only 128",
                key(where, "block_size.m").c_str(), static_cast<long long>(c.block_m), m);
  PSA_RETURN_IF(c.block_n != 128, PSA_ERR_INVALID_CONFIG, "%s = %lld: type %s allows only 128",
                key(where, "block_size.n").c_str(), static_cast<long long>(c.block_n), m);
  PSA_RETURN_IF(!(c.sparsity >= 0.0 && c.sparsity < 1.0), PSA_ERR_INVALID_CONFIG,
                "%s = %s: type %s allows [0, 1)", key(where, "sparsity").c_str(),
                format_double(c.sparsity).c_str(), m);
  PSA_RETURN_IF(!(c.cdf_threshold > 0.0 && c.cdf_threshold <= 1.0), PSA_ERR_INVALID_CONFIG,
                "%s = %s: type %s allows (0, 1]", key(where, "cdf_threshold").c_str(),
                format_double(c.cdf_threshold).c_str(), m);
  return PSA_OK;
}

// psa_causal (spec App. A) is causal-only and works on square blocks scored at a stride; the
// energybound mode exists for it alone.
psa_status check_causal_method(const Config& c, const std::string& where) {
  const char* m = enum_name(PSA_PARAM_METHOD, c.method);
  if (c.method != PSA_METHOD_PSA_CAUSAL) {
    PSA_RETURN_IF(c.mask_mode == PSA_MASK_MODE_ENERGYBOUND, PSA_ERR_INVALID_CONFIG,
                  "%s = energybound: allowed only with type psa_causal (type = %s); allowed "
                  "here: topk, thresholdbound",
                  key(where, "mask_mode").c_str(), m);
    return PSA_OK;
  }
  PSA_RETURN_IF(!c.causal, PSA_ERR_INVALID_CONFIG,
                "%s = false: type psa_causal is causal-only; allowed: true",
                key(where, "causal").c_str());
  PSA_RETURN_IF(c.mask_mode != PSA_MASK_MODE_TOPK && c.mask_mode != PSA_MASK_MODE_ENERGYBOUND,
                PSA_ERR_INVALID_CONFIG, "%s = %s: type psa_causal allows topk, energybound",
                key(where, "mask_mode").c_str(), enum_name(PSA_PARAM_MASK_MODE, c.mask_mode));
  PSA_RETURN_IF(c.block_n != c.block_m, PSA_ERR_INVALID_CONFIG,
                "%s = %lld: type psa_causal needs square blocks (block_size.m = %lld)",
                key(where, "block_size.n").c_str(), static_cast<long long>(c.block_n),
                static_cast<long long>(c.block_m));
  PSA_RETURN_IF(c.block_m % c.xattn_stride != 0, PSA_ERR_INVALID_CONFIG,
                "%s = %lld: must divide block_size.m (%lld)", key(where, "xattn_stride").c_str(),
                static_cast<long long>(c.xattn_stride), static_cast<long long>(c.block_m));
  PSA_RETURN_IF(c.xattn_chunk_size % c.block_m != 0, PSA_ERR_INVALID_CONFIG,
                "%s = %lld: must be a multiple of block_size.m (%lld)",
                key(where, "xattn_chunk_size").c_str(), static_cast<long long>(c.xattn_chunk_size),
                static_cast<long long>(c.block_m));
  PSA_RETURN_IF(c.use_rearrange, PSA_ERR_INVALID_CONFIG,
                "%s = true: type psa_causal is causal, and causal masking is meaningless after "
                "token rearrangement; allowed: false",
                key(where, "use_rearrange").c_str());
  return PSA_OK;
}

}  // namespace

psa_status validate_config(const Config& config, const std::string& where) {
  PSA_TRY(check_bounds(config, where));
  PSA_TRY(check_ratios(config, where));
  PSA_TRY(check_mask_format(config, where));
  PSA_TRY(check_blocks(config, where));
  PSA_TRY(check_block_sparse_methods(config, where));
  PSA_TRY(check_causal_method(config, where));
  return PSA_OK;
}

}  // namespace psa
