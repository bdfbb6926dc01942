// tests/robustness/hostile_files_test.cpp -- config files that are not files (a FIFO with no
// writer, /dev/zero, a directory), files over the size cap, and messages whose echoed value
// alone is longer than the 2,047-character message limit (issue 18). Public C API only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "psa.h"

namespace {

std::string scratch_path(const char* name) {
  return std::string(PSA_BINARY_DIR) + "/hostile_files_" + std::to_string(::getpid()) + "_" + name;
}

// Loading from a FIFO that no process writes to must fail at once instead of blocking. Should
// the library block, a helper opens the FIFO for writing after 3 s and closes it, so the test
// fails (wrong status, too slow) rather than hanging.
TEST(HostileConfigFiles, FifoWithoutWriterIsRejectedAtOnce) {
  const std::string path = scratch_path("fifo");
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  std::atomic<bool> done{false};
  std::thread unblocker([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::this_thread::sleep_for(std::chrono::seconds(3));
    while (!done && std::chrono::steady_clock::now() < until) {
      const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);  // ENXIO while no reader
      if (fd >= 0) {
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  psa_config* cfg = nullptr;
  const psa_status st = psa_config_load_file(path.c_str(), "M", nullptr, &cfg);
  const std::string msg = psa_last_error_message();
  psa_catalog* cat = nullptr;
  const psa_status cst = psa_catalog_open(path.c_str(), &cat);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  done = true;
  unblocker.join();
  ::unlink(path.c_str());
  EXPECT_EQ(st, PSA_ERR_IO) << msg;
  EXPECT_NE(msg.find("is a FIFO; config files must be regular files"), std::string::npos) << msg;
  EXPECT_EQ(cst, PSA_ERR_IO);
  EXPECT_EQ(cfg, nullptr);
  EXPECT_EQ(cat, nullptr);
  EXPECT_LT(s, 2.0) << "the load waited for a writer";
}

TEST(HostileConfigFiles, DevZeroIsRejected) {
  psa_catalog* cat = nullptr;
  EXPECT_EQ(psa_catalog_open("/dev/zero", &cat), PSA_ERR_IO);
  EXPECT_STREQ(psa_last_error_message(),
               "path = /dev/zero: is a character device; config files must be regular files");
  psa_config* cfg = nullptr;
  EXPECT_EQ(psa_config_load_file("/dev/zero", "M", nullptr, &cfg), PSA_ERR_IO);
  EXPECT_EQ(cfg, nullptr);
}

TEST(HostileConfigFiles, DirectoryIsRejected) {
  psa_catalog* cat = nullptr;
  EXPECT_EQ(psa_catalog_open("/", &cat), PSA_ERR_IO);
  EXPECT_STREQ(psa_last_error_message(), "path = /: is a directory; config files must be regular files");
}

// A sparse file just over the cap: rejected from its size, with the cap in the message.
TEST(HostileConfigFiles, FileOverTheSizeCapIsRejected) {
  const std::string path = scratch_path("big.yaml");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::ftruncate(fd, (off_t{64} << 20) + 1), 0);
  ::close(fd);
  psa_catalog* cat = nullptr;
  const psa_status st = psa_catalog_open(path.c_str(), &cat);
  const std::string msg = psa_last_error_message();
  ::unlink(path.c_str());
  EXPECT_EQ(st, PSA_ERR_IO);
  EXPECT_NE(msg.find("67108865 bytes; config files are limited to 67108864 bytes (64 MiB)"),
            std::string::npos)
      << msg;
}

// A path longer than the message limit: the reason survives, the path is shortened.
TEST(LongMessages, LongPathKeepsTheReason) {
  const std::string path = "/nonexistent/" + std::string(3000, 'a') + "/attention_config.yaml";
  psa_catalog* cat = nullptr;
  EXPECT_EQ(psa_catalog_open(path.c_str(), &cat), PSA_ERR_IO);
  const std::string msg = psa_last_error_message();
  EXPECT_LE(msg.size(), 2047u);
  EXPECT_EQ(msg.rfind("path = /nonexistent/aaa", 0), 0u) << msg;
  EXPECT_NE(msg.find("characters left out"), std::string::npos) << msg;
  EXPECT_NE(msg.find("aaa/attention_config.yaml: cannot open: No such file or directory"),
            std::string::npos)
      << msg;
}

// Two long values around the reason (a model name and the list of models): both shortened.
TEST(LongMessages, LongModelNameKeepsTheReasonAndTheList) {
  const std::string model(5000, 'm');
  psa_config* cfg = nullptr;
  EXPECT_EQ(psa_config_load_embedded(model.c_str(), nullptr, &cfg), PSA_ERR_NOT_FOUND);
  const std::string msg = psa_last_error_message();
  EXPECT_LE(msg.size(), 2047u);
  EXPECT_NE(msg.find(": not found in <embedded attention_config.yaml>; available: "), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("Wan2.1_14b"), std::string::npos) << msg;
}

// A short message is never changed.
TEST(LongMessages, ShortMessagesAreUnchanged) {
  psa_config* cfg = nullptr;
  EXPECT_EQ(psa_config_load_embedded("Nope", nullptr, &cfg), PSA_ERR_NOT_FOUND);
  EXPECT_EQ(std::string(psa_last_error_message()).rfind("model = Nope: not found in <embedded", 0), 0u);
}

}  // namespace
