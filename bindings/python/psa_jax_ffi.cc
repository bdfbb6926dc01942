// bindings/python/psa_jax_ffi.cc -- libpsa as an XLA FFI custom call: the handlers behind
// psa.jax.attention (bindings/python/psa/jax.py), built against the header-only XLA FFI API
// that jaxlib ships (jax.ffi.include_dir()) into psa/_jax_ffi.so, which links libpsa through
// RPATH $ORIGIN and is loaded by ctypes (it is not a Python extension).
//
//   PsaJaxAttentionHost  platform "cpu":  CPU backend; host workspace kept with the context
//   PsaJaxAttentionCuda  platform "CUDA": CUDA backend on the call's stream (PlatformStream),
//                        device from DeviceOrdinal, workspace (see "The CUDA workspace" below)
//                        from the FFI scratch allocator, else stream-ordered cuMemAllocAsync.
//
// The CUDA workspace: first XLA's FFI scratch allocator (XLA's device allocator: freed when
// the handler returns, reused only by work that XLA orders after this call). XLA accepts no
// alignment above 16 bytes there (XLA_FFI_DeviceMemory_Allocate answers "Unsupported
// alignment" for more), so the handler asks for 16 and 240 bytes of slack and aligns the
// pointer to 256 itself (XLA's allocator gives 256-byte aligned blocks anyway). Should that
// allocator still fail (none in the execution context, or out of memory), the workspace is
// allocated stream-ordered on the call's stream from the device's current memory pool
// (cuMemAllocAsync) and released right after the forwards are enqueued (cuMemFreeAsync on
// the same stream): no host synchronisation either way, as libpsa's psa_sparse_attention
// does. The driver API is reached with dlopen("libcuda.so.1") -- loaded anyway in a process
// that runs CUDA work -- so the handler needs neither CUDA headers nor a second (static)
// copy of cudart, whose state would be separate from libpsa's.
//
// Buffers: q, k, v ([..., B, H, L, D] for layout 0 "bhld", [..., B, L, H, D] for layout 1
// "blhd"; f32, f16 or bf16; XLA's row-major), results out (q's shape) and optionally lse
// (f32 [..., B, H, L]). Leading dims "..." come from jax.vmap (vmap_method="expand_dims"): each
// index is one forward on the 4-D slices, an input whose leading dim is 1 broadcasts.
//
// Attributes: config (a key as psa.torch.config_key() writes it: "model=M[,preset=P]" or
// "config", then ";name=value" overrides with YAML words for enum parameters), grid_t,
// grid_h, grid_w (0: no grid, tokens in the given order), text_length, text_position
// (psa_text_position), layout (0 bhld, 1 blhd), causal (0/1), scale (f64, 0: 1/sqrt(D)),
// step (-1: sparse, i.e. the step pinned at warmup_steps; s >= 0: the preset's warm-up rule
// at step s).
//
// Contexts are cached (bounded LRU, thread-safe) by backend, device, config key, causal,
// scale, grid, layout, dtype and the 4-D shapes of q and k: a repeated call plans nothing.
// On CUDA a warm call enqueues on the stream and returns: no host synchronisation, and no
// allocation of its own unless XLA's scratch allocator refuses (then a stream-ordered one);
// a context evicted from the cache is destroyed after its last forward's stream is done
// with it.
// Also exported for psa/jax.py: PsaJaxCacheInfo, PsaJaxClearCache, PsaJaxHeaderVersion.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "psa.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr size_t kCacheCapacity = 64;

// ---- errors ---------------------------------------------------------------------------
ffi::Error invalid(std::string message) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, "psa.jax.attention: " + message);
}

ffi::Error library_error(const char* what, psa_status status) {
  std::string message = std::string("psa.jax.attention: ") + what + ": " +
                        psa_status_name(status) + ": " + psa_last_error_message();
  ffi::ErrorCode code = ffi::ErrorCode::kInternal;
  switch (status) {
    case PSA_ERR_INVALID_ARGUMENT:
    case PSA_ERR_INVALID_CONFIG:
    case PSA_ERR_NOT_FOUND:
      code = ffi::ErrorCode::kInvalidArgument;
      break;
    case PSA_ERR_UNSUPPORTED:
      code = ffi::ErrorCode::kUnimplemented;
      break;
    case PSA_ERR_OUT_OF_MEMORY:
      code = ffi::ErrorCode::kResourceExhausted;
      break;
    default:
      break;
  }
  return ffi::Error(code, std::move(message));
}

