/// @file lt_gemm.h
/// @brief One cuBLASLt GEMM with an epilogue, described without cuBLASLt types (LtGemm), the
/// descriptors of a linear layer's forward and weight-gradient GEMMs, and the runner that turns
/// a description into cuBLASLt calls (cached heuristic, one handle and workspace per device).
///
/// Chapter 10 uses it for its float32 linear layers (tt/fused_ops.h); chapter 11 for the
/// bfloat16 ones (bfloat16 A and B, float32 accumulation, a bfloat16 or float32 D) and runs the
/// same descriptions through a CPU emulation, so the descriptors are tested without a GPU.
///
/// **Conventions (cuBLASLt's).** Matrices are column-major: D (m x n, leading dimension ldd) =
/// op(A) op(B) + beta D, then the epilogue, with op(A) m x k and op(B) k x n; A is stored m x k
/// (lda >= m) when not transposed, k x m (lda >= k) when transposed, B likewise. A row-major
/// tensor [R, C] is the column-major C x R matrix with leading dimension C (chapter 07's trick).
/// The accumulation is float32 (CUBLAS_COMPUTE_32F; TF32 for float32 operands when
/// cuda::allow_tf32()); alpha is 1.
///
/// | LtEpilogue | cuBLASLt | after D = op(A) op(B) + beta D |
/// |---|---|---|
/// | kDefault | CUBLASLT_EPILOGUE_DEFAULT | nothing |
/// | kBias | CUBLASLT_EPILOGUE_BIAS | D[i, j] += bias[i] (bias: m values of D's type) |
/// | kGeluAuxBias | CUBLASLT_EPILOGUE_GELU_AUX_BIAS | h = D + bias[i]; aux[i, j] = h (D's type, ld = ldd, a multiple of 8); D = gelu(h) (tanh approximation) |
/// | kBGradB | CUBLASLT_EPILOGUE_BGRADB | bias[j] = sum over l < k of op(B)[l, j] (n values of D's type) |
#pragma once

#include <cstdint>
#include <tuple>

#include "tt/tensor.h"

