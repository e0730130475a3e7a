/// @file ops.h
/// @brief Chapter 02's first dispatched ops: element-wise add, sub, mul, div of two tensors
/// with the same shape.
///
/// Chapter 04 builds broadcasting and autograd on top of the same kernels: it expands both
/// inputs to the broadcast shape (stride 0, no copy) and calls the kernel registered here.
#pragma once

#include <string>

#include "tt/dispatcher.h"
#include "tt/tensor.h"

namespace tt {

/// Signature of a binary element-wise kernel: out[i] = a[i] (op) b[i] for every index i.
/// All three tensors have the same shape and dtype and live on the same device; `out` is
/// contiguous, `a` and `b` may have any strides (0 for broadcast dims).
using BinaryKernel = void(const Tensor& out, const Tensor& a, const Tensor& b);

/// Names of the binary kernels registered by chapter 02: "add", "sub", "mul", "div".
inline constexpr const char* kBinaryOps[] = {"add", "sub", "mul", "div"};

/// Validates a, b (same device, dtype and shape — named in the error), allocates the output
/// and calls the kernel `op` for a's device through the registry (exercise ch02.4).
Tensor binary_op(const std::string& op, const Tensor& a, const Tensor& b);

namespace cpu {
/// CPU kernel of "add": out = a + b (exercise ch02.3; registered with TT_REGISTER_KERNEL).
void add(const Tensor& out, const Tensor& a, const Tensor& b);
/// CPU kernel of "sub": out = a - b (exercise ch02.3).
void sub(const Tensor& out, const Tensor& a, const Tensor& b);
/// CPU kernel of "mul": out = a * b (exercise ch02.3).
void mul(const Tensor& out, const Tensor& a, const Tensor& b);
/// CPU kernel of "div": out = a / b (exercise ch02.3; integer division truncates, and
/// division by zero throws tt::Error for int64).
void div(const Tensor& out, const Tensor& a, const Tensor& b);
}  // namespace cpu

}  // namespace tt
