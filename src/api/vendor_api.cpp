// api/vendor_api.cpp -- extern "C" psa_sparse_attention: the vendor-shaped one-shot call,
// written only in terms of the public context API (config -> context -> workspace ->
// forward). Argument checks, backend choice and the CUDA context cache here; no tensor math.
// CPU: a fresh context and a malloc'd workspace per call, nothing retained. CUDA: one cached
// context per argument set (planned once), the workspace from cudaMallocAsync/cudaFreeAsync
// on the caller's stream; CUDA runtime calls go through backend/cuda/cuda_vendor_runtime.h.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/guard.h"
#include "api/vendor_cache.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_vendor_runtime.h"
#include "psa.h"

namespace {

struct ConfigFree {
  void operator()(psa_config* c) const { psa_config_destroy(c); }
};
struct ContextFree {
  void operator()(psa_context* c) const { psa_context_destroy(c); }
};
struct HostFree {
  void operator()(void* p) const { std::free(p); }
};

const char* method_name(psa_method m) {
  switch (m) {
    case PSA_METHOD_PSA: return "PSA_METHOD_PSA";
    case PSA_METHOD_DENSE: return "PSA_METHOD_DENSE";
    case PSA_METHOD_RF_V2: return "PSA_METHOD_RF_V2";
    case PSA_METHOD_ADA_BSA: return "PSA_METHOD_ADA_BSA";
    case PSA_METHOD_PSA_CAUSAL: return "PSA_METHOD_PSA_CAUSAL";
  }
  return "unknown";
}

// The vendor defaults expressed as a config: 128 x 128 blocks, no warm-up, no rearrange
// flag (rf_v2 fixes its own token order). Each set call names the parameter on failure.
psa_status make_config(psa_method method, double sparsity, int32_t keep_sink,
                       int32_t keep_recent, double cdf_threshold, double scale, int32_t causal,
                       psa_config** out) {
  psa_config* raw = nullptr;
  PSA_TRY(psa_config_create(&raw));
  std::unique_ptr<psa_config, ConfigFree> cfg(raw);
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_METHOD, method));
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_BLOCK_M, 128));
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_BLOCK_N, 128));
  PSA_TRY(psa_config_set_double(raw, PSA_PARAM_SPARSITY, sparsity));
  PSA_TRY(psa_config_set_double(raw, PSA_PARAM_CDF_THRESHOLD, cdf_threshold));
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_KEEP_SINK, keep_sink));
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_KEEP_RECENT, keep_recent));
  PSA_TRY(psa_config_set_double(raw, PSA_PARAM_SCALE, scale));
  PSA_TRY(psa_config_set_int(raw, PSA_PARAM_CAUSAL, causal));
  *out = cfg.release();
  return PSA_OK;
}

// Every argument of one call except the data pointers and the stream.
struct CallArgs {
  psa_dtype dtype;
  int64_t batch, heads, seq_len, head_dim;
  psa_layout layout;
  psa_method method;
  double sparsity;
  int64_t txt_len;
  const int64_t* latent;  // {t, h, w} or NULL
  int32_t keep_sink, keep_recent;
  double cdf_threshold, scale;
  int32_t causal;
};

// A context of the vendor defaults for `a` on `backend`, with the video grid of rf_v2 set.
psa_status make_context(const CallArgs& a, psa_backend backend, int32_t device,
                        std::unique_ptr<psa_context, ContextFree>* out) {
  psa_config* cfg_raw = nullptr;
  PSA_TRY(make_config(a.method, a.sparsity, a.keep_sink, a.keep_recent, a.cdf_threshold, a.scale,
                      a.causal, &cfg_raw));
  std::unique_ptr<psa_config, ConfigFree> cfg(cfg_raw);
  psa_context* ctx_raw = nullptr;
  PSA_TRY(psa_context_create(cfg.get(), backend, device, &ctx_raw));
  std::unique_ptr<psa_context, ContextFree> ctx(ctx_raw);
  if (a.latent != nullptr && a.method == PSA_METHOD_RF_V2)
    PSA_TRY(psa_context_set_video_grid(ctx.get(), a.latent[0], a.latent[1], a.latent[2],
                                       a.txt_len, a.txt_len > 0 ? PSA_TEXT_FIRST : PSA_TEXT_NONE));
  *out = std::move(ctx);
  return PSA_OK;
}