// ---- the config key -------------------------------------------------------------------
struct ConfigDeleter {
  void operator()(psa_config* c) const { psa_config_destroy(c); }
};
using ConfigPtr = std::unique_ptr<psa_config, ConfigDeleter>;

// Applies one "name=value" override.
ffi::Error set_param(psa_config* cfg, std::string_view key, std::string_view pair) {
  size_t eq = pair.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return invalid("config key '" + std::string(key) + "': '" + std::string(pair) +
                   "' is not name=value");
  }
  std::string name(pair.substr(0, eq)), text(pair.substr(eq + 1));
  psa_param param;
  if (psa_status st = psa_param_from_name(name.c_str(), &param); st != PSA_OK) {
    return library_error("config", st);
  }
  const char* pname = nullptr;
  psa_param_type type;
  double lower = 0, upper = 0;
  if (psa_status st = psa_param_info(param, &pname, &type, &lower, &upper); st != PSA_OK) {
    return library_error("config", st);
  }
  auto bad_value = [&]() {
    return invalid("config key '" + std::string(key) + "': " + name + " = '" + text +
                   "' is not a value of that parameter");
  };
  if (text.empty()) return bad_value();
  if (type == PSA_PARAM_TYPE_INT) {
    int64_t value = 0;
    if (text == "true" || text == "false") {
      value = text == "true";
    } else if (psa_param_value_from_name(param, text.c_str(), &value) == PSA_OK) {
      // an enum word (the library's own list, any ASCII case)
    } else {
      char* end = nullptr;
      errno = 0;
      long long parsed = std::strtoll(text.c_str(), &end, 10);
      if (end != text.c_str() + text.size() || errno != 0) {
        // "2.0" for an int parameter: accept integral floats, as psa.Config does
        double d = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size() || d != static_cast<double>(
                                                         static_cast<long long>(d))) {
          return bad_value();
        }
        parsed = static_cast<long long>(d);
      }
      value = parsed;
    }
    if (psa_status st = psa_config_set_int(cfg, param, value); st != PSA_OK) {
      return library_error("config", st);
    }
  } else {
    double value = 0;
    if (text == "true" || text == "false") {
      value = text == "true";
    } else {
      char* end = nullptr;
      value = std::strtod(text.c_str(), &end);
      if (end != text.c_str() + text.size()) return bad_value();
    }
    if (psa_status st = psa_config_set_double(cfg, param, value); st != PSA_OK) {
      return library_error("config", st);
    }
  }
  return ffi::Error::Success();
}

