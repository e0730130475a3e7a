/// @file ops_matmul.h
/// @brief Matrix multiplication: batched, with broadcast batch dims, differentiable, with four
/// CPU algorithms (naive, cache-blocked, Eigen, FMA micro-kernel) selectable for teaching and
/// benchmarking.
///
/// For \f$ A \in \mathbb{R}^{M \times K} \f$ and \f$ B \in \mathbb{R}^{K \times N} \f$,
/// \f$ C_{ij} = \sum_{k} A_{ik} B_{kj} \f$ costs \f$ 2MNK \f$ flops. Leading (batch) dims
/// broadcast like element-wise ops: [2, 1, M, K] @ [3, K, N] -> [2, 3, M, N]. The backward is
/// \f[ \frac{\partial L}{\partial A} = \frac{\partial L}{\partial C} B^\top, \qquad
///     \frac{\partial L}{\partial B} = A^\top \frac{\partial L}{\partial C}, \f]
/// each summed over the batch dims its input was broadcast along.
///
/// Edge cases: any of M, N, K and the batch dims may be 0. With K = 0 every output element is an
/// empty sum, so the result is zeros [..., M, N] (every algorithm); with M, N or a batch dim 0
/// the result is empty. NaN and Inf propagate by IEEE arithmetic: a NaN in row i of a makes row
/// i of the result NaN, an Inf in column j of b makes column j infinite or NaN (Inf * 0 = NaN).
/// Nothing throws on non-finite values.
#pragma once

#include <utility>

#include "tt/tensor.h"

namespace tt {

/// Which kernel computes a matmul.
enum class MatmulAlgo {
  kDefault,  ///< kernel "matmul": the fastest of the device (on the CPU matmul_fma, or Eigen
             ///< in a build without FMA instructions; cuBLAS on CUDA)
  kNaive,    ///< kernel "matmul_naive": three nested loops
  kBlocked,  ///< kernel "matmul_blocked": packed cache blocks and a register-blocked micro-kernel
  kEigen,    ///< kernel "matmul_eigen": Eigen::Map over the buffers, Eigen's GEMM
  kFma,      ///< kernel "matmul_fma" (CPU only): kBlocked's algorithm with a SIMD FMA micro-kernel
};

/// Registry name of the kernel of `algo` ("matmul", "matmul_naive", ...).
const char* matmul_kernel_name(MatmulAlgo algo);

/// Signature of a matmul kernel: out[p] = a[p] @ b[p] for every batch index p.
/// out is contiguous [batch..., M, N]; a is [batch..., M, K] and b is [batch..., K, N] with
/// the same batch dims as out (stride 0 where broadcast). Each matrix of a and b is row-major
/// (stride(-1) == 1, stride(-2) >= size(-1)) or column-major (stride(-2) == 1,
/// stride(-1) >= size(-2)); the front-end makes other layouts contiguous first.
using MatmulKernel = void(const Tensor& out, const Tensor& a, const Tensor& b);

/// Signature of a "gemm" kernel, BLAS's full form: out = alpha * (a @ b) + beta * out for 2-D
/// a [M, K], b [K, N] (each row- or column-major, as for MatmulKernel) and out [M, N] whose rows
/// may be padded: stride(-1) == 1 and stride(-2) >= N, e.g. the first N columns of an [M, Np]
/// buffer. With beta == 0 the old values of out are never read (NaN included). Registered by
/// chapter 07 on CUDA (cuBLAS with explicit leading dimensions) and by chapter 10 on the CPU
/// (Eigen); chapter 10's fused classifier accumulates its weight gradient with beta = 1.
using GemmKernel = void(const Tensor& out, const Tensor& a, const Tensor& b, double alpha,
                        double beta);

/// a @ b, differentiable. 1-D operands are promoted like NumPy/PyTorch: a [K] acts as [1, K]
/// and b [K] as [K, 1], and the added dim is removed from the result. float32/float64.
/// Throws tt::Error naming shapes and dtypes when they do not fit.
Tensor matmul(const Tensor& a, const Tensor& b, MatmulAlgo algo = MatmulAlgo::kDefault);

/// The forward computation of matmul for operands with at least 2 dims, without autograd
/// (exercise ch04.8): validates, broadcasts the batch dims, allocates the output and calls the
/// kernel of `algo`. When b is 2-D, the batch dims of a are folded into its rows (one GEMM).
Tensor matmul_forward(const Tensor& a, const Tensor& b, MatmulAlgo algo = MatmulAlgo::kDefault);

/// Gradients of C = a @ b (a, b with at least 2 dims) given grad = dL/dC (exercise ch04.9):
/// {grad @ b^T, a^T @ grad}, each reduced to its input's shape. An input whose `need_*` flag
/// is false gets an undefined tensor.
std::pair<Tensor, Tensor> matmul_backward(const Tensor& grad, const Tensor& a, const Tensor& b,
                                          MatmulAlgo algo = MatmulAlgo::kDefault,
                                          bool need_a = true, bool need_b = true);

namespace cpu {
/// CPU kernel "matmul_naive" (exercise ch04.5): one dot product per output element.
void matmul_naive(const Tensor& out, const Tensor& a, const Tensor& b);
/// CPU kernel "matmul_blocked" (exercise ch04.6): packed cache blocks, register micro-kernel.
void matmul_blocked(const Tensor& out, const Tensor& a, const Tensor& b);
/// CPU kernel "matmul_eigen" (exercise ch04.7): Eigen::Map + Eigen's GEMM; also "matmul" in a
/// build without FMA instructions (see cpu_gemm.h for the kernel "matmul_fma").
void matmul_eigen(const Tensor& out, const Tensor& a, const Tensor& b);
}  // namespace cpu

}  // namespace tt