// ---- CPU: a fresh context per call, workspace from malloc --------------------------------

psa_status run_cpu(const CallArgs& a, const psa_tensor_desc& desc, const void* q, const void* k,
                   const void* v, void* out, void* stream) {
  std::unique_ptr<psa_context, ContextFree> ctx;
  PSA_TRY(make_context(a, PSA_BACKEND_CPU, -1, &ctx));
  uint64_t bytes = 0;
  PSA_TRY(psa_workspace_size(ctx.get(), &desc, &desc, &desc, &desc, &bytes));
  std::unique_ptr<void, HostFree> ws;
  if (bytes > 0) {
    PSA_RETURN_IF(bytes > static_cast<uint64_t>(SIZE_MAX), PSA_ERR_OUT_OF_MEMORY,
                  "workspace: %llu bytes do not fit in size_t",
                  static_cast<unsigned long long>(bytes));
    ws.reset(std::malloc(static_cast<size_t>(bytes)));
    PSA_RETURN_IF(!ws, PSA_ERR_OUT_OF_MEMORY, "workspace: malloc of %llu bytes failed",
                  static_cast<unsigned long long>(bytes));
  }
  return psa_attention_forward(ctx.get(), &desc, q, &desc, k, &desc, v, &desc, out, nullptr,
                               ws.get(), bytes, stream);
}

// ---- CUDA: the process-wide context cache -----------------------------------------------

uint64_t double_bits(double x) {
  uint64_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// Cache key: everything that shapes the plan or the result (doubles compared bit for bit).
struct Key {
  int32_t device = 0;
  int32_t dtype = 0, method = 0, layout = 0;
  int64_t batch = 0, heads = 0, seq_len = 0, head_dim = 0, txt_len = 0;
  int64_t latent[3] = {0, 0, 0};  // {0, 0, 0}: none given
  int32_t keep_sink = 0, keep_recent = 0, causal = 0;
  uint64_t sparsity = 0, cdf_threshold = 0, scale = 0;

  Key(int32_t dev, const CallArgs& a)
      : device(dev), dtype(a.dtype), method(a.method), layout(a.layout), batch(a.batch),
        heads(a.heads), seq_len(a.seq_len), head_dim(a.head_dim), txt_len(a.txt_len),
        keep_sink(a.keep_sink), keep_recent(a.keep_recent), causal(a.causal),
        sparsity(double_bits(a.sparsity)), cdf_threshold(double_bits(a.cdf_threshold)),
        scale(double_bits(a.scale)) {
    if (a.latent != nullptr)
      for (int i = 0; i < 3; ++i) latent[i] = a.latent[i];
  }
  bool operator==(const Key& o) const {
    return device == o.device && dtype == o.dtype && method == o.method && layout == o.layout &&
           batch == o.batch && heads == o.heads && seq_len == o.seq_len &&
           head_dim == o.head_dim && txt_len == o.txt_len && latent[0] == o.latent[0] &&
           latent[1] == o.latent[1] && latent[2] == o.latent[2] && keep_sink == o.keep_sink &&
           keep_recent == o.keep_recent && causal == o.causal && sparsity == o.sparsity &&
           cdf_threshold == o.cdf_threshold && scale == o.scale;
  }
};

// One planned CUDA context. `mu` serialises the calls that enqueue work with it (a context is
// single-threaded); `fence` marks the end of its last uncaptured call, so that destroying it
// (eviction, clear) first waits for those kernels. `captured`: a call was captured into a
// graph, which keeps pointers into the plan: never evicted (only cleared).
struct Entry {
  explicit Entry(const Key& k) : key(k) {}
  ~Entry() { (void)fence.wait(); }  // then the context (declared first) is destroyed
  Key key;
  std::unique_ptr<psa_context, ContextFree> ctx;
  uint64_t workspace_bytes = 0;
  std::mutex mu;
  psa::CudaVendorFence fence;
  bool captured = false;  // guarded by the cache mutex
};

class Cache {
 public:
  // The entry of `key`, made most recently used; NULL when not cached.
  std::shared_ptr<Entry> find(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (!(entries_[i]->key == key)) continue;
      std::shared_ptr<Entry> e = entries_[i];
      entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
      entries_.push_back(e);
      ++counters_.hits;
      return e;
    }
    return nullptr;
  }

  // Inserts a freshly planned entry (or adopts the one another thread inserted for the same
  // key meanwhile) and evicts idle entries beyond the bound, least recently used first.
  // Evicted entries are destroyed after the lock is released (their destructor may wait).
  std::shared_ptr<Entry> insert(std::shared_ptr<Entry> fresh) {
    std::vector<std::shared_ptr<Entry>> victims;  // destroyed after `lock` is released
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.misses;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (!(entries_[i]->key == fresh->key)) continue;
      std::shared_ptr<Entry> e = entries_[i];
      entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
      entries_.push_back(e);
      victims.push_back(std::move(fresh));  // never used on a stream: nothing to wait for
      return e;
    }
    entries_.push_back(fresh);
    // use_count() == 1: only the cache holds it, and references are taken under mu_ only.
    for (size_t i = 0; entries_.size() > psa::kVendorCacheCapacity && i < entries_.size();) {
      if (!entries_[i]->captured && entries_[i].use_count() == 1) {
        victims.push_back(std::move(entries_[i]));
        entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
        ++counters_.evictions;
      } else {
        ++i;
      }
    }
    return fresh;
  }

  void mark_captured(Entry* e) {
    std::lock_guard<std::mutex> lock(mu_);
    e->captured = true;
  }

  // Removes every entry; each is destroyed once no call uses it any more (here, or when
  // the call that holds it returns). Returns the first failure of waiting for their work.
  psa_status clear() {
    std::vector<std::shared_ptr<Entry>> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all.swap(entries_);
    }
    psa_status first = PSA_OK;
    for (std::shared_ptr<Entry>& e : all) {
      if (e.use_count() == 1) {
        const psa_status s = e->fence.wait();
        if (first == PSA_OK) first = s;
      }
      e.reset();
    }
    return first;
  }

  psa::VendorCacheCounters counters() {
    std::lock_guard<std::mutex> lock(mu_);
    psa::VendorCacheCounters c = counters_;
    c.entries = entries_.size();
    return c;
  }

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<Entry>> entries_;  // most recently used last
  psa::VendorCacheCounters counters_;
};

