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
  TT_TODO("ch10.6",
          "read_profile: rows sorted by seconds (descending, ties by op name) with percent_of_step "
          "= 100 seconds / step, gb_per_s = bytes / seconds / 1e9, tflop_per_s = flops / seconds "
          "/ 1e12 (0 when seconds is 0), intensity = flops / bytes (0 when bytes is 0), bound = "
          "compute when intensity >= peak FLOP/s / peak B/s else memory (unknown, fraction 0, "
          "when a peak is 0), fraction_of_peak = achieved / that peak; throws when step <= 0 or "
          "a peak < 0");
#endif
}

}  // namespace tt::prof
