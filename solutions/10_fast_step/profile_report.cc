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
#if TT_SOLUTION
  TT_CHECK(std::isfinite(step_seconds) && step_seconds > 0,
           "read_profile: the step time must be positive, got ", step_seconds, " s");
  TT_CHECK(peaks.bytes_per_second >= 0 && peaks.flops_per_second >= 0,
           "read_profile: peaks must be >= 0 (0 = unknown), got ", peaks.bytes_per_second,
           " B/s and ", peaks.flops_per_second, " FLOP/s");
  // Ranked by total time; equal times by name, so the order never depends on the input's.
  std::sort(ops.begin(), ops.end(), [](const OpStats& a, const OpStats& b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.op < b.op;
  });
  const bool known = peaks.bytes_per_second > 0 && peaks.flops_per_second > 0;
  // The ridge point: the intensity at which moving the bytes and doing the FLOPs take equally
  // long at peak rates.
  const double ridge = known ? peaks.flops_per_second / peaks.bytes_per_second : 0;
  std::vector<ReportRow> rows;
  rows.reserve(ops.size());
  for (OpStats& op : ops) {
    ReportRow r;
    r.percent_of_step = 100.0 * op.seconds / step_seconds;
    if (op.seconds > 0) {
      r.gb_per_s = op.bytes / op.seconds / 1e9;
      r.tflop_per_s = op.flops / op.seconds / 1e12;
    }
    r.intensity = op.bytes > 0 ? op.flops / op.bytes : 0;
    if (known) {
      r.bound = r.intensity >= ridge ? Bound::kCompute : Bound::kMemory;
      r.fraction_of_peak = r.bound == Bound::kCompute
                               ? r.tflop_per_s * 1e12 / peaks.flops_per_second
                               : r.gb_per_s * 1e9 / peaks.bytes_per_second;
    }
    r.op = std::move(op);
    rows.push_back(std::move(r));
  }
  return rows;
#else
  TT_TODO("ch10.1",
          "read_profile: one row per op, longest total time first (equal times in op-name "
          "order), with its share of the step in percent, its achieved GB/s and TFLOP/s, its "
          "arithmetic intensity (FLOP/B), whether it is compute-bound (intensity at or above the "
          "ridge point of peaks) or memory-bound, and the fraction of that roof it reaches; an op "
          "of 0 seconds or 0 bytes gives 0, not a division by zero; a peak of 0 means unknown "
          "(bound unknown, fraction 0); throws for a non-finite or non-positive step time or a "
          "negative peak");
#endif
}

}  // namespace tt::prof
