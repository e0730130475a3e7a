/// @file cuda_ops.h
/// @brief The CUDA kernels of chapter 06, registered under the same names and signatures as the
/// CPU kernels, so `binary_op("add", a, b)`, `sum(x)` and `x.to(Device::cuda())` work on GPUs.
///
/// | kernel name | signature | CUDA function |
/// |---|---|---|
/// | "add", "sub", "mul", "div" | BinaryKernel (tt/ops.h) | cuda::add, ... |
/// | "sum" | ReduceKernel (tt/ops_reduce.h) | cuda::sum |
/// | "max_dim", "max_dim_backward" | MaxDimKernel, MaxDimBackwardKernel | cuda::max_dim, ... |
/// | "neg", "exp", "log", "sqrt", "tanh" | UnaryKernel (tt/ops_elementwise.h) | cuda::neg, ... |
/// | "add_scalar", "mul_scalar", "pow_scalar" | ScalarKernel | cuda::add_scalar, ... |
/// | "softmax_forward", "log_softmax_forward" | SoftmaxForwardKernel (tt/ops_nn.h) |
/// cuda::softmax_forward, ... | | "softmax_backward", "log_softmax_backward" |
/// SoftmaxBackwardKernel | cuda::softmax_backward, ... | | "layernorm_forward",
/// "layernorm_backward" | LayerNorm{Forward,Backward}Kernel | cuda::layernorm_forward, ... | |
/// "gelu_forward", "gelu_backward" | UnaryForwardKernel, UnaryBackwardKernel | cuda::gelu_forward,
/// ... | | "embedding_forward", "embedding_backward" | Embedding{Forward,Backward}Kernel |
/// cuda::embedding_forward, ... | | "cross_entropy_forward", "cross_entropy_backward" |
/// CrossEntropy{Forward,Backward}Kernel | cuda::cross_entropy_forward, ... | |
/// "masked_fill_forward", "masked_fill_backward" | MaskedFill{Forward,Backward}Kernel |
/// cuda::masked_fill_forward, ... |
///
/// plus the DeviceBackend of DeviceType::kCUDA (copies, fill), which uses cuda::copy and
/// cuda::fill. These functions exist only in CUDA builds (TT_WITH_CUDA); call them through the
/// registry or the Tensor API from code that must also build without CUDA.
///
/// The NN kernels have the contracts of their CPU namesakes in tt/ops_nn.h (same inputs, same
/// outputs, same errors for bad indices) and accumulate in the input dtype (float for float32,
/// double for float64) in an order that depends only on the shapes, so repeated runs give the
/// same bits. Row reductions (softmax, layernorm, cross-entropy) use one block per row and the
/// all-reductions of tt/cuda_block_reduce.h.
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

// ----- reductions over one dim (cuda_nn.cu) ----------------------------------------------------

/// CUDA kernel "max_dim" (MaxDimKernel): one thread per output scans the dim in order; the first
/// maximum wins, NaN beats any number (as the CPU kernel). `in` may have any strides.
void max_dim(const Tensor& values, const Tensor& indices, const Tensor& in, int64_t dim);
/// CUDA kernel "max_dim_backward" (MaxDimBackwardKernel): grad_in (zero-filled by the caller)
/// receives grad_values[j] at indices[j] along `dim`.
void max_dim_backward(const Tensor& grad_in, const Tensor& grad_values, const Tensor& indices,
                      int64_t dim);

// ----- element-wise ops of chapter 04 (cuda_unary.cu) ------------------------------------------