// The config a key describes (the grammar of psa.torch.config_key()).
ffi::ErrorOr<ConfigPtr> config_from_key(std::string_view key) {
  if (key.empty()) return ffi::Unexpected(invalid("config: empty config key"));
  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    size_t end = key.find(';', start);
    fields.push_back(key.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  psa_config* raw = nullptr;
  std::string_view head = fields[0];
  if (head == "config") {
    if (psa_status st = psa_config_create(&raw); st != PSA_OK) {
      return ffi::Unexpected(library_error("config", st));
    }
  } else {
    std::string model, preset;
    for (size_t start = 0;;) {
      size_t end = head.find(',', start);
      std::string_view part =
          head.substr(start, end == std::string_view::npos ? end : end - start);
      if (part.substr(0, 6) == "model=" && part.size() > 6) {
        model = std::string(part.substr(6));
      } else if (part.substr(0, 7) == "preset=" && part.size() > 7) {
        preset = std::string(part.substr(7));
      } else {
        return ffi::Unexpected(invalid("config key '" + std::string(key) +
                                       "': expected 'config' or 'model=M[,preset=P]' before "
                                       "the first ';'"));
      }
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
    if (model.empty()) {
      return ffi::Unexpected(invalid("config key '" + std::string(key) + "': names no model"));
    }
    if (psa_status st = psa_config_load_embedded(model.c_str(),
                                                 preset.empty() ? nullptr : preset.c_str(),
                                                 &raw);
        st != PSA_OK) {
      return ffi::Unexpected(library_error("config", st));
    }
  }
  ConfigPtr cfg(raw);
  for (size_t i = 1; i < fields.size(); ++i) {
    if (ffi::Error err = set_param(cfg.get(), key, fields[i]); err.failure()) {
      return ffi::Unexpected(std::move(err));
    }
  }
  return cfg;
}

// ---- the context cache ----------------------------------------------------------------
struct Key {
  int backend;
  int device;
  std::string config;
  int64_t causal;
  double scale;
  int64_t grid[5];  // t, h, w, text_length, text_position
  int64_t layout;
  int dtype;
  int64_t q_shape[4];
  int64_t k_shape[4];

  bool operator==(const Key& o) const {
    return backend == o.backend && device == o.device && config == o.config &&
           causal == o.causal && std::memcmp(&scale, &o.scale, sizeof scale) == 0 &&
           std::equal(grid, grid + 5, o.grid) && layout == o.layout && dtype == o.dtype &&
           std::equal(q_shape, q_shape + 4, o.q_shape) &&
           std::equal(k_shape, k_shape + 4, o.k_shape);
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = std::hash<std::string>()(k.config);
    auto mix = [&h](uint64_t v) { h ^= std::hash<uint64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    uint64_t scale_bits;
    std::memcpy(&scale_bits, &k.scale, sizeof scale_bits);
    mix(static_cast<uint64_t>(k.backend));
    mix(static_cast<uint64_t>(k.device));
    mix(static_cast<uint64_t>(k.causal));
    mix(scale_bits);
    for (int64_t v : k.grid) mix(static_cast<uint64_t>(v));
    mix(static_cast<uint64_t>(k.layout));
    mix(static_cast<uint64_t>(k.dtype));
    for (int64_t v : k.q_shape) mix(static_cast<uint64_t>(v));
    for (int64_t v : k.k_shape) mix(static_cast<uint64_t>(v));
    return h;
  }
};

struct Entry {
  psa_context* context = nullptr;
  psa_backend backend = PSA_BACKEND_CPU;
  std::mutex lock;  // one forward at a time: set_step + forward, the host workspace
  uint64_t needed = 0;
  bool planned = false;
  int64_t warmup_steps = 0;
  std::vector<unsigned char> host_workspace;
  bool ran = false;

  ~Entry() {
    if (context == nullptr) return;
    if (backend == PSA_BACKEND_CUDA && ran) {
      // wait for the last forward's stream before the plan's device memory goes
      psa_stats stats{};
      stats.struct_size = sizeof(psa_stats);
      (void)psa_context_get_stats(context, &stats);
    }
    psa_context_destroy(context);
  }
};

class Cache {
 public:
  std::shared_ptr<Entry> find(const Key& key) {
    std::lock_guard<std::mutex> guard(lock_);
    auto it = map_.find(key);
    if (it == map_.end()) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    order_.splice(order_.begin(), order_, it->second.second);
    return it->second.first;
  }

  void info(int64_t* size, int64_t* hits, int64_t* misses) {
    std::lock_guard<std::mutex> guard(lock_);
    *size = static_cast<int64_t>(map_.size());
    *hits = hits_;
    *misses = misses_;
  }

  // Drops every context (each destroyed once its last forward is done: CUDA waits for it).
  void clear() {
    std::vector<std::shared_ptr<Entry>> dropped;
    {
      std::lock_guard<std::mutex> guard(lock_);
      for (auto& item : map_) dropped.push_back(std::move(item.second.first));
      map_.clear();
      order_.clear();
      hits_ = misses_ = 0;
    }
  }

  // Inserts `made` unless another thread inserted the key first; returns the cached one.
  std::shared_ptr<Entry> insert(const Key& key, std::shared_ptr<Entry> made) {
    std::vector<std::shared_ptr<Entry>> evicted;  // destroyed outside the lock
    std::shared_ptr<Entry> result;
    {
      std::lock_guard<std::mutex> guard(lock_);
      auto it = map_.find(key);
      if (it != map_.end()) {
        order_.splice(order_.begin(), order_, it->second.second);
        result = it->second.first;
        evicted.push_back(std::move(made));
      } else {
        order_.push_front(key);
        map_.emplace(key, std::make_pair(made, order_.begin()));
        result = std::move(made);
        while (map_.size() > kCacheCapacity) {
          auto last = map_.find(order_.back());
          evicted.push_back(std::move(last->second.first));
          map_.erase(last);
          order_.pop_back();
        }
      }
    }
    return result;
  }

 private:
  std::mutex lock_;
  int64_t hits_ = 0, misses_ = 0;
  std::list<Key> order_;  // most recently used first
  std::unordered_map<Key, std::pair<std::shared_ptr<Entry>, std::list<Key>::iterator>, KeyHash>
      map_;
};

Cache& cache() {
  static Cache* instance = new Cache();  // never destroyed: no CUDA calls at process exit
  return *instance;
}

// ---- the CUDA driver, for the fallback workspace ---------------------------------------
// A few entry points of libcuda.so.1 (the CUDA driver API) by their ABI names; CUresult is an
// int (0: CUDA_SUCCESS), CUstream/CUcontext opaque pointers, CUdeviceptr 64-bit.
struct Driver {
  using Result = int;
  Result (*stream_get_ctx)(void* stream, void** context) = nullptr;
  Result (*ctx_push)(void* context) = nullptr;
  Result (*ctx_pop)(void** context) = nullptr;
  Result (*mem_alloc_async)(unsigned long long* ptr, size_t bytes, void* stream) = nullptr;
  Result (*mem_free_async)(unsigned long long ptr, void* stream) = nullptr;
  Result (*error_name)(Result error, const char** name) = nullptr;
  std::string missing;  // why the driver cannot be used ("" when it can)

  std::string name(Result r) const {
    const char* text = nullptr;
    if (error_name == nullptr || error_name(r, &text) != 0 || text == nullptr) {
      return "CUresult " + std::to_string(r);
    }
    return text;
  }
};

const Driver& driver() {
  static const Driver* instance = [] {
    auto* d = new Driver();  // never unloaded
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      d->missing = std::string("dlopen(libcuda.so.1): ") + (why ? why : "failed");
      return d;
    }
    auto sym = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol));
      if (fn == nullptr && d->missing.empty()) {
        d->missing = std::string("libcuda.so.1 has no ") + symbol;
      }
    };
    sym(d->stream_get_ctx, "cuStreamGetCtx");
    sym(d->ctx_push, "cuCtxPushCurrent_v2");
    sym(d->ctx_pop, "cuCtxPopCurrent_v2");
    sym(d->mem_alloc_async, "cuMemAllocAsync");  // CUDA 11.2+
    sym(d->mem_free_async, "cuMemFreeAsync");
    sym(d->error_name, "cuGetErrorName");
    return d;
  }();
  return *instance;
}

