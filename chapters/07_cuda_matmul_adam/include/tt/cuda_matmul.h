/// @file cuda_matmul.h
/// @brief Matrix multiplication on CUDA: cuBLAS behind the registry name "matmul" (with the
/// row-major trick), a TF32 switch, and five hand-written SGEMM kernels for learning.
///
/// This header needs no CUDA headers, so CPU-only builds can include it: the planning function
/// (plan_row_major_gemm) and the TF32 switch exist in every build; the kernels exist only in
/// CUDA builds (TT_WITH_CUDA) and are normally reached through the registry:
///
/// | kernel name | device | function | what it is |
/// |---|---|---|---|
/// | "matmul" | kCUDA | cuda::matmul_cublas | cuBLAS strided-batched GEMM (f32, f64) |
/// | "matmul_cublas" | kCUDA | cuda::matmul_cublas | the same, by an explicit name |
/// | "gemm" | kCUDA | cuda::gemm_cublas | out = alpha a b + beta out, out rows padded (GemmKernel) |
/// | "matmul_cuda_naive" | kCUDA | cuda::matmul_naive | one thread per output element |
/// | "matmul_cuda_tiled" | kCUDA | cuda::matmul_tiled | 32x32 shared-memory tiles (ch07.2) |
/// | "matmul_cuda_regblock" | kCUDA | cuda::matmul_regblock | 128x128 tiles, 8x8 per thread (ch07.3) |
/// | "matmul_cuda_vec4" | kCUDA | cuda::matmul_vec4 | + float4 loads, double buffering (ch07.4) |
/// | "matmul_cuda_warptile" | kCUDA | cuda::matmul_warptile | warp tiles, cp.async pipeline (given) |
///
/// All of them have chapter 04's MatmulKernel signature, so `tt::matmul` and its backward (which
/// multiplies transposed views) run on CUDA tensors unchanged.
#pragma once

#include <cstdint>
#include <string>

#include "tt/tensor.h"

namespace tt::cuda {

// ----- TF32 -----------------------------------------------------------------------------------

/// Allows (true) or forbids (false, the default, as in PyTorch) TensorFloat-32 tensor-core math
/// in float32 cuBLAS GEMMs issued after this call. TF32 rounds each input to a 10-bit mantissa
/// (relative error about \f$ 2^{-11} \approx 4.9 \times 10^{-4} \f$ per input, products still
/// accumulated in fp32): several times faster, but a K=1024 dot product of unit-size values
/// then typically differs from the fp32 result by about 1e-3 instead of 1e-5. Exactness tests
/// keep it off. Thread-safe; affects every device.
void set_allow_tf32(bool allow);
/// True when float32 cuBLAS GEMMs may use TF32 (see set_allow_tf32).
bool allow_tf32();

/// Sets TF32 for the lifetime of the guard and restores the previous setting afterwards.
class AllowTf32Guard {
 public:
  /// Switches TF32 to `allow`.
  explicit AllowTf32Guard(bool allow) : previous_(allow_tf32()) { set_allow_tf32(allow); }
  /// Restores the setting found at construction.
  ~AllowTf32Guard() { set_allow_tf32(previous_); }
  AllowTf32Guard(const AllowTf32Guard&) = delete;
  AllowTf32Guard& operator=(const AllowTf32Guard&) = delete;

