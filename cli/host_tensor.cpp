// cli/host_tensor.cpp -- host tensors of the CLI: IEEE half and bfloat16 conversions (round
// to nearest even) and the .npy <-> tensor mapping. Conversions only; no attention math.
#include "host_tensor.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "cli.h"
#include "npy.h"

namespace psa_cli {
namespace {

uint32_t bits_of(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

float float_of(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

uint16_t f32_to_f16(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);  // inf, nan
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (a < 0x38800000u) {                        // below 2^-14: subnormal, units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(float_of(a) * 16777216.0f));
  }
  uint32_t h = ((((a >> 23) - 127 + 15) << 10) | ((a & 0x7fffffu) >> 13));
  const uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carry may reach the exponent
  return sign | static_cast<uint16_t>(h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return float_of(sign | 0x7f800000u | (mant << 13));
  return float_of(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t f32_to_bf16(float f) {
  const uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bf16_to_f32(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

}  // namespace

std::vector<int64_t> HostTensor::file_shape() const {
  if (layout == PSA_LAYOUT_BNSD) return {batch(), heads(), seq_len(), head_dim()};
  return {batch(), seq_len(), heads(), head_dim()};
}

void check_host_memory(double bytes, const std::string& what) {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGE_SIZE)
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return;
  const double have = static_cast<double>(pages) * static_cast<double>(page);
  if (bytes > have) {
    char msg[256];
    std::snprintf(msg, sizeof msg, "%s need %.3g GB of host memory; this machine has %.3g GB",
                  what.c_str(), bytes * 1e-9, have * 1e-9);
    throw Failure(msg);
  }
#else
  (void)bytes;
  (void)what;
#endif
}

HostTensor make_tensor(psa_layout layout, psa_dtype dtype, int64_t batch, int64_t heads,
                       int64_t seq_len, int64_t head_dim) {
  HostTensor t;
  t.desc.struct_size = sizeof(psa_tensor_desc);
  check(psa_tensor_desc_init(&t.desc, layout, dtype, batch, heads, seq_len, head_dim));
  const double values = static_cast<double>(batch) * static_cast<double>(heads) *
                        static_cast<double>(seq_len) * static_cast<double>(head_dim);
  check_host_memory(4.0 * values, "a tensor of " + std::to_string(batch) + " x " + std::to_string(heads) +
                                      " x " + std::to_string(seq_len) + " x " + std::to_string(head_dim) +
                                      " values (f32 on the host) would");
  t.layout = layout;
  t.values.assign(static_cast<size_t>(batch * heads * seq_len * head_dim), 0.0f);
  return t;
}

float round_to_dtype(float value, psa_dtype dtype) {
  if (dtype == PSA_DTYPE_F16) return f16_to_f32(f32_to_f16(value));
  if (dtype == PSA_DTYPE_BF16) return bf16_to_f32(f32_to_bf16(value));
  return value;
}

void round_to_dtype(std::vector<float>& values, psa_dtype dtype) {
  if (dtype == PSA_DTYPE_F16) {
    for (float& v : values) v = f16_to_f32(f32_to_f16(v));
  } else if (dtype == PSA_DTYPE_BF16) {
    for (float& v : values) v = bf16_to_f32(f32_to_bf16(v));
  }
}

std::vector<uint8_t> encode(const std::vector<float>& values, psa_dtype dtype) {
  std::vector<uint8_t> out(values.size() * static_cast<size_t>(psa_dtype_size(dtype)));
  if (dtype == PSA_DTYPE_F32) {
    std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  uint16_t* o = reinterpret_cast<uint16_t*>(out.data());
  for (size_t i = 0; i < values.size(); ++i) {
    o[i] = dtype == PSA_DTYPE_F16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
  }
  return out;
}

std::vector<float> decode(const void* bytes, uint64_t count, psa_dtype dtype) {
  std::vector<float> out(count);
  if (dtype == PSA_DTYPE_F32) {
    std::memcpy(out.data(), bytes, count * sizeof(float));
    return out;
  }
  const uint16_t* in = static_cast<const uint16_t*>(bytes);
  for (uint64_t i = 0; i < count; ++i) {
    out[i] = dtype == PSA_DTYPE_F16 ? f16_to_f32(in[i]) : bf16_to_f32(in[i]);
  }
  return out;
}

const char* dtype_name(psa_dtype dtype) {
  switch (dtype) {
    case PSA_DTYPE_F32: return "f32";
    case PSA_DTYPE_F16: return "f16";
    case PSA_DTYPE_BF16: return "bf16";
  }
  return "unknown";
}

HostTensor load_npy_tensor(const std::string& path, psa_layout layout, int dtype) {
  NpyArray a = read_npy(path);
  const char* dims = layout == PSA_LAYOUT_BNSD ? "[B, H, L, D] (--layout bnsd)"
                                               : "[B, L, H, D] (--layout bsnd)";
  if (a.shape.size() != 4) {
    throw Failure(path + ": expected a 4-D array " + dims + ", got " +
                  std::to_string(a.shape.size()) + " dimensions");
  }
  psa_dtype file_dtype;
  if (a.descr == "<f4") {
    file_dtype = PSA_DTYPE_F32;
  } else if (a.descr == "<f2") {
    file_dtype = PSA_DTYPE_F16;
  } else if (a.descr == "<u2" || a.descr == "<V2" || a.descr == "|V2") {
    if (dtype != PSA_DTYPE_BF16) {
      throw Failure(path + ": dtype '" + a.descr + "' is raw 16-bit data; pass --dtype bf16 to "
                    "read it as bfloat16");
    }
    file_dtype = PSA_DTYPE_BF16;
  } else {
    throw Failure(path + ": dtype '" + a.descr + "' is not supported; expected '<f4', '<f2', or "
                  "'<u2' holding bfloat16 bits (with --dtype bf16)");
  }
  const psa_dtype run_dtype = dtype < 0 ? file_dtype : static_cast<psa_dtype>(dtype);
  const bool bnsd = layout == PSA_LAYOUT_BNSD;
  HostTensor t = make_tensor(layout, run_dtype, a.shape[0], bnsd ? a.shape[1] : a.shape[2],
                             bnsd ? a.shape[2] : a.shape[1], a.shape[3]);
  t.values = decode(a.data.data(), t.values.size(), file_dtype);
  if (run_dtype != file_dtype) round_to_dtype(t.values, run_dtype);
  return t;
}

void save_npy_tensor(const std::string& path, const HostTensor& t, bool native) {
  const psa_dtype dtype = native ? t.desc.dtype : PSA_DTYPE_F32;
  const char* descr = dtype == PSA_DTYPE_F32 ? "<f4" : dtype == PSA_DTYPE_F16 ? "<f2" : "<u2";
  const std::vector<uint8_t> bytes = encode(t.values, dtype);
  write_npy(path, descr, t.file_shape(), bytes.data(), bytes.size());
}

}  // namespace psa_cli