// Makes the context of `stream` current on this thread for its lifetime (XLA runs handlers
// with the device's context current; this does not rely on it).
class StreamContext {
 public:
  StreamContext(const Driver& d, void* stream) : d_(d) {
    void* context = nullptr;
    status_ = d_.stream_get_ctx(stream, &context);
    if (status_ == 0) {
      status_ = d_.ctx_push(context);
      pushed_ = status_ == 0;
    }
  }
  ~StreamContext() {
    if (pushed_) {
      void* popped = nullptr;
      (void)d_.ctx_pop(&popped);
    }
  }
  Driver::Result status() const { return status_; }

 private:
  const Driver& d_;
  Driver::Result status_ = 0;
  bool pushed_ = false;
};

// A stream-ordered device allocation on `stream`, released (cuMemFreeAsync on that stream)
// when this goes: after the forwards that use it are enqueued, so the pool hands the memory
// to later work only once they are done on the stream.
class AsyncWorkspace {
 public:
  AsyncWorkspace() = default;
  AsyncWorkspace(const AsyncWorkspace&) = delete;
  AsyncWorkspace& operator=(const AsyncWorkspace&) = delete;
  ~AsyncWorkspace() {
    if (ptr_ == 0) return;
    const Driver& d = driver();
    StreamContext current(d, stream_);
    (void)d.mem_free_async(ptr_, stream_);
  }

  // "" on success, else why not.
  std::string allocate(void* stream, uint64_t bytes) {
    const Driver& d = driver();
    if (!d.missing.empty()) return d.missing;
    StreamContext current(d, stream);
    if (current.status() != 0) return "the stream's CUDA context: " + d.name(current.status());
    unsigned long long ptr = 0;
    if (Driver::Result r = d.mem_alloc_async(&ptr, static_cast<size_t>(bytes), stream); r != 0) {
      return "cuMemAllocAsync: " + d.name(r);
    }
    ptr_ = ptr;
    stream_ = stream;
    return "";
  }
  void* data() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_)); }

 private:
  unsigned long long ptr_ = 0;
  void* stream_ = nullptr;
};

