// tests/cuda/vendor_cuda_test.cpp -- the one-call psa_sparse_attention on device pointers:
// equal to the same call on the CPU backend (fp32 copies of the same 16-bit inputs: ref32)
// within rel-L2(gpu, ref32) <= 4 * rel-L2(round16(ref32), ref32) + 1e-4 (bf16 and f16, BNSD
// and BSND, rf_v2 with a latent grid and text, ada_bsa with sink/recent and causal, dense); a
// second call with the same key is a cache hit (the internal counters: no planning, so no
// cudaMalloc) with the same bits; a captured second call replays the same bits; memory-space
// errors name the argument; threads share a key; eviction respects the bound; clearing
// re-plans.
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "api/vendor_cache.h"
#include "cuda_test_util.h"
#include "psa.h"

namespace psa {
namespace {

using test::DevBuf;

struct VendorCase {
  const char* name;
  psa_method method;
  psa_dtype dt;
  psa_layout layout;
  psa_backend backend;  // PSA_BACKEND_CUDA or PSA_BACKEND_AUTO (device pointers either way)
  int64_t B, H, d;
  int64_t t, h, w, txt;  // latent grid (t = 0: none, the length is `len`), text first
  int64_t len;
  double sparsity, cdf;
  int32_t keep_sink, keep_recent, causal;
  int64_t L() const { return t > 0 ? t * h * w + txt : len; }
  size_t count() const { return static_cast<size_t>(B * H * L() * d); }
};

using test::pack;
using test::unpack;

// Exact 16-bit values in logical order: video-like q/k, random v.
struct Inputs {
  std::vector<float> q, k, v;
};
Inputs make_inputs(const VendorCase& c, uint32_t seed) {
  Inputs in;
  in.q = test::make_video_like(c.B * c.H, c.L(), c.d, c.dt, seed).f;
  in.k = test::make_video_like(c.B * c.H, c.L(), c.d, c.dt, seed + 1).f;
  in.v = test::make_random(c.count(), c.dt, seed + 2).f;
  return in;
}

psa_status call(const VendorCase& c, psa_dtype dt, psa_backend backend, const void* q, const void* k,
                const void* v, void* out, void* stream) {
  const int64_t latent[3] = {c.t, c.h, c.w};
  return psa_sparse_attention(q, k, v, out, dt, c.B, c.H, c.L(), c.d, c.layout, c.method, c.sparsity,
                              c.t > 0 ? c.txt : 0, c.t > 0 ? latent : nullptr, c.keep_sink, c.keep_recent,
                              c.cdf, 0.0, c.causal, backend, stream);
}

// The CPU backend on fp32 copies of the inputs (ref32), logical order.
std::vector<float> run_cpu32(const VendorCase& c, const Inputs& in) {
  psa_tensor_desc desc;
  EXPECT_EQ(PSA_OK, psa_tensor_desc_init(&desc, c.layout, PSA_DTYPE_F32, c.B, c.H, c.L(), c.d));
  auto id = [](float x) { return x; };
  const std::vector<float> q = pack<float>(in.q, desc, id), k = pack<float>(in.k, desc, id),
                           v = pack<float>(in.v, desc, id);
  std::vector<float> out(q.size(), 0.0f);
  const psa_status st = call(c, PSA_DTYPE_F32, PSA_BACKEND_CPU, q.data(), k.data(), v.data(), out.data(), nullptr);
  EXPECT_EQ(PSA_OK, st) << c.name << " (cpu): " << psa_last_error_message();
  if (st != PSA_OK) return {};
  return unpack(out, desc, id);
}

// Device copies of one case's inputs plus an output buffer, in the case's layout and dtype.
struct DeviceTensors {
  psa_tensor_desc desc{};
  DevBuf<uint16_t> q, k, v, out;
  DeviceTensors(const VendorCase& c, const Inputs& in) {
    psa_tensor_desc_init(&desc, c.layout, c.dt, c.B, c.H, c.L(), c.d);
    const psa_dtype dt = c.dt;
    auto to16 = [dt](float x) { return test::to16(x, dt); };
    q.alloc(c.count());
    k.alloc(c.count());
    v.alloc(c.count());
    out.alloc(c.count());
    q.upload(pack<uint16_t>(in.q, desc, to16));
    k.upload(pack<uint16_t>(in.k, desc, to16));
    v.upload(pack<uint16_t>(in.v, desc, to16));
    out.fill_bytes(0xff);
  }
  psa_status run(const VendorCase& c, void* stream) {
    return call(c, c.dt, c.backend, q.get(), k.get(), v.get(), out.get(), stream);
  }
  std::vector<float> result(psa_dtype dt) const {
    return unpack(out.download(), desc, [dt](uint16_t x) { return test::from16(x, dt); });
  }
};

double storage_baseline(const std::vector<float>& ref32, psa_dtype dt) {
  std::vector<float> r(ref32.size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = test::round16(ref32[i], dt);
  return test::rel_l2(r, ref32);
}

const psa_dtype kBf = PSA_DTYPE_BF16, kHf = PSA_DTYPE_F16;
const psa_layout kBnsd = PSA_LAYOUT_BNSD, kBsnd = PSA_LAYOUT_BSND;
const psa_backend kCuda = PSA_BACKEND_CUDA, kAuto = PSA_BACKEND_AUTO;

const VendorCase kCases[] = {
    {"rf_v2 bf16 BNSD 4x10x13 + text 77", PSA_METHOD_RF_V2, kBf, kBnsd, kCuda, 1, 2, 64, 4, 10, 13, 77, 0, 0.7, 1.0, 1, 1, 0},
    {"rf_v2 f16 BSND B2 d128 3x16x24 + text 40", PSA_METHOD_RF_V2, kHf, kBsnd, kAuto, 2, 2, 128, 3, 16, 24, 40, 0, 0.5, 1.0, 1, 1, 0},
    {"rf_v2 bf16 BSND image 1x32x32 + text 100", PSA_METHOD_RF_V2, kBf, kBsnd, kCuda, 1, 2, 64, 1, 32, 32, 100, 0, 0.6, 1.0, 1, 1, 0},
    {"ada_bsa bf16 BSND causal sink+recent cdf 0.8", PSA_METHOD_ADA_BSA, kBf, kBsnd, kCuda, 1, 2, 64, 0, 0, 0, 0, 1500, 0.5, 0.8, 1, 1, 1},
    {"ada_bsa f16 BNSD sink+recent cdf 0.9 L1001", PSA_METHOD_ADA_BSA, kHf, kBnsd, kAuto, 1, 2, 128, 0, 0, 0, 0, 1001, 0.5, 0.9, 1, 1, 0},
    {"ada_bsa f16 BSND causal no sink cap 0.6", PSA_METHOD_ADA_BSA, kHf, kBsnd, kCuda, 2, 2, 64, 0, 0, 0, 0, 1800, 0.6, 1.0, 0, 1, 1},
    {"dense bf16 BSND L1000", PSA_METHOD_DENSE, kBf, kBsnd, kCuda, 1, 2, 64, 0, 0, 0, 0, 1000, 0.0, 1.0, 1, 1, 0},
    {"dense f16 BNSD causal d128 L900", PSA_METHOD_DENSE, kHf, kBnsd, kAuto, 1, 2, 128, 0, 0, 0, 0, 900, 0.0, 1.0, 1, 1, 1},
};

// Every case: first call (plans the key) matches ref32; the second call with the same key on
// the same stream is a cache hit (no planning: no cudaMalloc, no cudaMemcpy) and writes the
// same bits.
TEST(CudaVendorEntry, MatchesCpuBackendAndSecondCallHitsCache) {
  PSA_REQUIRE_GPU();
  ASSERT_EQ(PSA_OK, psa_sparse_attention_clear_cache()) << psa_last_error_message();  // first calls plan
  cudaStream_t stream;
  PSA_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  uint32_t seed = 300;
  for (const VendorCase& c : kCases) {
    const Inputs in = make_inputs(c, seed += 5);
    const std::vector<float> ref = run_cpu32(c, in);
    ASSERT_FALSE(ref.empty()) << c.name;
    DeviceTensors dev(c, in);
    const VendorCacheCounters before = vendor_cache_counters();
    ASSERT_EQ(PSA_OK, dev.run(c, stream)) << c.name << ": " << psa_last_error_message();
    PSA_CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<uint16_t> first = dev.out.download();
    const std::vector<float> gpu = dev.result(c.dt);
    const VendorCacheCounters planned = vendor_cache_counters();

    EXPECT_TRUE(test::all_finite(gpu)) << c.name;
    const double base = storage_baseline(ref, c.dt);
    const double err = test::rel_l2(gpu, ref);
    const double budget = 4.0 * base + 1e-4;
    std::printf("[vendor] %-46s rel-L2 %.3e (baseline %.3e, budget %.3e)\n", c.name, err, base, budget);
    EXPECT_LE(err, budget) << c.name;

    dev.out.fill_bytes(0xff);
    ASSERT_EQ(PSA_OK, dev.run(c, stream)) << c.name << " (second call): " << psa_last_error_message();
    PSA_CUDA_OK(cudaStreamSynchronize(stream));
    const VendorCacheCounters after = vendor_cache_counters();
    EXPECT_EQ(first, dev.out.download()) << c.name << ": second call differs";
    EXPECT_EQ(before.misses + 1, planned.misses) << c.name << ": the first call plans its key";
    EXPECT_EQ(planned.misses, after.misses) << c.name << ": the second call planned again";
    EXPECT_EQ(planned.hits + 1, after.hits) << c.name << ": the second call missed the cache";
  }
  cudaStreamDestroy(stream);
}

// The second call of a key, captured into a CUDA graph (workspace = graph allocation), replays
// to the bits of the direct call.
TEST(CudaVendorEntry, CapturedSecondCallReplaysBitIdentical) {
  PSA_REQUIRE_GPU();
  const VendorCase cases[] = {kCases[0], kCases[3], kCases[6]};
  uint32_t seed = 400;
  for (const VendorCase& c : cases) {
    const Inputs in = make_inputs(c, seed += 5);
    DeviceTensors dev(c, in);
    cudaStream_t stream;
    PSA_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ASSERT_EQ(PSA_OK, dev.run(c, stream)) << c.name << ": " << psa_last_error_message();
    PSA_CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<uint16_t> ref = dev.out.download();

    const VendorCacheCounters before = vendor_cache_counters();
    cudaGraph_t graph;
    PSA_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const psa_status captured = dev.run(c, stream);
    const std::string msg = psa_last_error_message();
    PSA_CUDA_OK(cudaStreamEndCapture(stream, &graph));
    ASSERT_EQ(PSA_OK, captured) << c.name << ": " << msg;
    const VendorCacheCounters after = vendor_cache_counters();
    EXPECT_EQ(before.misses, after.misses) << c.name;
    EXPECT_EQ(before.hits + 1, after.hits) << c.name;
    cudaGraphExec_t exec;
    PSA_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 2; ++rep) {
      dev.out.fill_bytes(0xff);
      PSA_CUDA_OK(cudaGraphLaunch(exec, stream));
      PSA_CUDA_OK(cudaStreamSynchronize(stream));
      EXPECT_EQ(ref, dev.out.download()) << c.name << ", replay " << rep;
    }
    std::printf("[vendor] %-46s captured in a graph, replays bit-identical\n", c.name);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// A key never planned cannot be planned inside a capture: PSA_ERR_INVALID_STATE, nothing
// enqueued, and the capture itself stays valid.
TEST(CudaVendorEntry, FirstCallInsideCaptureIsRejected) {
  PSA_REQUIRE_GPU();
  VendorCase c = kCases[6];
  c.len = 1111;  // a length no other test uses
  ASSERT_EQ(PSA_OK, psa_sparse_attention_clear_cache()) << psa_last_error_message();  // not cached
  const Inputs in = make_inputs(c, 500);
  DeviceTensors dev(c, in);
  cudaStream_t stream;
  PSA_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const VendorCacheCounters before = vendor_cache_counters();
  cudaGraph_t graph;
  PSA_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const psa_status st = dev.run(c, stream);
  const std::string msg = psa_last_error_message();
  PSA_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  EXPECT_EQ(PSA_ERR_INVALID_STATE, st) << msg;
  EXPECT_NE(std::string::npos, msg.find("captured")) << msg;
  EXPECT_EQ(before.misses, vendor_cache_counters().misses);
  cudaGraphDestroy(graph);
  // Outside capture the same call plans and runs.
  ASSERT_EQ(PSA_OK, dev.run(c, stream)) << psa_last_error_message();
  PSA_CUDA_OK(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
}

// q, k, v and out must live in one memory space; the error names the first one that does not.
TEST(CudaVendorEntry, RejectsMixedMemorySpacesNamingTheArgument) {
  PSA_REQUIRE_GPU();
  VendorCase c = kCases[6];
  const Inputs in = make_inputs(c, 600);
  DeviceTensors dev(c, in);
  std::vector<uint16_t> host(c.count(), 0);
  struct Mixed {
    psa_backend backend;
    bool dev_q, dev_k, dev_v, dev_out;
    const char* name;  // expected at the start of the message
  };
  const Mixed mixed[] = {
      {kAuto, true, false, true, true, "k: "},     {kAuto, true, true, true, false, "out: "},
      {kAuto, false, true, false, false, "k: "},   {kAuto, false, false, false, true, "out: "},
      {kCuda, false, false, false, false, "q: "},  {kCuda, true, true, false, true, "v: "},
      {PSA_BACKEND_CPU, true, true, true, true, "q: "}, {PSA_BACKEND_CPU, false, false, true, false, "v: "},
  };
  for (const Mixed& m : mixed) {
    const psa_status st = psa_sparse_attention(
        m.dev_q ? static_cast<const void*>(dev.q.get()) : host.data(),
        m.dev_k ? static_cast<const void*>(dev.k.get()) : host.data(),
        m.dev_v ? static_cast<const void*>(dev.v.get()) : host.data(),
        m.dev_out ? static_cast<void*>(dev.out.get()) : host.data(), c.dt, c.B, c.H, c.L(), c.d, c.layout,
        c.method, 0.0, 0, nullptr, 1, 1, 1.0, 0.0, 0, m.backend, nullptr);
    const std::string msg = psa_last_error_message();
    EXPECT_EQ(PSA_ERR_WRONG_MEMORY_SPACE, st) << m.name << msg;
    EXPECT_EQ(0u, msg.rfind(m.name, 0)) << "message: " << msg;
  }
}

// Threads calling one key on their own streams share one cached context (serialised while
// they enqueue) and all write the bits of a single call.
TEST(CudaVendorEntry, ConcurrentCallsOfOneKeyOnSeveralStreams) {
  PSA_REQUIRE_GPU();
  const VendorCase c = kCases[3];
  const Inputs in = make_inputs(c, 800);
  DeviceTensors dev(c, in);
  ASSERT_EQ(PSA_OK, dev.run(c, nullptr)) << psa_last_error_message();
  const std::vector<uint16_t> ref = dev.out.download();
  constexpr int kThreads = 4, kCalls = 5;
  std::vector<DevBuf<uint16_t>> outs(kThreads);
  std::vector<cudaStream_t> streams(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    outs[t].alloc(c.count());
    outs[t].fill_bytes(0xff);
    PSA_CUDA_OK(cudaStreamCreateWithFlags(&streams[t], cudaStreamNonBlocking));
  }
  const VendorCacheCounters before = vendor_cache_counters();
  std::vector<psa_status> status(kThreads, PSA_OK);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int n = 0; n < kCalls && status[t] == PSA_OK; ++n)
        status[t] = call(c, c.dt, c.backend, dev.q.get(), dev.k.get(), dev.v.get(), outs[t].get(), streams[t]);
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(PSA_OK, status[t]) << "thread " << t;
    PSA_CUDA_OK(cudaStreamSynchronize(streams[t]));
    EXPECT_EQ(ref, outs[t].download()) << "thread " << t;
    cudaStreamDestroy(streams[t]);
  }
  const VendorCacheCounters after = vendor_cache_counters();
  EXPECT_EQ(before.misses, after.misses);
  EXPECT_EQ(before.hits + kThreads * kCalls, after.hits);
}

// More keys than the bound: idle entries are evicted (least recently used first) and every
// call still computes the right result; clearing empties the cache and the next call plans.
TEST(CudaVendorEntry, EvictsIdleEntriesBeyondTheBoundAndClearReplans) {
  PSA_REQUIRE_GPU();
  ASSERT_EQ(PSA_OK, psa_sparse_attention_clear_cache()) << psa_last_error_message();
  EXPECT_EQ(0u, vendor_cache_counters().entries);
  VendorCase c = {"ada_bsa f16 small", PSA_METHOD_ADA_BSA, kHf, kBsnd, kCuda, 1, 1, 64, 0, 0, 0, 0, 640, 0.5, 1.0, 1, 1, 0};
  const Inputs in = make_inputs(c, 700);
  DeviceTensors dev(c, in);
  const size_t keys = kVendorCacheCapacity + 4;
  const VendorCacheCounters before = vendor_cache_counters();
  std::vector<uint16_t> first;
  for (size_t i = 0; i < keys; ++i) {
    c.sparsity = 0.5 + 0.01 * static_cast<double>(i);  // one key per sparsity
    ASSERT_EQ(PSA_OK, dev.run(c, nullptr)) << i << ": " << psa_last_error_message();
    if (i == 0) first = dev.out.download();
    EXPECT_LE(vendor_cache_counters().entries, kVendorCacheCapacity) << i;
  }
  const VendorCacheCounters after = vendor_cache_counters();
  EXPECT_EQ(before.misses + keys, after.misses);
  EXPECT_EQ(before.evictions + (keys - kVendorCacheCapacity), after.evictions);
  // Key 0 was evicted first: it plans again and gives the same bits.
  c.sparsity = 0.5;
  dev.out.fill_bytes(0xff);
  ASSERT_EQ(PSA_OK, dev.run(c, nullptr)) << psa_last_error_message();
  EXPECT_EQ(first, dev.out.download());
  EXPECT_EQ(after.misses + 1, vendor_cache_counters().misses);
  ASSERT_EQ(PSA_OK, psa_sparse_attention_clear_cache()) << psa_last_error_message();
  EXPECT_EQ(0u, vendor_cache_counters().entries);
  const uint64_t misses = vendor_cache_counters().misses;
  dev.out.fill_bytes(0xff);
  ASSERT_EQ(PSA_OK, dev.run(c, nullptr)) << psa_last_error_message();
  EXPECT_EQ(first, dev.out.download());
  EXPECT_EQ(misses + 1, vendor_cache_counters().misses);
}

}  // namespace
}  // namespace psa
