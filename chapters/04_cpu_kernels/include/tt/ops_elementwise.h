/// @file ops_elementwise.h
/// @brief Differentiable element-wise ops with NumPy broadcasting: add, sub, mul, div of two
/// tensors, tensor-scalar ops, neg, exp, log, sqrt, tanh, pow.
///
/// Broadcasting (NumPy rules): shapes are aligned from the right; two sizes are compatible when
/// they are equal or one of them is 1; missing leading dims count as 1. For example
/// \f$ [4, 1, 3] \oplus [2, 1] = [4, 2, 3] \f$. The forward pass expands both inputs to the
/// result shape (stride 0, no copy) and calls chapter 02's same-shape kernels ("add", "sub",
/// "mul", "div"). The backward pass reduces each gradient back to its input's shape with
/// sum_to_shape, because an input element that was used \f$ n \f$ times receives the sum of
/// those \f$ n \f$ gradients.
///
/// Edge cases: empty tensors (a size-0 dim) broadcast like any other shape and give empty
/// results. Floating-point ops follow IEEE arithmetic and never throw on values: NaN propagates,
/// x / 0 is +-inf (0 / 0 is NaN), log(0) = -inf, log and sqrt of negative numbers are NaN.
/// int64 division truncates and throws tt::Error on a zero divisor. Errors (shapes that do not
/// broadcast, different dtypes or devices, int64 into a float-only op, undefined inputs) name
/// the front-end op ("sub" for sub(a, 2.0)) and the inputs' shapes, dtypes and devices.
#pragma once

#include "tt/ops.h"
#include "tt/tensor.h"

namespace tt {

/// Signature of a unary element-wise kernel: out[i] = f(a[i]). `out` is contiguous with a's
/// shape and dtype; `a` may have any strides.
using UnaryKernel = void(const Tensor& out, const Tensor& a);
/// Signature of a tensor-scalar kernel: out[i] = f(a[i], s) (layout as UnaryKernel).
using ScalarKernel = void(const Tensor& out, const Tensor& a, double s);

/// The broadcast shape of `a` and `b` (exercise ch04.1). Throws tt::Error naming `op`, both
/// shapes and the first incompatible dim when they are not broadcastable.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

/// Sums `grad` over the dims that broadcasting added or expanded so that the result has
/// `shape` (exercise ch04.2): the backward of `expand(shape -> grad.shape())`.
/// \f[ \text{out}[j] = \sum_{i \,:\, i \text{ broadcasts to } j} \text{grad}[i] \f]
/// grad itself when the shapes are equal, a view of it when broadcasting added only size-1 dims
/// in front (nothing to add). Throws tt::Error when grad.shape() is not a broadcast of `shape`.
Tensor sum_to_shape(const Tensor& grad, const Shape& shape);

// ----- binary ops with broadcasting (differentiable) ------------------------------------------

/// a + b with broadcasting. \f$ \partial/\partial a = 1, \partial/\partial b = 1 \f$.
Tensor add(const Tensor& a, const Tensor& b);
/// a - b with broadcasting. \f$ \partial/\partial a = 1, \partial/\partial b = -1 \f$.
Tensor sub(const Tensor& a, const Tensor& b);
/// a * b with broadcasting. \f$ \partial/\partial a = b, \partial/\partial b = a \f$.
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b with broadcasting. \f$ \partial/\partial a = 1/b, \partial/\partial b = -a/b^2 \f$.
Tensor div(const Tensor& a, const Tensor& b);

// ----- tensor-scalar and unary ops (differentiable, float32/float64) --------------------------

/// a + s.
Tensor add(const Tensor& a, double s);
/// a - s.
Tensor sub(const Tensor& a, double s);
/// a * s.
Tensor mul(const Tensor& a, double s);
/// a * (1/s) (one multiply per element; may differ from a true division in the last bit).
Tensor div(const Tensor& a, double s);
/// \f$ a^p \f$ elementwise; \f$ \partial/\partial a = p\,a^{p-1} \f$.
Tensor pow(const Tensor& a, double p);
/// -a (also int64).
Tensor neg(const Tensor& a);
/// \f$ e^a \f$; the derivative is the output itself.
Tensor exp(const Tensor& a);
/// Natural logarithm; derivative \f$ 1/a \f$.
Tensor log(const Tensor& a);
/// Square root; derivative \f$ 1/(2\sqrt{a}) \f$.
Tensor sqrt(const Tensor& a);
/// Hyperbolic tangent; derivative \f$ 1 - \tanh^2 a \f$.
Tensor tanh(const Tensor& a);

/// add(a, b).
inline Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
/// sub(a, b).
inline Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
/// mul(a, b).
inline Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
/// div(a, b).
inline Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
/// neg(a).
inline Tensor operator-(const Tensor& a) {
  return neg(a);
}
/// add(a, s).
inline Tensor operator+(const Tensor& a, double s) {
  return add(a, s);
}
/// add(a, s).
inline Tensor operator+(double s, const Tensor& a) {
  return add(a, s);
}
/// sub(a, s).
inline Tensor operator-(const Tensor& a, double s) {
  return sub(a, s);
}
/// s - a.
inline Tensor operator-(double s, const Tensor& a) {
  return add(neg(a), s);
}
/// mul(a, s).
inline Tensor operator*(const Tensor& a, double s) {
  return mul(a, s);
}
/// mul(a, s).
inline Tensor operator*(double s, const Tensor& a) {
  return mul(a, s);
}
/// div(a, s).
inline Tensor operator/(const Tensor& a, double s) {
  return div(a, s);
}

namespace cpu {
/// CPU kernel "neg": out = -a.
void neg(const Tensor& out, const Tensor& a);
/// CPU kernel "exp": out = exp(a).
void exp(const Tensor& out, const Tensor& a);
/// CPU kernel "log": out = log(a).
void log(const Tensor& out, const Tensor& a);
/// CPU kernel "sqrt": out = sqrt(a).
void sqrt(const Tensor& out, const Tensor& a);
/// CPU kernel "tanh": out = tanh(a).
void tanh(const Tensor& out, const Tensor& a);
/// CPU kernel "add_scalar": out = a + s.
void add_scalar(const Tensor& out, const Tensor& a, double s);
/// CPU kernel "mul_scalar": out = a * s.
void mul_scalar(const Tensor& out, const Tensor& a, double s);
/// CPU kernel "pow_scalar": out = a^s.
void pow_scalar(const Tensor& out, const Tensor& a, double s);
}  // namespace cpu

}  // namespace tt
