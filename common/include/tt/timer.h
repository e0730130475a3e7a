/// @file timer.h
/// @brief Wall-clock timing for programs and benchmarks (std::chrono::steady_clock).
#pragma once

#include <chrono>
#include <string>

namespace tt {

/// Measures elapsed wall-clock time from its construction (or the last reset()).
/// @code
/// tt::Timer t;
/// work();
/// double ms = t.elapsed_ms();
/// @endcode
class Timer {
 public:
  /// Starts timing now.
  Timer() : start_(Clock::now()) {}
  /// Restarts timing now.
  void reset() { start_ = Clock::now(); }
  /// Seconds since the start.
  double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  /// Milliseconds since the start.
  double elapsed_ms() const { return elapsed_s() * 1e3; }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

/// A duration as short human-readable text: "45s", "3m07s", "1h02m".
std::string format_duration(double seconds);

}  // namespace tt
