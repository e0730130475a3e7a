// Exercise ch10.1: the online softmax, one pass over a row that arrives in blocks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tt/flash_attention.h"
#include "tt/todo.h"

namespace tt::cpu {

template <typename T>
T OnlineSoftmax<T>::merge(T* x, int64_t n) {
#if TT_SOLUTION
  T block_max = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) block_max = std::max(block_max, x[j]);
  const T new_max = std::max(max, block_max);
  if (new_max == -std::numeric_limits<T>::infinity()) {
    // Nothing finite yet: every probability so far is 0 and there is nothing to rescale.
    std::fill(x, x + n, T(0));
    return T(1);
  }
  // exp(-inf - new_max) = 0: the first finite block discards the empty state.
  const T alpha = std::exp(max - new_max);
  T block_sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - new_max);
    block_sum += x[j];
  }
  sum = sum * alpha + block_sum;
  max = new_max;
  return alpha;
#else
  (void)x;
  (void)n;
  TT_TODO("ch10.1",
          "OnlineSoftmax::merge: after merging blocks of any sizes, max = max of every score and "
          "sum = sum of exp(x - max) over them; x[j] becomes exp(x[j] - new max) (0 for -inf); "
          "returns exp(old max - new max), 1 while max is still -inf; no overflow for large |x|");
#endif
}

template <typename T>
T OnlineSoftmax<T>::logsumexp() const {
  return max + std::log(sum);  // -inf + log(0) = -inf for an empty row
}

template struct OnlineSoftmax<float>;
template struct OnlineSoftmax<double>;

}  // namespace tt::cpu
