/// @file safe_exp.h
/// @brief The exponential of the CPU kernels' probabilities (softmax, log-softmax,
/// cross-entropy, the online softmax and FlashAttention, sampling): exactly 0 for -inf and for
/// every result below the smallest normal number, the same on every instruction set.
///
/// Why not plain exp: Eigen's SIMD exp (SSE, AVX2 and AVX-512 alike) clamps its argument before
/// its polynomial, so a masked score gives exp(-inf) = 5.56e-309 in double and 2.94e-39 in
/// float, where std::exp gives exactly 0; between the clamp and the underflow the two disagree
/// too (std::exp returns subnormals, Eigen the clamped value). Which one a kernel meets depends
/// on the build flags (-march), on the CPU and even on the position in a row (Eigen computes the
/// unaligned head and tail of a row with std::exp), so a masked attention probability would be
/// 0 on one machine and not on another.
///
/// The rule here: compute exp(x), then replace every result below
/// std::numeric_limits<T>::min() (1.18e-38 in float, 2.23e-308 in double, i.e. x below about
/// -87.34 or -708.40) by exactly 0. Hence on every path:
///   - safe_exp(-inf) == 0, safe_exp(0) == 1, NaN stays NaN, +inf stays +inf;
///   - every result is 0 or a normal number: the same zeros on SSE, AVX2, AVX-512 and scalar
///     code; above the flush the SIMD and scalar results differ by at most a few units in the
///     last place (two polynomials), as they always did.
/// In a softmax the argument is x - max <= 0, so a flushed term is below 1e-37 of the row's
/// largest term (1): no sum or probability changes beyond rounding.
///
/// Use safe_exp() for one value and safe_exp_inplace() for a contiguous run of values (Eigen's
/// SIMD exp, then the flush, which the compiler vectorizes as well). The shift of a softmax row
/// comes from max_ignoring_nan(), a vectorized std::fmax over the row.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tt/eigen.h"

namespace tt {

/// `e` if it is at least the smallest normal number of T (or NaN), else exactly 0.
template <typename T>
inline T flush_subnormal_to_zero(T e) {
  static_assert(std::is_floating_point_v<T>, "flush_subnormal_to_zero: float or double");
  return e < std::numeric_limits<T>::min() ? T(0) : e;
}

/// exp(x) (std::exp), with results below the smallest normal number flushed to exactly 0: 0 for
/// x = -inf on every CPU (see the file comment).
template <typename T>
inline T safe_exp(T x) {
  static_assert(std::is_floating_point_v<T>, "safe_exp: float or double");
  return flush_subnormal_to_zero(std::exp(x));
}

/// x[i] = safe_exp(x[i]) for i in [0, n), with Eigen's SIMD exp: 0 for every -inf entry and every
/// entry whose exp is below the smallest normal number, whatever instruction set Eigen uses.
template <typename T>
inline void safe_exp_inplace(T* x, int64_t n) {
  static_assert(std::is_floating_point_v<T>, "safe_exp_inplace: float or double");
  if (n <= 0) return;
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> v(x, n);
  v = v.exp();
  for (int64_t i = 0; i < n; ++i) x[i] = flush_subnormal_to_zero(x[i]);
}

/// The largest of x[0, n) that is not NaN, -inf when there is none (n = 0, or all NaN): what a
/// chain of std::fmax from -inf gives, in 16 independent lanes that the compiler vectorizes
/// (std::fmax is a library call per element). The maximum is exact, so the lanes change nothing.
template <typename T>
inline T max_ignoring_nan(const T* x, int64_t n) {
  static_assert(std::is_floating_point_v<T>, "max_ignoring_nan: float or double");
  constexpr int kLanes = 16;
  T lane[kLanes];
  for (T& l : lane) l = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  for (; i < n; ++i) lane[0] = x[i] > lane[0] ? x[i] : lane[0];
  T m = lane[0];
  for (int j = 1; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
  return m;
}

}  // namespace tt
