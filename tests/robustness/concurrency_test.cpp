// tests/robustness/concurrency_test.cpp -- the thread-safety rules of include/psa.h, tested:
// distinct contexts run forwards at once with results bit-identical to serial runs; a shared
// config serves concurrent get/clone; configs and catalogs load concurrently; the last
// error is per thread. (No object is shared for writing: that is documented as not allowed.)
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "robustness/robust_env.h"

namespace psa_robust {
namespace {

constexpr int kThreads = 8;

// Releases all waiting threads at once, so their calls overlap as much as possible.
class StartGate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [this] { return open_; });
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(m_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
};

// What thread i runs: a preset (or the library defaults), a video grid and its own inputs.
struct Job {
  const char* model;
  const char* preset;  // nullptr with model nullptr: psa_config_create defaults
  int64_t pinned_step;
  psa_dtype dtype;
};

const Job kJobs[kThreads] = {
    {"Wan2.1_1.3b", "psa_balanced", 20, PSA_DTYPE_BF16},  // LEVELS format + similarity cap
    {"Wan2.1_1.3b", "psa_topk", 20, PSA_DTYPE_F16},
    {"Wan2.1_14b", "psa_balanced", 20, PSA_DTYPE_F32},
    {"Wan2.1_14b", "baseline", -1, PSA_DTYPE_BF16},      // dense
    {"Wan2.1_14b", "ada_bsa_cdf", 20, PSA_DTYPE_F32},
    {"Wan2.1_14b", "rf_v2_080", 20, PSA_DTYPE_BF16},
    {nullptr, nullptr, -1, PSA_DTYPE_F32},               // defaults, no rearrangement
    {"Wan2.1_1.3b", "psa_balanced", 0, PSA_DTYPE_F16},   // warm-up step: dense
};

struct Result {
  std::vector<uint8_t> out;
  std::vector<float> lse;
  bool operator==(const Result& o) const {
    return out == o.out && lse.size() == o.lse.size() &&
           std::memcmp(lse.data(), o.lse.data(), lse.size() * sizeof(float)) == 0;  // -inf, NaN bits too
  }
};

// One job's forwards, start to finish, through the public API only. Reports failures as
// strings (gtest assertions are not made from worker threads).
std::string run_job(int i, int forwards, std::vector<Result>* results, StartGate* gate) {
  if (gate) gate->wait();
  const Job& j = kJobs[i];
  psa_config* raw = nullptr;
  psa_status st = j.model ? psa_config_load_embedded(j.model, j.preset, &raw) : psa_config_create(&raw);
  if (st != PSA_OK) return std::string("config: ") + psa_last_error_message();
  ConfigPtr cfg(raw);
  psa_context* cx = nullptr;
  if ((st = psa_context_create(raw, PSA_BACKEND_CPU, -1, &cx)) != PSA_OK)
    return std::string("context: ") + psa_last_error_message();
  ContextPtr ctx(cx);
  // 2 x 16 x 16 latent grid = 512 tokens (rf_v2 needs 8 | h, w for its aligned order).
  if (psa_context_set_video_grid(cx, 2, 16, 16, 0, PSA_TEXT_NONE) != PSA_OK ||
      psa_context_set_step(cx, j.pinned_step) != PSA_OK)
    return std::string("grid/step: ") + psa_last_error_message();
  HostTensor q(PSA_LAYOUT_BSND, j.dtype, 1, 2, 512, 32), k = q, v = q, out = q;
  std::mt19937_64 rng(1000 + i);  // fixed: serial and concurrent runs see the same inputs
  for (HostTensor* t : {&q, &k, &v})
    for (int64_t h = 0; h < 2; ++h) t->set_head(0, h, psa_test::video_like(rng, 2, 16, 16, 32));
  for (int n = 0; n < forwards; ++n) {
    Result r;
    if ((st = psa_test::forward_cpu(cx, q, k, v, &out, &r.lse)) != PSA_OK)
      return std::string("forward: ") + psa_status_name(st) + ": " + psa_last_error_message();
    r.out = out.bytes;
    results->push_back(std::move(r));
  }
  return "";
}

TEST(Concurrency, EightContextsRunAtOnceBitIdenticalToSerialRuns) {
  constexpr int kForwards = 2;
  std::vector<std::vector<Result>> serial(kThreads), concurrent(kThreads);
  for (int i = 0; i < kThreads; ++i) ASSERT_EQ(run_job(i, kForwards, &serial[i], nullptr), "") << "job " << i;

  StartGate gate;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] { errors[i] = run_job(i, kForwards, &concurrent[i], &gate); });
  gate.open();
  for (std::thread& t : threads) t.join();

  for (int i = 0; i < kThreads; ++i) {
    ASSERT_EQ(errors[i], "") << "job " << i;
    ASSERT_EQ(concurrent[i].size(), serial[i].size());
    for (size_t n = 0; n < serial[i].size(); ++n)
      EXPECT_TRUE(concurrent[i][n] == serial[i][n]) << "job " << i << " forward " << n << " differs";
  }
}

