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

#if TT_SOLUTION
namespace {

/// How column-major BLAS must read operand `x` (rows x cols, row-major indexed) to obtain
/// x^T, the operand of the transposed product, without a copy.
struct TransposedView {
  GemmOp op;   ///< kN: the memory, read column-major, already is x^T; kT: it is x
  int64_t ld;  ///< leading dimension of the stored column-major matrix
};

TransposedView read_transposed(const MatrixLayout& x, const char* name) {
  if (x.col_stride == 1 && (x.row_stride >= x.cols || x.rows <= 1)) {
    // Row-major: read column-major it is x^T, cols x rows, one stored column per row of x.
    // With a single row the stride between rows is never used; BLAS wants ld >= stored rows.
    return {GemmOp::kN, std::max<int64_t>(1, x.rows <= 1 ? x.cols : x.row_stride)};
  }
  if (x.row_stride == 1 && (x.col_stride >= x.rows || x.cols <= 1)) {
    // Column-major (e.g. a transposed view): read column-major it is x itself; ask for op T.
    return {GemmOp::kT, std::max<int64_t>(1, x.cols <= 1 ? x.rows : x.col_stride)};
  }
  TT_THROW("matmul (cuBLAS plan): operand ", name, " of shape [", x.rows, ", ", x.cols,
           "] with strides [", x.row_stride, ", ", x.col_stride,
           "] is neither row-major nor column-major; make it contiguous first");
}

}  // namespace
#endif

GemmPlan plan_row_major_gemm(const MatrixLayout& a, const MatrixLayout& b,
                             const MatrixLayout& out) {
#if TT_SOLUTION
  TT_CHECK(b.rows == a.cols && out.rows == a.rows && out.cols == b.cols,
           "matmul (cuBLAS plan): cannot compute out [", out.rows, ", ", out.cols, "] = a [",
           a.rows, ", ", a.cols, "] @ b [", b.rows, ", ", b.cols, "]");
  TT_CHECK(out.col_stride == 1 && (out.row_stride >= out.cols || out.rows <= 1),
           "matmul (cuBLAS plan): out [", out.rows, ", ", out.cols,
           "] must be row-major, got strides [", out.row_stride, ", ", out.col_stride, "]");
  const TransposedView bt = read_transposed(b, "b");  // first BLAS operand: B^T (N x K)
  const TransposedView at = read_transposed(a, "a");  // second BLAS operand: A^T (K x M)
  GemmPlan plan;
  plan.transa = bt.op;
  plan.transb = at.op;
  plan.m = b.cols;  // C^T is N x M
  plan.n = a.rows;
  plan.k = a.cols;
  plan.lda = bt.ld;
  plan.ldb = at.ld;
  plan.ldc = std::max<int64_t>(1, out.rows <= 1 ? out.cols : out.row_stride);
  return plan;
#else
  TT_TODO("ch07.1",
          "plan_row_major_gemm: the column-major BLAS call that writes row-major out = a @ b in "
          "place, with no copy, for operands that are row-major or column-major (transposed "
          "views), padded, or a single row/column (ld >= 1 and >= stored rows); tt::Error for "
          "shapes that do not match, an out that is not row-major, or an operand that is neither");
#endif
}

}  // namespace tt::cuda
