// ============================================================================================
// YOUR EXERCISE FILE for chapter 07_cuda_matmul_adam. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch07
// Generated from solutions/07_cuda_matmul_adam/gemm_plan.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 07 exercise ch07.1: the row-major trick. cuBLAS is column-major (element (i, j) of an
// m x n matrix with leading dimension ld is at i + j*ld); our tensors are indexed row-major.
// Instead of copying or transposing anything, we reinterpret the memory: a row-major M x N
// matrix read column-major IS its transpose (N x M, ld = row stride). So C = A B is computed as
//   C^T = B^T A^T
// by one column-major GEMM whose first operand is our b and second our a. A transposed view
// (column-major memory) needs no copy either: it is read as itself and transposed with op T.
#include <algorithm>

#include "tt/cuda_matmul.h"
#include "tt/todo.h"

namespace tt::cuda {


GemmPlan plan_row_major_gemm(const MatrixLayout& a, const MatrixLayout& b,
                             const MatrixLayout& out) {
  TT_TODO("ch07.1",
          "plan_row_major_gemm: compute C^T = B^T A^T; the first BLAS operand is b, the second a; "
          "a row-major operand is read with op N and ld = row_stride, a column-major one with op T "
          "and ld = col_stride; m = N, n = M, k = K, ldc = out's row stride");
}

}  // namespace tt::cuda
