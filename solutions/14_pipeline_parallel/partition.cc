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
#if TT_SOLUTION
  // prefix[i] = cost of layers [0, i); best[k][i] = the smallest largest part when layers
  // [i, n) are cut into k non-empty parts (infinity when impossible).
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
  best[0][n] = 0;
  const auto part = [&](int k, int i, int j) {  // layers [i, j) as one part, then k-1 more
    return std::max(prefix[j] - prefix[i], best[k - 1][j]);
  };
  for (int k = 1; k <= parts; ++k) {
    for (int i = n - k; i >= 0; --i) {
      for (int j = i + 1; j <= n - k + 1; ++j) best[k][i] = std::min(best[k][i], part(k, i, j));
    }
  }
  // The earliest end of each part that keeps the optimum.
  std::vector<int> bounds{0};
  for (int k = parts, i = 0; k >= 1; --k) {
    int j = i + 1;
    while (part(k, i, j) != best[k][i]) ++j;
    bounds.push_back(j);
    i = j;
  }
  return bounds;
#else
  TT_TODO("ch14.3",
          "partition_by_cost: parts + 1 boundaries 0 = b0 < b1 < ... < b_parts = n cutting the "
          "layers into contiguous non-empty runs whose largest cost sum is the smallest possible; "
          "ties: each boundary the earliest after which the remaining layers are still cut "
          "optimally (see include/tt/pipeline.h)");
#endif
}

}  // namespace tt::pp
