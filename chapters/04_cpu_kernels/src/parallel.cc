// Thread count and the fixed-partition parallel_for (chapter 04, given code).
#include "tt/parallel.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>

#include "tt/error.h"

namespace tt {

int num_threads() {
  return omp_get_max_threads();
}

void set_num_threads(int n) {
  TT_CHECK(n >= 1, "set_num_threads: expected at least 1 thread, got ", n);
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
}

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  TT_CHECK(grain >= 1, "parallel_for: grain must be positive, got ", grain);
  if (end <= begin) return;
  const int64_t chunks = (end - begin + grain - 1) / grain;
  if (chunks == 1 || omp_in_parallel()) {
    // One chunk, or already inside a parallel region: run the chunks here, in order.
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t b = begin + c * grain;
      fn(b, std::min(end, b + grain));
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = begin + c * grain;
    fn(b, std::min(end, b + grain));
  }
}

}  // namespace tt
