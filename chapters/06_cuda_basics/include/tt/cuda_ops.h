/// @file cuda_ops.h
/// @brief The CUDA kernels of chapter 06, registered under the same names and signatures as the
/// CPU kernels, so `binary_op("add", a, b)`, `sum(x)` and `x.to(Device::cuda())` work on GPUs.
///
/// | kernel name | signature | CUDA function, or how it works |
/// |---|---|---|
/// | "add", "sub", "mul", "div" | BinaryKernel (tt/ops.h) | cuda::add, ... |
/// | "sum" | ReduceKernel (tt/ops_reduce.h) | cuda::sum |
/// | "max_dim", "max_dim_backward" | MaxDimKernel, MaxDimBackwardKernel | one thread per output scans the dim (first maximum, NaN wins) |
/// | "neg", "exp", "log", "sqrt", "tanh" | UnaryKernel (tt/ops_elementwise.h) | 16-byte packs when contiguous and aligned, else strided |
/// | "add_scalar", "mul_scalar", "pow_scalar" | ScalarKernel | as the unary kernels; pow with s == 2 is x * x, as on the CPU |
/// | "gelu_forward", "gelu_backward" | UnaryForwardKernel, UnaryBackwardKernel (tt/ops_nn.h) | element-wise, tanh approximation |
/// | "masked_fill_forward", "masked_fill_backward" | MaskedFill{Forward,Backward}Kernel | element-wise; the int64 mask may be a broadcast view |
/// | "softmax_forward", "log_softmax_forward" | SoftmaxForwardKernel | exercise ch06.6: one block per row (max, sum of exponentials, write); over a dim other than the last, one thread per row |
/// | "softmax_backward", "log_softmax_backward" | SoftmaxBackwardKernel | one block per row: the row dot product, then dx |
/// | "layernorm_forward" | LayerNormForwardKernel | exercise ch06.7: one block per row, mean then variance (two sweeps) |
/// | "layernorm_backward" | LayerNormBackwardKernel | one warp per row computes dx and adds its row into per-warp column accumulators (x and dy read once); the per-block partial rows are added by column_sum (tt/cuda_column_sum.h) |
/// | "embedding_forward", "embedding_backward" | Embedding{Forward,Backward}Kernel | indices checked (see IndexChecks); backward groups the tokens by row on the device (a stable radix sort of (row, token) pairs), then one block per used row adds its tokens in token order: no atomics, the CPU's result bit for bit |
/// | "cross_entropy_forward", "cross_entropy_backward" | CrossEntropy{Forward,Backward}Kernel | targets checked (see IndexChecks) and counted on the device; one block per row (lse, row loss / gradient row); one block adds the row losses in a fixed order |
///
/// plus the DeviceBackend of DeviceType::kCUDA (copies, fill), which uses cuda::copy and
/// cuda::fill. These functions exist only in CUDA builds (TT_WITH_CUDA); call them through the
/// registry or the Tensor API from code that must also build without CUDA.
///
/// The kernels of chapter 04's ops (from "max_dim" on) are defined in cuda_unary.cu, cuda_nn.cu,
/// cuda_softmax.cu and cuda_layernorm.cu and reached through the registry only; they have the
/// contracts of their CPU namesakes (same inputs, same outputs, same errors for bad indices) and
/// accumulate in the input dtype (float for float32, double for float64) in an order that
/// depends only on the shapes, so repeated runs give the same bits. Row reductions (softmax,
/// layernorm, cross-entropy) use one block per row and the all-reductions of
/// tt/cuda_block_reduce.h.
///
/// Every host wrapper validates its tensors, switches to their device (DeviceGuard), launches
/// on that device's stream and checks the launch. Nothing synchronizes (except embedding and
/// cross-entropy under IndexChecks::kHost, which read their indices on the host): results are
/// ready when a later copy to the host (or tt::cuda::synchronize) returns.
#pragma once

#include "tt/tensor.h"

namespace tt::cuda {

/// How the CUDA embedding and cross-entropy kernels check their int64 indices (a kernel cannot
/// throw). Either way they never read or write through an out-of-range index.
enum class IndexChecks {
  /// The default: copy the indices to the host and throw tt::Error at the call, naming the op,
  /// the position and the value, like the CPU kernels. Costs one host synchronization per call.
  kHost,
  /// A kernel checks them and records errors on the device; the op goes on with 0 (embedding
  /// rows) or NaN (cross-entropy rows) for a bad index. check_index_errors() reads the record
  /// (one synchronization, e.g. once per training step, with the loss).
  kDevice,
};
/// Sets the mode of every later embedding / cross-entropy call (process-wide).
void set_index_checks(IndexChecks mode);
/// The current mode (IndexChecks::kHost unless set).
IndexChecks index_checks();
/// Sets a mode for the lifetime of the guard, then restores the previous one.
class IndexChecksGuard {
 public:
  /// Switches to `mode`.
  explicit IndexChecksGuard(IndexChecks mode);
  /// Restores the mode that was set at construction.
  ~IndexChecksGuard();
  IndexChecksGuard(const IndexChecksGuard&) = delete;
  IndexChecksGuard& operator=(const IndexChecksGuard&) = delete;

 private:
  IndexChecks previous_;
};
/// Throws tt::Error (the number of bad indices and one of their values) when a kernel of device
/// `index` recorded an out-of-range index under IndexChecks::kDevice since the last call, and
/// clears the record. One host synchronization.
void check_index_errors(int index);
/// Checks that every int64 index lies in [0, size), as the embedding and cross-entropy kernels do
/// (for ops of later chapters that take indices, e.g. the fused classifier's targets): under
/// IndexChecks::kHost copies them to the host and throws tt::Error naming `op`, `what`, the
/// position and the value; under kDevice launches a check that records errors for
/// check_index_errors() (no synchronization).
void check_index_range(const char* op, const Tensor& indices, int64_t size, const char* what);

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
/// When the outputs are contiguous and each sums one strided column (a bias gradient: [rows, N]
/// over the rows), the solution uses column_sum (tt/cuda_column_sum.h) instead, whose warps
/// read neighbouring columns. When nothing is reduced (only size-1 dims: a batch of one row),
/// it copies (cuda::copy) instead of launching a block per element.
/// The accumulator has the input's dtype. The order of additions depends only on the shapes, so
/// results are bitwise reproducible on any GPU (exercise ch06.3).
void sum(const Tensor& out, const Tensor& in);

/// The CUDA "layernorm_backward" kernel with an extra term: dx = dx_add + the LayerNorm input
/// gradient, in the same pass (chapter 10's fused residual + LayerNorm adds the residual
/// stream's own gradient this way). dx_add: undefined (then exactly "layernorm_backward") or a
/// contiguous tensor of x's shape, dtype and device; the other arguments as LayerNormBackwardKernel.
void layernorm_backward_add(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                            const Tensor& dout, const Tensor& x, const Tensor& weight,
                            const Tensor& mean, const Tensor& rstd, const Tensor& dx_add);

/// dst = src element-wise on one CUDA device: same shape, any strides on both sides, dtype
/// converted (static_cast). Contiguous same-dtype copies are one cudaMemcpyAsync (exercise
/// ch06.5 for the strided / converting kernel).
void copy(const Tensor& dst, const Tensor& src);

/// Sets every element of `dst` (any strides) to `value` converted to its dtype.
void fill(const Tensor& dst, double value);

}  // namespace tt::cuda
