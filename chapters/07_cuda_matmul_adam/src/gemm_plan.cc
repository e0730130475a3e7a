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
          "plan_row_major_gemm: the column-major BLAS call that writes row-major out = a @ b in "
          "place, with no copy, for operands that are row-major or column-major (transposed "
          "views), padded, or a single row/column (ld >= 1 and >= stored rows); tt::Error for "
          "shapes that do not match, an out that is not row-major, or an operand that is neither");
}

}  // namespace tt::cuda
