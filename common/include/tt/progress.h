/// @file progress.h
/// @brief A one-line progress bar with rate and ETA for long loops (training, data preparation).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "tt/timer.h"

namespace tt {

/// Draws `label [#########.........]  45/100  2.1 it/s  ETA 26s  <status>` on one terminal
/// line, redrawn in place (carriage return). When the stream is not a terminal (a log file, CI) it
/// prints a plain line only every `every_percent` percent, so logs stay short. Drawing is
/// rate-limited (at most ~10 redraws per second) and costs nothing measurable per update.
/// @code
/// tt::ProgressBar bar(steps, "train");
/// for (int64_t s = 0; s < steps; ++s) { work(); bar.update(s + 1, "loss 2.31"); }
/// bar.finish();
/// @endcode
class ProgressBar {
 public:
  /// A bar for `total` units of work (total >= 1), written to `out` (stderr by default).
  explicit ProgressBar(int64_t total, std::string label = "", std::FILE* out = stderr,
                       int every_percent = 10);
  /// Records that `done` units are finished (0..total) and redraws; `status` is shown after
  /// the ETA (e.g. the current loss).
  void update(int64_t done, const std::string& status = "");
  /// Prints `line` (plus a newline) to `stream` above the bar: on a terminal the bar is erased
  /// first and redrawn after, so log lines and the bar do not mix.
  void println(const std::string& line, std::FILE* stream = stdout);
  /// Draws the final state and ends the line (also done by the destructor if needed).
  void finish();
  /// Ends the line if finish() was not called.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// Estimated seconds left after `done` of `total` units took `elapsed` seconds (linear
  /// extrapolation; 0 when done >= total, negative when nothing is done yet).
  static double eta_seconds(int64_t done, int64_t total, double elapsed);
  /// The bar text for a state, without carriage return or newline (used by update; public for
  /// tests).
  std::string render(int64_t done, const std::string& status, double elapsed) const;

 private:
  int64_t total_;
  std::string label_;
  std::FILE* out_;
  bool tty_;
  int every_percent_;
  int last_bucket_ = -1;
  double last_draw_ = -1;
  bool finished_ = false;
  bool drawn_ = false;
  int64_t done_ = 0;
  std::string status_;
  Timer timer_;
};

}  // namespace tt