// Never destroyed: static destructors run after the CUDA runtime may have shut down, so
// the cached contexts are left to the process exit (psa_sparse_attention_clear_cache frees
// them earlier).
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

// Plans a new entry: context on `device`, video grid, workspace size (this uploads the
// permutations: cudaMalloc + cudaMemcpy), completion event.
psa_status make_entry(const Key& key, const CallArgs& a, const psa_tensor_desc& desc,
                      std::shared_ptr<Entry>* out) {
  auto e = std::make_shared<Entry>(key);
  PSA_TRY(make_context(a, PSA_BACKEND_CUDA, key.device, &e->ctx));
  PSA_TRY(psa_workspace_size(e->ctx.get(), &desc, &desc, &desc, &desc, &e->workspace_bytes));
  PSA_TRY(e->fence.create(key.device));
  *out = std::move(e);
  return PSA_OK;
}

psa_status run_cuda(const CallArgs& a, int device, const psa_tensor_desc& desc, const void* q,
                    const void* k, const void* v, void* out, void* stream) {
  const Key key(device, a);
  const bool capturing = psa::cuda_vendor_stream_capturing(stream);
  std::shared_ptr<Entry> e = cache().find(key);
  if (!e) {
    PSA_RETURN_IF(capturing, PSA_ERR_INVALID_STATE,
                  "stream: is being captured into a CUDA graph, and this argument set (shape, "
                  "dtype, layout, method, parameters, latent shape, txt_len, device) was never "
                  "run: its first call plans it with cudaMalloc + cudaMemcpy, which capture "
                  "does not allow; make one call with these arguments outside capture first");
    std::shared_ptr<Entry> fresh;
    PSA_TRY(make_entry(key, a, desc, &fresh));
    e = cache().insert(std::move(fresh));
  }
  if (capturing) cache().mark_captured(e.get());

  std::lock_guard<std::mutex> lock(e->mu);
  void* ws = nullptr;
  PSA_TRY(psa::cuda_vendor_stream_alloc(device, e->workspace_bytes, stream, &ws));
  const psa_status st = psa_attention_forward(e->ctx.get(), &desc, q, &desc, k, &desc, v, &desc,
                                              out, nullptr, ws, e->workspace_bytes, stream);
  if (st != PSA_OK) {
    const std::string msg = psa_last_error_message();
    (void)psa::cuda_vendor_stream_free(device, ws, stream);
    return psa::set_error(st, "%s", msg.c_str());
  }
  PSA_TRY(psa::cuda_vendor_stream_free(device, ws, stream));
  if (!capturing) PSA_TRY(e->fence.record(stream));
  return PSA_OK;
}

