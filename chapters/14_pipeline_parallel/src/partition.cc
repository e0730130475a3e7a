// ============================================================================================
// YOUR EXERCISE FILE for chapter 14_pipeline_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch14
// Generated from solutions/14_pipeline_parallel/partition.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Stage partitioning by cost (tt/pipeline.h): exercise ch14.3.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tt/error.h"
#include "tt/pipeline.h"
#include "tt/todo.h"

namespace tt::pp {

std::vector<int> partition_by_cost(const std::vector<double>& costs, int parts) {
  const int n = static_cast<int>(costs.size());
  TT_CHECK(parts >= 1 && parts <= n, "partition_by_cost: cannot cut ", n, " layers into ", parts,
           " stages (needs 1 <= stages <= layers: more stages than layers leaves a stage empty)");
  for (int i = 0; i < n; ++i) {
    TT_CHECK(std::isfinite(costs[i]) && costs[i] >= 0, "partition_by_cost: the cost of layer ", i,
             " is ", costs[i], " (needs a finite cost >= 0)");
  }
  TT_TODO("ch14.3",
          "partition_by_cost: parts + 1 boundaries 0 = b0 < b1 < ... < b_parts = n cutting the "
          "layers into contiguous non-empty runs whose largest cost sum is the smallest possible; "
          "ties: each boundary the earliest after which the remaining layers are still cut "
          "optimally (see include/tt/pipeline.h)");
}

}  // namespace tt::pp
