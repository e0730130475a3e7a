/// @file parallel.h
/// @brief CPU parallelism of chapter 04: one thread count shared by OpenMP and Eigen, and a
/// parallel_for whose partition of the work never depends on the number of threads.
///
/// Determinism rule: work is split into chunks of a fixed size chosen by the caller (the
/// `grain`), never "one chunk per thread". Each chunk is computed by one thread in a fixed
/// order, so a kernel that combines per-chunk results in chunk order gives bitwise the same
/// answer with 1, 2 or 64 threads.
#pragma once

#include <cstdint>
#include <functional>

namespace tt {

/// Number of threads CPU kernels use (OpenMP's omp_get_max_threads()).
int num_threads();

/// Sets the thread count of OpenMP and of Eigen's matrix products together (n >= 1).
/// The environment variable OMP_NUM_THREADS sets the initial value.
void set_num_threads(int n);

/// Sets the thread count (set_num_threads) for the lifetime of the object, then restores the
/// previous one: `{ ScopedNumThreads one(1); ... }`.
class ScopedNumThreads {
 public:
  /// Switches to `n` threads (n >= 1).
  explicit ScopedNumThreads(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~ScopedNumThreads() { set_num_threads(saved_); }
  ScopedNumThreads(const ScopedNumThreads&) = delete;
  ScopedNumThreads& operator=(const ScopedNumThreads&) = delete;

 private:
  int saved_;
};

/// Calls `fn(chunk_begin, chunk_end)` for the consecutive chunks
/// [begin, begin+grain), [begin+grain, begin+2*grain), ... covering [begin, end), in parallel.
/// The chunks depend only on (begin, end, grain); a single chunk runs on the calling thread.
/// If `fn` throws, the other chunks still run and the exception of the lowest throwing chunk is
/// rethrown on the calling thread (an exception must never cross an OpenMP region). Kernels
/// still validate their inputs first, so that nothing is half-written when they throw.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tt