TEST(Concurrency, SharedConfigServesConcurrentGetAndClone) {
  psa_config* raw = nullptr;
  ASSERT_EQ(psa_config_load_embedded("Wan2.1_1.3b", "psa_balanced", &raw), PSA_OK);
  ConfigPtr shared(raw);
  const ConfigSnapshot want(raw);
  StartGate gate;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&] {
      gate.wait();
      for (int n = 0; n < 200; ++n) {
        if (!(ConfigSnapshot(shared.get()) == want)) ++mismatches;
        psa_config* copy = nullptr;
        if (psa_config_clone(shared.get(), &copy) != PSA_OK) {
          ++mismatches;
          continue;
        }
        if (!(ConfigSnapshot(copy) == want)) ++mismatches;
        // The clone is this thread's own: writing it is allowed and must not reach `shared`.
        if (psa_config_set_int(copy, PSA_PARAM_WARMUP_STEPS, n) != PSA_OK) ++mismatches;
        psa_config_destroy(copy);
      }
    });
  gate.open();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_TRUE(ConfigSnapshot(shared.get()) == want);
}

TEST(Concurrency, ConfigsAndCatalogsLoadConcurrently) {
  psa_config* raw = nullptr;
  ASSERT_EQ(psa_config_load_embedded("Wan2.2_5B", nullptr, &raw), PSA_OK);
  const ConfigSnapshot want(raw);
  psa_config_destroy(raw);
  StartGate gate;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      gate.wait();
      for (int n = 0; n < 3; ++n) {
        psa_config* c = nullptr;
        if (psa_config_load_embedded("Wan2.2_5B", nullptr, &c) != PSA_OK || !(ConfigSnapshot(c) == want)) ++failures;
        psa_config_destroy(c);
        psa_catalog* cat = nullptr;
        if ((i % 2 ? psa_catalog_open(nullptr, &cat) : psa_catalog_open_string(mini_yaml(), &cat)) != PSA_OK ||
            psa_catalog_model_count(cat) < 1)
          ++failures;
        psa_catalog_destroy(cat);
      }
    });
  gate.open();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// Failing calls on one thread never change another thread's message or status, also while
