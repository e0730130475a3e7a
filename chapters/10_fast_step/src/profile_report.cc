// ============================================================================================
// YOUR EXERCISE FILE for chapter 10_fast_step. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch10
// Generated from solutions/10_fast_step/profile_report.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Exercise ch10.6: reading the profile — rank the ops, compute what each achieved, and place it on
// the roofline of the device.
#include <algorithm>
#include <cmath>
#include <utility>

#include "tt/error.h"
#include "tt/profiler.h"
#include "tt/todo.h"

namespace tt::prof {

std::vector<ReportRow> read_profile(std::vector<OpStats> ops, double step_seconds,
                                    const Peaks& peaks) {
  TT_TODO("ch10.6",
          "read_profile: rows sorted by seconds (descending, ties by op name) with percent_of_step "
          "= 100 seconds / step, gb_per_s = bytes / seconds / 1e9, tflop_per_s = flops / seconds "
          "/ 1e12 (0 when seconds is 0), intensity = flops / bytes (0 when bytes is 0), bound = "
          "compute when intensity >= peak FLOP/s / peak B/s else memory (unknown, fraction 0, "
          "when a peak is 0), fraction_of_peak = achieved / that peak; throws when step <= 0 or "
          "a peak < 0");
}

}  // namespace tt::prof