constexpr uint64_t kWorkspaceAlignment = 256;  // what cuMemAllocAsync gives; asked of XLA too
constexpr uint64_t kScratchAlignment = 16;     // the most XLA_FFI_DeviceMemory_Allocate takes

// ---- buffers --------------------------------------------------------------------------
std::optional<psa_dtype> to_psa_dtype(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return PSA_DTYPE_F32;
    case ffi::DataType::F16: return PSA_DTYPE_F16;
    case ffi::DataType::BF16: return PSA_DTYPE_BF16;
    default: return std::nullopt;
  }
}

std::string dims_text(ffi::AnyBuffer::Dimensions dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + ")";
}

struct Attrs {
  std::string_view config;
  int64_t grid[5];
  int64_t layout, causal, step;
  double scale;
};

ffi::Error forward(psa_backend backend, void* stream, int32_t device,
                   ffi::ScratchAllocator* scratch, ffi::AnyBuffer q, ffi::AnyBuffer k,
                   ffi::AnyBuffer v, ffi::Result<ffi::AnyBuffer> out,
                   ffi::RemainingRets rest, const Attrs& a) {
  // -- check the buffers: a bad call is an error naming the input, never a crash
  const ffi::AnyBuffer* ins[3] = {&q, &k, &v};
  const char* names[3] = {"q", "k", "v"};
  auto qd = q.dimensions();
  size_t rank = qd.size();
  if (rank < 4) return invalid("q: expected a 4-D array, got shape " + dims_text(qd));
  std::optional<psa_dtype> dtype = to_psa_dtype(q.element_type());
  if (!dtype) return invalid("q: dtype must be float32, float16 or bfloat16");
  size_t lead = rank - 4;
  for (int i = 1; i < 3; ++i) {
    auto d = ins[i]->dimensions();
    if (d.size() != rank) {
      return invalid(std::string(names[i]) + ": rank " + std::to_string(d.size()) +
                     ", q has rank " + std::to_string(rank));
    }
    if (ins[i]->element_type() != q.element_type()) {
      return invalid(std::string(names[i]) + ": dtype differs from q's");
    }
  }
  // out: q's shape, except that a leading (vmapped) dim may be larger where q's is 1;
  // each input's leading dim equals out's or is 1 (shared by every index)
  if (out->element_type() != q.element_type() || out->dimensions().size() != rank) {
    return invalid("out: result type differs from q's");
  }
  auto od = out->dimensions();
  for (size_t j = lead; j < rank; ++j) {
    if (od[j] != qd[j]) {
      return invalid("out: result shape " + dims_text(od) + " does not fit q's " +
                     dims_text(qd));
    }
  }
  for (int i = 0; i < 3; ++i) {
    auto d = ins[i]->dimensions();
    for (size_t j = 0; j < lead; ++j) {
      if (d[j] != od[j] && d[j] != 1) {
        return invalid(std::string(names[i]) + ": leading (vmapped) dims " + dims_text(d) +
                       " do not match the result's " + dims_text(od));
      }
    }
  }
  if (a.layout != 0 && a.layout != 1) {
    return invalid("layout = " + std::to_string(a.layout) + ": expected 0 (bhld) or 1 (blhd)");
  }
  const bool layout_bhld = a.layout == 0;
  std::optional<ffi::Result<ffi::AnyBuffer>> lse;
  if (rest.size() > 1) return invalid("expected at most two results (out, lse)");
  if (rest.size() == 1) {
    auto got = rest.get<ffi::AnyBuffer>(0);
    if (got.has_error()) return got.error();
    lse = *got;
    auto ld = (*lse)->dimensions();
    bool ok = (*lse)->element_type() == ffi::DataType::F32 && ld.size() == rank - 1;
    for (size_t j = 0; ok && j < lead; ++j) ok = ld[j] == od[j];
    if (ok) {  // [B, H, L] in logical order, whatever the layout
      const int64_t* t = qd.begin() + lead;
      ok = ld[lead] == t[0] && ld[lead + 1] == (layout_bhld ? t[1] : t[2]) &&
           ld[lead + 2] == (layout_bhld ? t[2] : t[1]);
    }
    if (!ok) return invalid("lse: expected a float32 result of shape [..., B, H, L]");
  }
  if (a.causal != 0 && a.causal != 1) {
    return invalid("causal = " + std::to_string(a.causal) + ": expected 0 or 1");
  }
  if (a.step < -1) return invalid("step = " + std::to_string(a.step) + ": expected -1 or >= 0");
  if (!(a.scale >= 0)) return invalid("scale: expected >= 0 (0: 1/sqrt(head_dim))");
  for (int i = 0; i < 4; ++i) {
    if (a.grid[i] < 0) return invalid("grid/text_length: expected values >= 0");
  }
  bool has_grid = a.grid[0] > 0;
  if (has_grid != (a.grid[1] > 0) || has_grid != (a.grid[2] > 0)) {
    return invalid("grid: t, h and w must all be >= 1 (or all 0: no grid)");
  }
  if (a.grid[4] < PSA_TEXT_NONE || a.grid[4] > PSA_TEXT_LAST) {
    return invalid("text_position = " + std::to_string(a.grid[4]) + ": expected 0, 1 or 2");
  }

  // -- 4-D descriptors in [B, H, L, D] order
  psa_layout layout = a.layout == 0 ? PSA_LAYOUT_BNSD : PSA_LAYOUT_BSND;
  auto logical = [&](ffi::AnyBuffer::Dimensions d, int64_t out4[4]) {
    const int64_t* t = d.begin() + lead;
    if (a.layout == 0) {
      out4[0] = t[0], out4[1] = t[1], out4[2] = t[2], out4[3] = t[3];
    } else {
      out4[0] = t[0], out4[1] = t[2], out4[2] = t[1], out4[3] = t[3];
    }
  };
  int64_t qs[4], ks[4], vs[4];
  logical(qd, qs);
  logical(k.dimensions(), ks);
  logical(v.dimensions(), vs);
  psa_tensor_desc qdesc{}, kdesc{}, vdesc{};
  for (psa_tensor_desc* d : {&qdesc, &kdesc, &vdesc}) d->struct_size = sizeof(psa_tensor_desc);
  const int64_t* shapes[3] = {qs, ks, vs};
  psa_tensor_desc* descs[3] = {&qdesc, &kdesc, &vdesc};
  for (int i = 0; i < 3; ++i) {
    const int64_t* s = shapes[i];
    if (psa_status st = psa_tensor_desc_init(descs[i], layout, *dtype, s[0], s[1], s[2], s[3]);
        st != PSA_OK) {
      return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                        std::string("psa.jax.attention: ") + names[i] + ": " +
                            psa_status_name(st) + ": " + psa_last_error_message());
    }
  }
  psa_tensor_desc odesc = qdesc;

  // -- the cached context
  Key key;
  key.backend = backend;
  key.device = backend == PSA_BACKEND_CUDA ? device : -1;
  key.config = std::string(a.config);
  key.causal = a.causal;
  key.scale = a.scale;
  std::copy(a.grid, a.grid + 5, key.grid);
  key.layout = a.layout;
  key.dtype = *dtype;
  std::copy(qs, qs + 4, key.q_shape);
  std::copy(ks, ks + 4, key.k_shape);
  std::shared_ptr<Entry> entry = cache().find(key);
  if (!entry) {
    ffi::ErrorOr<ConfigPtr> made_cfg = config_from_key(a.config);
    if (made_cfg.has_error()) return made_cfg.error();
    psa_config* cfg = made_cfg->get();
    if (a.causal) {
      if (psa_status st = psa_config_set_int(cfg, PSA_PARAM_CAUSAL, 1); st != PSA_OK) {
        return library_error("config", st);
      }
    }
    if (a.scale > 0) {
      if (psa_status st = psa_config_set_double(cfg, PSA_PARAM_SCALE, a.scale); st != PSA_OK) {
        return library_error("config", st);
      }
    }
    if (!has_grid) {
      if (psa_status st = psa_config_set_int(cfg, PSA_PARAM_USE_REARRANGE, 0); st != PSA_OK) {
        return library_error("config", st);
      }
    }
    auto made = std::make_shared<Entry>();
    made->backend = backend;
    if (psa_status st = psa_config_get_int(cfg, PSA_PARAM_WARMUP_STEPS, &made->warmup_steps);
        st != PSA_OK) {
      return library_error("config", st);
    }
    if (psa_status st = psa_context_create(cfg, backend,
                                           backend == PSA_BACKEND_CUDA ? device : -1,
                                           &made->context);
        st != PSA_OK) {
      return library_error("context", st);
    }
    if (has_grid) {
      if (psa_status st = psa_context_set_video_grid(made->context, a.grid[0], a.grid[1],
                                                     a.grid[2], a.grid[3],
                                                     static_cast<psa_text_position>(a.grid[4]));
          st != PSA_OK) {
        return library_error("grid", st);
      }
    }
    entry = cache().insert(key, std::move(made));
  }

  // -- the forwards: one per leading (vmapped) index
  std::lock_guard<std::mutex> guard(entry->lock);
  if (!entry->planned) {
    if (psa_status st = psa_workspace_size(entry->context, &qdesc, &kdesc, &vdesc, &odesc,
                                           &entry->needed);
        st != PSA_OK) {
      return library_error("plan", st);
    }
    entry->planned = true;
  }
  void* workspace = nullptr;
  AsyncWorkspace fallback;  // released after the forwards below are enqueued
  if (entry->needed > 0) {
    if (backend == PSA_BACKEND_CUDA) {
      // XLA's scratch allocator first (16-byte alignment at most: align up to 256 here),
      // then stream-ordered cuMemAllocAsync on the call's stream
      uint64_t padded = entry->needed + kWorkspaceAlignment - kScratchAlignment;
      std::optional<void*> got = scratch->Allocate(padded, kScratchAlignment);
      if (got && *got != nullptr) {
        uintptr_t p = reinterpret_cast<uintptr_t>(*got);
        p = (p + kWorkspaceAlignment - 1) & ~static_cast<uintptr_t>(kWorkspaceAlignment - 1);
        workspace = reinterpret_cast<void*>(p);
      } else if (std::string why = fallback.allocate(stream, entry->needed); !why.empty()) {
        return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                          "psa.jax.attention: no device memory for " +
                              std::to_string(entry->needed) +
                              " bytes of workspace: XLA's FFI scratch allocator refused them "
                              "and the stream-ordered fallback failed (" + why + ")");
      } else {
        workspace = fallback.data();
      }
    } else {
      if (entry->host_workspace.size() < entry->needed) {
        entry->host_workspace.resize(entry->needed);
      }
      workspace = entry->host_workspace.data();
    }
  }
  int64_t count = 1;
  for (size_t j = 0; j < lead; ++j) count *= od[j];
  size_t esize = static_cast<size_t>(psa_dtype_size(*dtype));
  size_t q_slice = static_cast<size_t>(qs[0] * qs[1] * qs[2] * qs[3]) * esize;
  size_t kv_slice = static_cast<size_t>(ks[0] * ks[1] * ks[2] * ks[3]) * esize;
  size_t lse_slice = static_cast<size_t>(qs[0] * qs[1] * qs[2]) * sizeof(float);
  for (int64_t index = 0; index < count; ++index) {
    // slice offsets: out's leading index unravelled, an input dim of 1 broadcasts
    size_t offs[3] = {0, 0, 0};
    for (int i = 0; i < 3; ++i) {
      auto d = ins[i]->dimensions();
      int64_t rem = index, flat = 0, stride = 1;
      for (size_t j = lead; j-- > 0;) {
        int64_t idx = rem % od[j];
        rem /= od[j];
        if (d[j] != 1) flat += idx * stride;
        stride *= d[j];
      }
      offs[i] = static_cast<size_t>(flat) * (i == 0 ? q_slice : kv_slice);
    }
    const char* qp = static_cast<const char*>(q.untyped_data()) + offs[0];
    const char* kp = static_cast<const char*>(k.untyped_data()) + offs[1];
    const char* vp = static_cast<const char*>(v.untyped_data()) + offs[2];
    char* op = static_cast<char*>(out->untyped_data()) + static_cast<size_t>(index) * q_slice;
    float* lp = lse ? reinterpret_cast<float*>(static_cast<char*>((*lse)->untyped_data()) +
                                               static_cast<size_t>(index) * lse_slice)
                    : nullptr;
    int64_t step = a.step >= 0 ? a.step : entry->warmup_steps;
    if (psa_status st = psa_context_set_step(entry->context, step); st != PSA_OK) {
      return library_error("step", st);
    }
    psa_status st = psa_attention_forward(entry->context, &qdesc, qp, &kdesc, kp, &vdesc, vp,
                                          &odesc, op, lp, workspace, entry->needed, stream);
    if (st != PSA_OK) return library_error("forward", st);
    entry->ran = true;
  }
  return ffi::Error::Success();
}