// ---- backend choice and memory spaces -----------------------------------------------------

const char* backend_name(psa_backend b) {
  return b == PSA_BACKEND_CPU ? "PSA_BACKEND_CPU" : b == PSA_BACKEND_CUDA ? "PSA_BACKEND_CUDA" : "PSA_BACKEND_AUTO";
}

// Checks that q, k, v and out are all readable by `chosen` (CPU: host or managed memory;
// CUDA: device or managed memory, all on q's device) and returns q's device for CUDA.
psa_status check_memory_spaces(psa_backend requested, psa_backend chosen,
                               const void* const ptrs[4], int* device) {
  static const char* const names[4] = {"q", "k", "v", "out"};
  const char* how = requested == PSA_BACKEND_AUTO ? " (PSA_BACKEND_AUTO follows q)" : "";
  if (chosen == PSA_BACKEND_CPU) {
    for (int i = 0; i < 4; ++i) {
      if (psa::memory_space_of(ptrs[i]) != psa::MemorySpace::kDevice) continue;
      PSA_RETURN_IF(i == 0, PSA_ERR_WRONG_MEMORY_SPACE,
                    "q: %p is device memory; backend = %s runs on the host and needs host "
                    "pointers (pass PSA_BACKEND_CUDA or PSA_BACKEND_AUTO for device tensors)",
                    ptrs[0], backend_name(requested));
      return psa::set_error(PSA_ERR_WRONG_MEMORY_SPACE,
                            "%s: %p is device memory but q is host memory; q, k, v and out must "
                            "all be host memory for the CPU backend%s",
                            names[i], ptrs[i], how);
    }
    *device = -1;
    return PSA_OK;
  }
  const int q_dev = psa::cuda_vendor_pointer_device(ptrs[0]);
  PSA_RETURN_IF(q_dev < 0, PSA_ERR_WRONG_MEMORY_SPACE,
                "q: %p is host memory; backend = %s needs device pointers (pass "
                "PSA_BACKEND_CPU or PSA_BACKEND_AUTO for host tensors)",
                ptrs[0], backend_name(requested));
  for (int i = 1; i < 4; ++i) {
    const int dev = psa::cuda_vendor_pointer_device(ptrs[i]);
    PSA_RETURN_IF(dev < 0, PSA_ERR_WRONG_MEMORY_SPACE,
                  "%s: %p is host memory but q is device memory; q, k, v and out must all be "
                  "device memory for the CUDA backend%s",
                  names[i], ptrs[i], how);
    PSA_RETURN_IF(dev != q_dev, PSA_ERR_WRONG_MEMORY_SPACE,
                  "%s: %p lives on device %d but q lives on device %d; q, k, v and out must be "
                  "on one device",
                  names[i], ptrs[i], dev, q_dev);
  }
  *device = q_dev;
  return PSA_OK;
}

}  // namespace

namespace psa {
VendorCacheCounters vendor_cache_counters() { return cache().counters(); }
}  // namespace psa