/// CUDA kernel "neg" (UnaryKernel): out = -a (float32, float64, int64). Like every unary kernel
/// here: `out` contiguous, `a` of out's shape with any strides; contiguous 16-byte-aligned
/// operands are processed as 16-byte packs.
void neg(const Tensor& out, const Tensor& a);
/// CUDA kernel "exp": \f$ e^a \f$.
void exp(const Tensor& out, const Tensor& a);
/// CUDA kernel "log": natural logarithm.
void log(const Tensor& out, const Tensor& a);
/// CUDA kernel "sqrt": square root.
void sqrt(const Tensor& out, const Tensor& a);
/// CUDA kernel "tanh": hyperbolic tangent.
void tanh(const Tensor& out, const Tensor& a);
/// CUDA kernel "add_scalar" (ScalarKernel): out = a + s (s rounded to a's dtype once).
void add_scalar(const Tensor& out, const Tensor& a, double s);
/// CUDA kernel "mul_scalar": out = a * s.
void mul_scalar(const Tensor& out, const Tensor& a, double s);
/// CUDA kernel "pow_scalar": out = a^s (a * a when s == 2, as on the CPU).
void pow_scalar(const Tensor& out, const Tensor& a, double s);
/// CUDA kernel "gelu_forward": GELU with the tanh approximation (formula in tt/ops_nn.h).
void gelu_forward(const Tensor& out, const Tensor& x);
/// CUDA kernel "gelu_backward": dx = dout * gelu'(x).
void gelu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x);
/// CUDA kernel "masked_fill_forward": out = mask != 0 ? value : x (mask int64, any strides).
void masked_fill_forward(const Tensor& out, const Tensor& x, const Tensor& mask, double value);
/// CUDA kernel "masked_fill_backward": dx = mask != 0 ? 0 : dout.
void masked_fill_backward(const Tensor& dx, const Tensor& dout, const Tensor& mask);

// ----- NN ops of chapter 04 --------------------------------------------------------------------

/// CUDA kernel "softmax_forward" (exercise ch06.6): over the last dim one block per row (max,
/// sum of exponentials, normalize: three sweeps, block all-reductions); over another dim one
/// thread per row, neighbouring threads on neighbouring rows (coalesced).
void softmax_forward(const Tensor& out, const Tensor& x, int64_t dim);
/// CUDA kernel "log_softmax_forward" (exercise ch06.6): y = x - max - log(sum exp(x - max)).
void log_softmax_forward(const Tensor& out, const Tensor& x, int64_t dim);
/// CUDA kernel "softmax_backward": dx = y (dy - sum(dy y)) per row.
void softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim);
/// CUDA kernel "log_softmax_backward": dx = dy - exp(y) sum(dy) per row.
void log_softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim);
/// CUDA kernel "layernorm_forward" (exercise ch06.7): one block per row; mean and variance in
/// two sweeps; writes out, mean and rstd.
void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& weight, const Tensor& bias, double eps);
/// CUDA kernel "layernorm_backward": dx one block per row; dweight and dbias as column sums over
/// fixed chunks of rows, added in chunk order by a second kernel (no atomics).
void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                        const Tensor& dout, const Tensor& x, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd);
/// CUDA kernel "embedding_forward": out[i, :] = weight[indices[i], :]. The indices are copied to
/// the host and checked first (one synchronization): an index outside [0, V) throws tt::Error.
void embedding_forward(const Tensor& out, const Tensor& weight, const Tensor& indices);
/// CUDA kernel "embedding_backward", deterministic without atomics: the indices are copied to
/// the host and grouped by row (a stable counting sort: tokens stay in order); then one block
/// per used row of dweight adds its tokens' gradient rows in token order, as the CPU kernel does.
/// Rows no token uses are zero.
void embedding_backward(const Tensor& dweight, const Tensor& dout, const Tensor& indices);
/// CUDA kernel "cross_entropy_forward": one block per row computes lse and the row's loss; one
/// block adds the row losses in a fixed order and divides by the number of non-ignored rows
/// (NaN when there is none). The targets are checked on the host (one synchronization).
void cross_entropy_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets, int64_t ignore_index);
/// CUDA kernel "cross_entropy_backward": one block per row writes
/// dloss / count * (exp(x - lse) - onehot(target)), zeros for ignored rows.
void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits,
                            const Tensor& targets, const Tensor& lse, int64_t ignore_index);

}  // namespace tt::cuda
