// cli/progress.h -- a one-line progress display on stderr for long commands: stage, percent
// and ETA (when the stages' durations could be estimated), redrawn a few times a second by a
// background thread. Shown only when stderr is a terminal, the command has run for more than
// about a second, and --quiet was not given; the line is erased before the report prints.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace psa_cli {

class Progress {
 public:
  // `enabled` false: every call is a no-op. `label` starts the line ("psa run").
  Progress(bool enabled, std::string label);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // True when stderr is a terminal and `quiet` is false.
  static bool wanted(bool quiet);

  // Declares the stages in order with estimated seconds (<= 0: unknown). Optional.
  void plan(const std::vector<std::pair<std::string, double>>& stages);
  // Starts stage `name` (one of plan()'s, or an extra one); ends the current stage.
  void stage(const std::string& name);
  // Updates the estimate of a stage not yet started (e.g. after a calibration).
  void estimate(const std::string& name, double seconds);
  // Ends the display and erases its line.
  void finish();

  bool enabled() const { return enabled_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Stage {
    std::string name;
    double estimate = 0.0;  // seconds; <= 0: unknown
    double actual = -1.0;   // seconds once done
  };
  void run();
  std::string line_locked() const;

  bool enabled_;
  std::string label_;
  std::vector<Stage> stages_;
  int current_ = -1;
  Clock::time_point start_, stage_start_;
  bool stop_ = false, drawn_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace psa_cli
