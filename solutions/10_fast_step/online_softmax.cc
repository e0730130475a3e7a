// Exercise ch10.2: the online softmax, one pass over a row that arrives in blocks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tt/eigen.h"
#include "tt/flash_attention.h"
#include "tt/safe_exp.h"
#include "tt/todo.h"

namespace tt::cpu {

template <typename T>
T OnlineSoftmax<T>::merge(T* x, int64_t n) {
#if TT_SOLUTION
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  Eigen::Map<Array> xv(x, n);  // Eigen: the max, exp and sum below run on SIMD lanes
  const T block_max = n > 0 ? xv.maxCoeff() : kNegInf;
  const T new_max = std::max(max, block_max);
  if (new_max == kNegInf) {
    // Nothing finite yet: every probability so far is 0 and there is nothing to rescale.
    xv.setZero();
    return T(1);
  }
  // exp(-inf - new_max) = 0: the first finite block discards the empty state. safe_exp
  // (tt/safe_exp.h): Eigen's SIMD exp alone gives a tiny subnormal, not 0, for -inf.
  const T alpha = safe_exp(max - new_max);
  xv -= new_max;
  safe_exp_inplace(x, n);
  sum = sum * alpha + xv.sum();
  max = new_max;
  return alpha;
#else
  (void)x;
  (void)n;
  TT_TODO("ch10.2",
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
