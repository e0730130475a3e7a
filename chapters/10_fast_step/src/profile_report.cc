// ============================================================================================
// YOUR EXERCISE FILE for chapter 10_fast_step. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch10
// Generated from solutions/10_fast_step/profile_report.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Exercise ch10.1: reading the profile — rank the ops, compute what each achieved, and place it on
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
  TT_TODO("ch10.1",
          "read_profile: one row per op, longest total time first (equal times in op-name "
          "order), with its share of the step in percent, its achieved GB/s and TFLOP/s, its "
          "arithmetic intensity (FLOP/B), whether it is compute-bound (intensity at or above the "
          "ridge point of peaks) or memory-bound, and the fraction of that roof it reaches; an op "
          "of 0 seconds or 0 bytes gives 0, not a division by zero; a peak of 0 means unknown "
          "(bound unknown, fraction 0); throws for a non-finite or non-positive step time or a "
          "negative peak");
}

}  // namespace tt::prof
