// Helpers shared by the chapter 04 tests of element-wise ops, reductions, views and matmul.
#pragma once

#include <cstring>
#include <vector>

#include "tt/autograd.h"
#include "tt/testing.h"

namespace tt::test04 {

/// Seeded N(0, 1) samples of the given shape and dtype.
inline Tensor randn_t(const Shape& shape, uint64_t seed, DType dtype = DType::kFloat64) {
  Generator gen(seed);
  return randn(shape, gen, {dtype});
}

/// A float64 leaf with N(0, 1) values that requires grad (a gradcheck input).
inline Tensor leaf64(const Shape& shape, uint64_t seed) {
  Tensor t = randn_t(shape, seed);
  t.set_requires_grad();
  return t;
}

/// A float64 tensor from values (given code only: from_vector).
inline Tensor f64(const std::vector<double>& v, Shape shape = {}) {
  return from_vector(v, std::move(shape));
}

/// A float32 tensor from values.
inline Tensor f32(const std::vector<float>& v, Shape shape = {}) {
  return from_vector(v, std::move(shape));
}

/// True when x and y hold the same values bit for bit (memcmp: -0.0 vs 0.0 or NaN payloads count).
template <typename T>
bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

/// Runs autograd::gradcheck and turns its verdict into a gtest assertion with its message.
inline ::testing::AssertionResult gradcheck_ok(const autograd::TensorFn& fn,
                                               const std::vector<Tensor>& inputs) {
  const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.message << " (max abs err " << r.max_abs_err
                                       << ", max rel err " << r.max_rel_err << ")";
}

}  // namespace tt::test04