 private:
  bool previous_;
};

// ----- the row-major trick (exercise ch07.1) -----------------------------------------------------

/// A matrix operand flag of column-major BLAS: use the stored matrix as is, or its transpose
/// (cuBLAS's CUBLAS_OP_N / CUBLAS_OP_T).
enum class GemmOp { kN, kT };

/// Where a row-major-indexed matrix lives: element (i, j) is at i*row_stride + j*col_stride
/// elements from its first element. Built from a tensor's last two dims.
struct MatrixLayout {
  int64_t rows = 0;        ///< size(-2)
  int64_t cols = 0;        ///< size(-1)
  int64_t row_stride = 0;  ///< stride(-2)
  int64_t col_stride = 0;  ///< stride(-1)
};

/// The last two dims of `t` as a MatrixLayout.
MatrixLayout matrix_layout(const Tensor& t);

/// The arguments of one column-major BLAS call `C' = op(A') * op(B')` (cublasSgemm order) that
/// computes the row-major product out = a @ b. Column-major BLAS sees the row-major
/// \f$ C \in \mathbb{R}^{M \times N} \f$ as \f$ C^\top \f$, so the call computes
/// \f$ C^\top = B^\top A^\top \f$: **the first BLAS operand A' is our b and the second B' is our
/// a**, m = N, n = M, k = K.
struct GemmPlan {
  GemmOp transa = GemmOp::kN;  ///< op applied to A' (= our b)
  GemmOp transb = GemmOp::kN;  ///< op applied to B' (= our a)
  int64_t m = 0;               ///< rows of op(A') and of C' = N (columns of out)
  int64_t n = 0;               ///< columns of op(B') and of C' = M (rows of out)
  int64_t k = 0;               ///< the shared dimension K
  int64_t lda = 0;             ///< leading dimension of A' as stored (our b)
  int64_t ldb = 0;             ///< leading dimension of B' as stored (our a)
  int64_t ldc = 0;             ///< leading dimension of C' (= out's row stride)
};

/// Plans out = a @ b (a: M x K, b: K x N, out: M x N) as one column-major BLAS call, without
/// copies (exercise ch07.1). A row-major operand (col_stride == 1, row_stride >= cols) is, read
/// column-major, already its own transpose (op N, ld = row_stride); a column-major one
/// (row_stride == 1, col_stride >= rows), e.g. a transposed view, needs op T with
/// ld = col_stride. When the stored matrix has a single column its ld is never used and is set
/// to max(1, stored rows), the minimum BLAS accepts. `out` must be row-major.
/// Throws tt::Error naming the operand, its shape and strides when a layout is neither, when
/// out is not row-major, or when the sizes do not match.
GemmPlan plan_row_major_gemm(const MatrixLayout& a, const MatrixLayout& b, const MatrixLayout& out);

/// "transa=N transb=T m=.. n=.. k=.. lda=.. ldb=.. ldc=.." (for error messages and tests).
std::string to_string(const GemmPlan& plan);

// ----- kernels (CUDA builds only) ----------------------------------------------------------------

/// CUDA kernel "matmul" (and "matmul_cublas"): chapter 04's MatmulKernel contract (out
/// contiguous [batch..., M, N]; a, b with out's batch dims, stride 0 where broadcast; each matrix
/// row- or column-major) on float32 or float64. One cublasGemmStridedBatchedEx call per group of
/// batch dims that collapses to a single stride (one call for ordinary and broadcast batches),
/// on the device's cuBLAS handle and stream; float32 uses TF32 only when allow_tf32().
void matmul_cublas(const Tensor& out, const Tensor& a, const Tensor& b);

/// CUDA kernel "gemm" (GemmKernel of tt/ops_matmul.h): out = alpha * (a @ b) + beta * out, 2-D,
/// float32 or float64, where out may be a view with padded rows (stride(-2) >= size(-1)): the
/// row stride becomes cuBLAS's ldc, so a [rows, V] view of an [rows, Vp] buffer is written in
/// place. Same planning, handle and TF32 switch as matmul_cublas. Pad row strides to a multiple
/// of 64 floats (256 bytes): with an odd ld, TF32 GEMMs run several times slower on an H100.
void gemm_cublas(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta);

/// CUDA kernel "matmul_cuda_naive": one thread per element of out, float32. Operands that are
/// not row-major are copied to contiguous temporaries first (true of all five SGEMMs below).
void matmul_naive(const Tensor& out, const Tensor& a, const Tensor& b);
/// CUDA kernel "matmul_cuda_tiled": 32x32 tiles of A and B staged in shared memory (ch07.2).
void matmul_tiled(const Tensor& out, const Tensor& a, const Tensor& b);
/// CUDA kernel "matmul_cuda_regblock": 128x128 block tiles, 8x8 outputs per thread (ch07.3).
void matmul_regblock(const Tensor& out, const Tensor& a, const Tensor& b);
/// CUDA kernel "matmul_cuda_vec4": regblock + float4 loads, double-buffered shared memory and a
/// bank-conflict-free transposed A tile (ch07.4).
void matmul_vec4(const Tensor& out, const Tensor& a, const Tensor& b);
/// CUDA kernel "matmul_cuda_warptile" (given): 64x32 warp tiles in 128x128x16 block tiles fed by
/// a 3-stage cp.async pipeline, where M and N are multiples of 128, K of 16 and the rows of b
/// and out 16-byte aligned; any other problem runs matmul_vec4's kernel (cuda::sgemm_warptile).
void matmul_warptile(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace tt::cuda