namespace tt {

/// The epilogues an LtGemm may ask for (see the table in the file comment).
enum class LtEpilogue { kDefault, kBias, kGeluAuxBias, kBGradB };

/// One GEMM as cuBLASLt sees it (column-major, see the file comment). Pointers are device
/// pointers on the device the GEMM runs on (host pointers for the CPU emulation).
struct LtGemm {
  bool trans_a = false;             ///< op(A) = A^T
  bool trans_b = false;             ///< op(B) = B^T
  int64_t m = 0;                    ///< rows of D and op(A)
  int64_t n = 0;                    ///< columns of D and op(B)
  int64_t k = 0;                    ///< columns of op(A), rows of op(B)
  DType ab_type = DType::kFloat32;  ///< element type of A and B (float32 or bfloat16)
  const void* a = nullptr;          ///< A
  int64_t lda = 0;                  ///< leading dimension of A
  const void* b = nullptr;          ///< B
  int64_t ldb = 0;                  ///< leading dimension of B
  DType d_type = DType::kFloat32;   ///< element type of D, bias and aux (float32 or bfloat16)
  void* d = nullptr;                ///< D (also C, read when beta != 0)
  int64_t ldd = 0;                  ///< leading dimension of D (and of aux)
  float beta = 0.0f;                ///< D = op(A) op(B) + beta D
  LtEpilogue epilogue = LtEpilogue::kDefault;  ///< what follows the product
  void* bias = nullptr;  ///< bias (kBias, kGeluAuxBias) or bias gradient (kBGradB)
  void* aux = nullptr;   ///< the GELU pre-activation (kGeluAuxBias)
  /// Run only with an algorithm that forms each element of D in one pass (no split-K), and
  /// report "no algorithm" otherwise: then beta D is added to the finished product and rounded
  /// once, exactly like storing the product and adding D afterwards. Set for the accumulation
  /// into a .grad (lt_linear_wgrad_gemm with beta != 0), whose result must not depend on the
  /// fusion. (A split-K algorithm adds D to partial sums, in another order: the likely cause of
  /// the last-bit differences an H100 showed for a float32 weight-gradient GEMM with k = 8192.)
  bool one_pass_only = false;
};

/// The forward GEMM of a linear layer: y [M, N] = x [M, K] W^T (+ b) for W [N, K], b [N], and
/// with `pre` defined ([M, N]) y = gelu(x W^T + b), pre = x W^T + b. x and w of one dtype (the
/// A/B type), y, b and pre of one dtype (the D type), all contiguous on one device. As a
/// column-major GEMM: D (N x M) = W (stored K x N, transposed) x^T (K x M, as stored), bias
/// along D's N rows. Throws tt::Error naming the tensors when shapes, dtypes or devices differ.
LtGemm lt_linear_forward_gemm(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                              const Tensor& pre);

/// The weight-gradient GEMM of a linear layer: dw [N, K] = dy^T x + beta dw for dy [M, N],
/// x [M, K], and with `db` defined ([N]) db = the column sums of dy in the same GEMM (kBGradB;
/// db is always overwritten). dy and x of one dtype, dw and db of one dtype, contiguous on one
/// device. beta = 1 accumulates into an existing gradient (gradient-accumulation fusion: dw is
/// the parameter's .grad, see Function::accumulation_target in tt/autograd.h); the epilogue adds
/// beta dw to the float32 accumulator and rounds once, the same rounding as storing the product
/// and adding dw afterwards, so with beta != 0 the GEMM runs only as one pass (one_pass_only).
/// As a column-major GEMM: D (K x N) = x^T (K x M, as stored) dy
/// (stored N x M, transposed); BGRADB sums op(B) = dy over k = M.
LtGemm lt_linear_wgrad_gemm(const Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& db,
                            double beta);

/// The GEMM out = a b + beta out of row-major 2-D views (chapter 07's "gemm" contract): out
/// [M, N] with unit column stride and row stride >= N (padded rows), a [M, K] and b [K, N] each
/// with rows or columns contiguous (a transposed view is read as stored). a and b of one dtype,
/// out of the same or float32 (float32 or bfloat16), on one device. As a column-major GEMM:
/// D = out^T (N x M) = b^T a^T. Throws tt::Error naming the tensors otherwise.
LtGemm lt_rowmajor_gemm(const Tensor& out, const Tensor& a, const Tensor& b, double beta);

/// Checks the operands of a linear-layer GEMM: x [M, K] and w [N, K] of one dtype (the A/B type:
/// float32 or bfloat16), out [M, N] and the optional `vec` [N] and `pre` [M, N] of one dtype
/// (the D type: float32 or bfloat16), all contiguous on one device. Returns {M, N, K}; throws
/// tt::Error naming `op` and the tensors otherwise.
std::tuple<int64_t, int64_t, int64_t> check_lt_operands(const char* op, const Tensor& x,
                                                        const Tensor& w, const Tensor& out,
                                                        const Tensor& vec, const Tensor& pre);

namespace cuda {

/// CUDA kernel "matmul_lt_gemm" (GemmKernel of tt/ops_matmul.h, alpha must be 1): out = a b +
/// beta out through cuBLASLt (lt_rowmajor_gemm), e.g. bfloat16 a and b into a float32 out.
/// Throws tt::Error naming the tensors when cuBLASLt has no algorithm.
void matmul_lt_gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta);

/// Runs `g` through cuBLASLt on CUDA device `device`'s stream (CUDA builds only). Returns false,
/// launching nothing, when cuBLASLt offers no algorithm for the problem (e.g. an aux leading
/// dimension that is not a multiple of 8), or with g.one_pass_only when its algorithm splits k.
/// The heuristic's answer is cached per problem.
bool run_lt(const LtGemm& g, int device);

}  // namespace cuda

}  // namespace tt