Attrs make_attrs(std::string_view config, int64_t grid_t, int64_t grid_h, int64_t grid_w,
                 int64_t text_length, int64_t text_position, int64_t layout, int64_t causal,
                 double scale, int64_t step) {
  Attrs a;
  a.config = config;
  a.grid[0] = grid_t, a.grid[1] = grid_h, a.grid[2] = grid_w;
  a.grid[3] = text_length, a.grid[4] = text_position;
  a.layout = layout, a.causal = causal, a.scale = scale, a.step = step;
  return a;
}

ffi::Error host_impl(ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                     ffi::Result<ffi::AnyBuffer> out, ffi::RemainingRets rest,
                     std::string_view config, int64_t grid_t, int64_t grid_h, int64_t grid_w,
                     int64_t text_length, int64_t text_position, int64_t layout,
                     int64_t causal, double scale, int64_t step) {
  return forward(PSA_BACKEND_CPU, nullptr, -1, nullptr, q, k, v, out, rest,
                 make_attrs(config, grid_t, grid_h, grid_w, text_length, text_position, layout,
                            causal, scale, step));
}

ffi::Error cuda_impl(void* stream, int32_t device, ffi::ScratchAllocator scratch,
                     ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                     ffi::Result<ffi::AnyBuffer> out, ffi::RemainingRets rest,
                     std::string_view config, int64_t grid_t, int64_t grid_h, int64_t grid_w,
                     int64_t text_length, int64_t text_position, int64_t layout,
                     int64_t causal, double scale, int64_t step) {
  return forward(PSA_BACKEND_CUDA, stream, device, &scratch, q, k, v, out, rest,
                 make_attrs(config, grid_t, grid_h, grid_w, text_length, text_position, layout,
                            causal, scale, step));
}

}  // namespace

