// cli/progress.cpp -- the stderr progress line (see progress.h). Drawing only.
#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace psa_cli {
namespace {

// Delay before the first draw: short commands print no progress at all.
constexpr double kShowAfterSeconds = 1.0;

std::string clock_text(double s) {
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  }
  return buf;
}

}  // namespace

bool Progress::wanted(bool quiet) { return !quiet && ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(bool enabled, std::string label)
    : enabled_(enabled), label_(std::move(label)), start_(Clock::now()), stage_start_(start_) {
  if (enabled_) thread_ = std::thread([this] { run(); });
}

Progress::~Progress() { finish(); }

void Progress::plan(const std::vector<std::pair<std::string, double>>& stages) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  stages_.clear();
  for (const auto& s : stages) stages_.push_back(Stage{s.first, s.second, -1.0});
}

void Progress::estimate(const std::string& name, double seconds) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (Stage& s : stages_)
    if (s.name == name && s.actual < 0) s.estimate = seconds;
}

void Progress::stage(const std::string& name) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = Clock::now();
  if (current_ >= 0) stages_[current_].actual = std::chrono::duration<double>(now - stage_start_).count();
  int found = -1;
  for (size_t i = 0; i < stages_.size(); ++i)
    if (stages_[i].name == name && stages_[i].actual < 0) {
      found = static_cast<int>(i);
      break;
    }
  if (found < 0) {
    stages_.push_back(Stage{name, 0.0, -1.0});
    found = static_cast<int>(stages_.size()) - 1;
  }
  current_ = found;
  stage_start_ = now;
}

void Progress::finish() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (drawn_) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
}

std::string Progress::line_locked() const {
  const Clock::time_point now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string line = label_;
  if (current_ >= 0) {
    line += ": " + stages_[current_].name + " (" + std::to_string(current_ + 1) + "/" +
            std::to_string(stages_.size()) + ")";
  }
  // Percent and ETA only when every stage has an estimate or is done.
  bool known = current_ >= 0;
  double total = 0.0, done = 0.0;
  for (size_t i = 0; i < stages_.size() && known; ++i) {
    const Stage& s = stages_[i];
    const double len = s.actual >= 0 ? s.actual : s.estimate;
    if (s.actual < 0 && s.estimate <= 0 && static_cast<int>(i) >= current_) known = false;
    total += std::max(0.0, len);
    if (s.actual >= 0) {
      done += s.actual;
    } else if (static_cast<int>(i) == current_) {
      const double in_stage = std::chrono::duration<double>(now - stage_start_).count();
      done += std::min(in_stage, 0.99 * std::max(0.0, s.estimate));
    }
  }
  char buf[96];
  if (known && total > 0.0) {
    const double pct = std::min(99.0, 100.0 * done / total);
    std::snprintf(buf, sizeof buf, "  %3.0f%%  elapsed %s  ETA %s", pct, clock_text(elapsed).c_str(),
                  clock_text(std::max(0.0, total - done)).c_str());
  } else {
    std::snprintf(buf, sizeof buf, "  elapsed %s", clock_text(elapsed).c_str());
  }
  return line + buf;
}

void Progress::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(250));
    if (stop_) break;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    if (elapsed < kShowAfterSeconds) continue;
    const std::string line = line_locked();
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
}

}  // namespace psa_cli
