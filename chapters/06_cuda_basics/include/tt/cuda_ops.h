/// @file cuda_ops.h
/// @brief The CUDA kernels of chapter 06, registered under the same names and signatures as the
/// CPU kernels, so `binary_op("add", a, b)`, `sum(x)` and `x.to(Device::cuda())` work on GPUs.
///
/// | kernel name | signature | CUDA function |
/// |---|---|---|
/// | "add", "sub", "mul", "div" | BinaryKernel (tt/ops.h) | cuda::add, ... |
/// | "sum" | ReduceKernel (tt/ops_reduce.h) | cuda::sum |
///
/// plus the DeviceBackend of DeviceType::kCUDA (copies, fill), which uses cuda::copy and
/// cuda::fill. These functions exist only in CUDA builds (TT_WITH_CUDA); call them through the
/// registry or the Tensor API from code that must also build without CUDA.
///
/// Every host wrapper validates its tensors, switches to their device (DeviceGuard), launches
/// on that device's stream and checks the launch. Nothing synchronizes: results are ready when
/// a later copy to the host (or tt::cuda::synchronize) returns.
#pragma once

#include "tt/tensor.h"

namespace tt::cuda {

/// CUDA kernel "add": out = a + b; `out` contiguous, a and b of out's shape with any strides
/// (0 for broadcast dims), all of one dtype on one device. Contiguous 16-byte-aligned operands
/// take a vectorized path (one 16-byte load per operand per step), everything else the strided
/// path (exercise ch06.2).
void add(const Tensor& out, const Tensor& a, const Tensor& b);
/// CUDA kernel "sub": out = a - b (as add).
void sub(const Tensor& out, const Tensor& a, const Tensor& b);
/// CUDA kernel "mul": out = a * b (as add).
void mul(const Tensor& out, const Tensor& a, const Tensor& b);
/// CUDA kernel "div": out = a / b (as add). int64 division truncates; an int64 division by zero
/// gives 0 (a kernel cannot throw; the CPU kernel throws instead).
void div(const Tensor& out, const Tensor& a, const Tensor& b);

/// Elements of the reduced dims that one block sums before the partial sums are combined.
inline constexpr int64_t kReduceChunk = 2048;

/// CUDA kernel "sum" (ReduceKernel): `out` contiguous with in's number of dims, size 1 on the
/// reduced dims; `in` any strides. Each output's reduced elements are cut into chunks of
/// kReduceChunk; one block sums a chunk (each thread a strided share, then a warp-shuffle tree
/// and a tree over the warps), and a second kernel adds each output's chunk sums in chunk order.
/// The accumulator has the input's dtype. The order of additions depends only on the shapes, so
/// results are bitwise reproducible on any GPU (exercise ch06.3).
void sum(const Tensor& out, const Tensor& in);

/// dst = src element-wise on one CUDA device: same shape, any strides on both sides, dtype
/// converted (static_cast). Contiguous same-dtype copies are one cudaMemcpyAsync (exercise
/// ch06.5 for the strided / converting kernel).
void copy(const Tensor& dst, const Tensor& src);

/// Sets every element of `dst` (any strides) to `value` converted to its dtype.
void fill(const Tensor& dst, double value);

}  // namespace tt::cuda