#define PSA_JAX_ATTRS(binding)                                                         \
  binding.Arg<ffi::AnyBuffer>()                                                        \
      .Arg<ffi::AnyBuffer>()                                                           \
      .Arg<ffi::AnyBuffer>()                                                           \
      .Ret<ffi::AnyBuffer>()                                                           \
      .RemainingRets()                                                                 \
      .Attr<std::string_view>("config")                                                \
      .Attr<int64_t>("grid_t")                                                         \
      .Attr<int64_t>("grid_h")                                                         \
      .Attr<int64_t>("grid_w")                                                         \
      .Attr<int64_t>("text_length")                                                    \
      .Attr<int64_t>("text_position")                                                  \
      .Attr<int64_t>("layout")                                                         \
      .Attr<int64_t>("causal")                                                         \
      .Attr<double>("scale")                                                           \
      .Attr<int64_t>("step")

#define PSA_JAX_EXPORT extern "C" __attribute__((visibility("default")))

// The handler symbols psa/jax.py hands to jax.ffi.register_ffi_target (via ctypes).
XLA_FFI_DEFINE_HANDLER(psa_jax_host_handler, host_impl,
                       PSA_JAX_ATTRS(ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER(psa_jax_cuda_handler, cuda_impl,
                       PSA_JAX_ATTRS(ffi::Ffi::Bind()
                                         .Ctx<ffi::PlatformStream<void*>>()
                                         .Ctx<ffi::DeviceOrdinal>()
                                         .Ctx<ffi::ScratchAllocator>()));

PSA_JAX_EXPORT XLA_FFI_Error* PsaJaxAttentionHost(XLA_FFI_CallFrame* call_frame) {
  return psa_jax_host_handler(call_frame);
}

PSA_JAX_EXPORT XLA_FFI_Error* PsaJaxAttentionCuda(XLA_FFI_CallFrame* call_frame) {
  return psa_jax_cuda_handler(call_frame);
}

// The context cache: psa.jax.cache_info() / psa.jax.clear_cache().
PSA_JAX_EXPORT void PsaJaxCacheInfo(int64_t* size, int64_t* hits, int64_t* misses) {
  cache().info(size, hits, misses);
}

PSA_JAX_EXPORT void PsaJaxClearCache(void) { cache().clear(); }

// The version of psa.h this library was built from (checked by psa/jax.py on load).
PSA_JAX_EXPORT unsigned PsaJaxHeaderVersion(void) { return PSA_VERSION_NUMBER; }