extern "C" PSA_API psa_status psa_sparse_attention(
    const void* q, const void* k, const void* v, void* out, psa_dtype dtype, int64_t batch,
    int64_t heads, int64_t seq_len, int64_t head_dim, psa_layout layout, psa_method method,
    double sparsity, int64_t txt_len, const int64_t* latent_shape_q, int32_t keep_sink,
    int32_t keep_recent, double cdf_threshold, double scale, int32_t causal,
    psa_backend backend, void* stream) {
  PSA_API_BEGIN
  PSA_RETURN_IF(q == nullptr, PSA_ERR_NULL_POINTER, "q: must not be NULL");
  PSA_RETURN_IF(k == nullptr, PSA_ERR_NULL_POINTER, "k: must not be NULL");
  PSA_RETURN_IF(v == nullptr, PSA_ERR_NULL_POINTER, "v: must not be NULL");
  PSA_RETURN_IF(out == nullptr, PSA_ERR_NULL_POINTER, "out: must not be NULL");
  PSA_RETURN_IF(method != PSA_METHOD_RF_V2 && method != PSA_METHOD_ADA_BSA &&
                    method != PSA_METHOD_DENSE,
                method == PSA_METHOD_PSA ? PSA_ERR_UNSUPPORTED : PSA_ERR_INVALID_ARGUMENT,
                "method = %d (%s): psa_sparse_attention runs PSA_METHOD_RF_V2 (%d), "
                "PSA_METHOD_ADA_BSA (%d) or PSA_METHOD_DENSE (%d); for PSA load a preset and "
                "use the context API",
                static_cast<int>(method), method_name(method), PSA_METHOD_RF_V2,
                PSA_METHOD_ADA_BSA, PSA_METHOD_DENSE);
  PSA_RETURN_IF(backend != PSA_BACKEND_CPU && backend != PSA_BACKEND_AUTO &&
                    backend != PSA_BACKEND_CUDA,
                PSA_ERR_INVALID_ARGUMENT,
                "backend = %d; allowed: PSA_BACKEND_AUTO (0), PSA_BACKEND_CPU (1), "
                "PSA_BACKEND_CUDA (2)",
                static_cast<int>(backend));

  psa_tensor_desc desc{};
  desc.struct_size = sizeof desc;
  PSA_TRY(psa_tensor_desc_init(&desc, layout, dtype, batch, heads, seq_len, head_dim));
  PSA_RETURN_IF(txt_len < 0 || txt_len > seq_len, PSA_ERR_INVALID_ARGUMENT,
                "txt_len = %lld: must be in [0, seq_len = %lld]", static_cast<long long>(txt_len),
                static_cast<long long>(seq_len));
  PSA_RETURN_IF(method == PSA_METHOD_RF_V2 && latent_shape_q == nullptr, PSA_ERR_NULL_POINTER,
                "latent_shape_q: must not be NULL for PSA_METHOD_RF_V2; pass {t, h, w} with "
                "t*h*w = seq_len - txt_len = %lld (t = 1 for an image)",
                static_cast<long long>(seq_len - txt_len));
  if (latent_shape_q != nullptr) {
    const int64_t t = latent_shape_q[0], h = latent_shape_q[1], w = latent_shape_q[2];
    PSA_RETURN_IF(t < 1 || h < 1 || w < 1, PSA_ERR_INVALID_SHAPE,
                  "latent_shape_q = {%lld, %lld, %lld}: each of t, h, w must be >= 1",
                  static_cast<long long>(t), static_cast<long long>(h), static_cast<long long>(w));
    PSA_RETURN_IF(t > (seq_len - txt_len) / h / w || t * h * w != seq_len - txt_len,
                  PSA_ERR_INVALID_SHAPE,
                  "latent_shape_q = {%lld, %lld, %lld} with txt_len = %lld: t*h*w + txt_len "
                  "must equal seq_len = %lld",
                  static_cast<long long>(t), static_cast<long long>(h), static_cast<long long>(w),
                  static_cast<long long>(txt_len), static_cast<long long>(seq_len));
  }

  // Backend: CUDA only when built in with a device; AUTO follows where q lives.
  psa_backend chosen = backend;
  if (backend == PSA_BACKEND_CUDA) {
    PSA_TRY(psa::cuda_vendor_check_available("backend = PSA_BACKEND_CUDA"));
  } else if (backend == PSA_BACKEND_AUTO) {
    chosen = psa::memory_space_of(q) == psa::MemorySpace::kHost ? PSA_BACKEND_CPU : PSA_BACKEND_CUDA;
  }
  const void* const ptrs[4] = {q, k, v, out};
  int device = -1;
  PSA_TRY(check_memory_spaces(backend, chosen, ptrs, &device));

  const CallArgs args{dtype,    batch,   heads,    seq_len,        head_dim,
                      layout,   method,  sparsity, txt_len,        latent_shape_q,
                      keep_sink, keep_recent, cdf_threshold, scale, causal};
  if (chosen == PSA_BACKEND_CPU) return run_cpu(args, desc, q, k, v, out, stream);
  return run_cuda(args, device, desc, q, k, v, out, stream);
  PSA_API_END
}

extern "C" PSA_API psa_status psa_sparse_attention_clear_cache(void) {
  PSA_API_BEGIN
  return cache().clear();
  PSA_API_END
}
