// Thread count and the fixed-partition parallel_for (chapter 04, given code).
#include "tt/parallel.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>

#include "tt/eigen.h"
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
  // An exception must not leave the OpenMP region (that terminates the program): each chunk's
  // is caught, and the one of the lowest chunk is rethrown here, on the calling thread.
  std::exception_ptr error;
  int64_t error_chunk = chunks;
  std::mutex error_mutex;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = begin + c * grain;
    try {
      fn(b, std::min(end, b + grain));
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (c < error_chunk) error_chunk = c, error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tt