// every thread fails concurrently with its own message.
TEST(Concurrency, LastErrorMessageIsPerThread) {
  // Thread A fails, then thread B fails differently, then A still reads its own message.
  std::mutex m;
  std::condition_variable cv;
  int phase = 0;
  auto wait_for = [&](int p) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return phase >= p; });
  };
  auto advance = [&] {
    std::lock_guard<std::mutex> lock(m);
    ++phase;
    cv.notify_all();
  };
  std::string a_before, a_after, b_msg, c_msg;
  psa_status a_status = PSA_OK, c_status = PSA_ERR_INTERNAL;
  std::thread a([&] {
    psa_context_set_step(nullptr, 0);
    a_before = psa_last_error_message();
    advance();      // 1: A has failed
    wait_for(3);    // B failed, C succeeded
    a_after = psa_last_error_message();
    a_status = psa_last_error_status();
  });
  std::thread b([&] {
    wait_for(1);
    psa_config* c = nullptr;
    psa_config_create(&c);
    psa_config_set_int(c, PSA_PARAM_BLOCK_M, 77);
    b_msg = psa_last_error_message();
    psa_config_destroy(c);
    advance();  // 2
  });
  std::thread c([&] {
    wait_for(2);
    psa_config* cfg = nullptr;
    psa_config_create(&cfg);  // succeeds: clears only this thread's message
    c_msg = psa_last_error_message();
    c_status = psa_last_error_status();
    psa_config_destroy(cfg);
    advance();  // 3
  });
  a.join();
  b.join();
  c.join();
  EXPECT_NE(a_before.find("context"), std::string::npos) << a_before;
  EXPECT_EQ(a_after, a_before);
  EXPECT_EQ(a_status, PSA_ERR_NULL_POINTER);
  EXPECT_NE(b_msg.find("block_size.m = 77"), std::string::npos) << b_msg;
  EXPECT_EQ(c_msg, "");
  EXPECT_EQ(c_status, PSA_OK);

  // Stress: every thread fails with a message carrying its own number, many times, at once.
  StartGate gate;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      gate.wait();
      const std::string mine = "index = " + std::to_string(1000 + i);
      psa_catalog* cat = nullptr;
      psa_catalog_open_string(mini_yaml(), &cat);
      for (int n = 0; n < 500; ++n) {
        if (psa_catalog_model_name(cat, 1000 + i) != nullptr) ++wrong;
        std::this_thread::yield();
        if (std::string(psa_last_error_message()).find(mine) == std::string::npos) ++wrong;
        if (psa_last_error_status() != PSA_ERR_INVALID_ARGUMENT) ++wrong;
      }
      psa_catalog_destroy(cat);
    });
  gate.open();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// psa_sparse_attention documents "no shared state; concurrent calls are allowed".
TEST(Concurrency, OneShotVendorCallsRunConcurrently) {
  constexpr int kCalls = 4;
  const int64_t latent[3] = {1, 16, 16};
  std::vector<HostTensor> q, k, v;
  std::vector<HostTensor> serial, concurrent;
  for (int i = 0; i < kCalls; ++i) {
    std::mt19937_64 rng(77 + i);
    HostTensor t(PSA_LAYOUT_BNSD, PSA_DTYPE_F32, 1, 2, 256, 16);
    for (std::vector<HostTensor>* dst : {&q, &k, &v}) {
      for (int64_t h = 0; h < 2; ++h) t.set_head(0, h, psa_test::random_vec(rng, 256 * 16));
      dst->push_back(t);
    }
    serial.push_back(t);
    concurrent.push_back(t);
  }
  auto call = [&](int i, HostTensor* out) {
    return psa_sparse_attention(q[i].bytes.data(), k[i].bytes.data(), v[i].bytes.data(), out->bytes.data(),
                                PSA_DTYPE_F32, 1, 2, 256, 16, PSA_LAYOUT_BNSD,
                                i % 2 ? PSA_METHOD_RF_V2 : PSA_METHOD_ADA_BSA, 0.5, 0, latent, 1, 1, 0.9, 0.0, 0,
                                PSA_BACKEND_CPU, nullptr);
  };
  for (int i = 0; i < kCalls; ++i) ASSERT_EQ(call(i, &serial[i]), PSA_OK) << psa_last_error_message();
  StartGate gate;
  std::vector<psa_status> status(kCalls, PSA_ERR_INTERNAL);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i)
    threads.emplace_back([&, i] {
      gate.wait();
      status[i] = call(i, &concurrent[i]);
    });
  gate.open();
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(status[i], PSA_OK);
    EXPECT_EQ(concurrent[i].bytes, serial[i].bytes) << "call " << i;
  }
}

}  // namespace
}  // namespace psa_robust
