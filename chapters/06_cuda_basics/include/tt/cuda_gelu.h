/// @file cuda_gelu.h
/// @brief GELU (tanh approximation) and its derivative as device functors: chapter 06's CUDA
/// "gelu_forward" and "gelu_backward" apply them elementwise, and chapter 11's bfloat16 GELU
/// backward applies the same arithmetic in float between a bfloat16 load and store.
///
/// \f[ \mathrm{gelu}(x) = \tfrac12 x \left(1 + \tanh u\right), \quad
///     u = \sqrt{2/\pi}\,(x + 0.044715\,x^3), \f]
/// \f[ \mathrm{gelu}'(x) = \tfrac12 (1 + t) + \tfrac12 x (1 - t^2) \sqrt{2/\pi}\,
///     (1 + 3 \cdot 0.044715\,x^2), \quad t = \tanh u. \f]
/// For CUDA sources only (nvcc).
#pragma once

#if defined(__CUDACC__)

#include <cmath>

namespace tt::cuda {

/// \f$ \sqrt{2/\pi} \f$.
inline constexpr double kSqrt2OverPi = 0.7978845608028654;
/// The cubic coefficient of GELU's tanh approximation.
inline constexpr double kGeluCoeff = 0.044715;

/// y = gelu(x) in T (float or double).
struct GeluFn {
  /// gelu(x), the formula of this file.
  template <typename T>
  __device__ T operator()(T x) const {
    const T beta = static_cast<T>(kSqrt2OverPi), kappa = static_cast<T>(kGeluCoeff);
    return T(0.5) * x * (T(1) + std::tanh(beta * (x + kappa * x * x * x)));
  }
};

/// dx = dy gelu'(x) in T (float or double).
struct GeluBackwardFn {
  /// dy gelu'(x), the formula of this file.
  template <typename T>
  __device__ T operator()(T dy, T x) const {
    const T beta = static_cast<T>(kSqrt2OverPi), kappa = static_cast<T>(kGeluCoeff);
    const T t = std::tanh(beta * (x + kappa * x * x * x));
    const T du = beta * (T(1) + T(3) * kappa * x * x);
    return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
  }
};

}  // namespace tt::cuda

#endif  // defined(__CUDACC__)
