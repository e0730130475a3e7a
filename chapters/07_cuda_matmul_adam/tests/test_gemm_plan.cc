// Exercise ch07.1: the row-major trick, checked on the CPU. A tiny column-major BLAS GEMM
// (reference_blas_gemm, written from the cuBLAS documentation) runs each plan on the raw
// buffers, and the result must equal the row-major product computed by direct indexing, for
// row-major, padded and transposed (column-major) operands of many shapes. No GPU needed.
#include <string>
#include <vector>

#include "tt/cuda_matmul.h"
#include "tt/testing.h"

namespace tt {
namespace {

using cuda::GemmOp;
using cuda::GemmPlan;
using cuda::MatrixLayout;
using cuda::plan_row_major_gemm;

/// cublasSgemm's semantics in double: C' = op(A') op(B') with column-major storage,
/// element (i, j) of a stored matrix at i + j*ld.
void reference_blas_gemm(const GemmPlan& p, const std::vector<double>& A,
                         const std::vector<double>& B, std::vector<double>& C) {
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < p.k; ++l) {
        const double a = p.transa == GemmOp::kN ? A.at(i + l * p.lda) : A.at(l + i * p.lda);
        const double b = p.transb == GemmOp::kN ? B.at(l + j * p.ldb) : B.at(j + l * p.ldb);
        acc += a * b;
      }
      C.at(i + j * p.ldc) = acc;
    }
  }
}

/// A rows x cols operand stored row-major (pad extra elements per row) or column-major (pad
/// extra elements per column, i.e. the memory of a transposed view of a padded matrix).
struct Operand {
  MatrixLayout layout;
  std::vector<double> data;
  double at(int64_t i, int64_t j) const {
    return data.at(i * layout.row_stride + j * layout.col_stride);
  }
};

Operand make_operand(int64_t rows, int64_t cols, bool col_major, int64_t pad, double seed) {
  Operand op;
  op.layout =
      col_major ? MatrixLayout{rows, cols, 1, rows + pad} : MatrixLayout{rows, cols, cols + pad, 1};
  const int64_t outer = col_major ? cols : rows, ld = col_major ? rows + pad : cols + pad;
  op.data.assign(static_cast<std::size_t>(std::max<int64_t>(1, outer * ld)), -999.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      op.data.at(i * op.layout.row_stride + j * op.layout.col_stride) =
          seed + static_cast<double>(3 * i - 2 * j) / 7.0;
    }
  }
  return op;
}

std::string describe(const MatrixLayout& l) {
  return detail::str("[", l.rows, ", ", l.cols, "] strides [", l.row_stride, ", ", l.col_stride,
                     "]");
}

// Runs the plan of out = a @ b through the reference BLAS and compares with direct indexing.
void check_product(const Operand& a, const Operand& b, int64_t out_pad) {
  const int64_t M = a.layout.rows, K = a.layout.cols, N = b.layout.cols;
  const MatrixLayout out{M, N, N + out_pad, 1};
  SCOPED_TRACE("a " + describe(a.layout) + ", b " + describe(b.layout) + ", out " + describe(out));
  const GemmPlan plan = plan_row_major_gemm(a.layout, b.layout, out);
  SCOPED_TRACE("plan: " + cuda::to_string(plan));
  // BLAS's minimums (cuBLAS returns CUBLAS_STATUS_INVALID_VALUE otherwise).
  EXPECT_EQ(plan.m, N);
  EXPECT_EQ(plan.n, M);
  EXPECT_EQ(plan.k, K);
  EXPECT_GE(plan.lda, std::max<int64_t>(1, plan.transa == GemmOp::kN ? plan.m : plan.k));
  EXPECT_GE(plan.ldb, std::max<int64_t>(1, plan.transb == GemmOp::kN ? plan.k : plan.n));
  EXPECT_GE(plan.ldc, std::max<int64_t>(1, plan.m));
  std::vector<double> c(static_cast<std::size_t>(std::max<int64_t>(1, M * (N + out_pad))), -1.0);
  reference_blas_gemm(plan, b.data, a.data, c);  // first BLAS operand: b, second: a
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double expected = 0;
      for (int64_t l = 0; l < K; ++l) expected += a.at(i, l) * b.at(l, j);
      ASSERT_NEAR(c.at(i * out.row_stride + j), expected, 1e-9)
          << "at out(" << i << ", " << j << ")";
    }
  }
}

using Ch07_1_GemmPlan = ::testing::Test;

TEST_F(Ch07_1_GemmPlan, RowMajorOperandsNeedNoTranspose) {
  // out[M=2, N=5] = a[2, 3] @ b[3, 5], all contiguous: C^T = B^T A^T with op N, N.
  const GemmPlan p = plan_row_major_gemm({2, 3, 3, 1}, {3, 5, 5, 1}, {2, 5, 5, 1});
  EXPECT_EQ(p.transa, GemmOp::kN) << cuda::to_string(p);
  EXPECT_EQ(p.transb, GemmOp::kN) << cuda::to_string(p);
  EXPECT_EQ(p.m, 5);
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(p.k, 3);
  EXPECT_EQ(p.lda, 5) << "lda is b's row stride (b read column-major is b^T, 5 x 3)";
  EXPECT_EQ(p.ldb, 3) << "ldb is a's row stride (a read column-major is a^T, 3 x 2)";
  EXPECT_EQ(p.ldc, 5);
}

TEST_F(Ch07_1_GemmPlan, TransposedViewsUseOpT) {
  // a = x^T for a contiguous x [3, 2]: shape [2, 3], strides [1, 2] (column-major).
  // b = y^T for a contiguous y [5, 3]: shape [3, 5], strides [1, 3].
  const GemmPlan p = plan_row_major_gemm({2, 3, 1, 2}, {3, 5, 1, 3}, {2, 5, 5, 1});
  EXPECT_EQ(p.transa, GemmOp::kT) << cuda::to_string(p);
  EXPECT_EQ(p.transb, GemmOp::kT) << cuda::to_string(p);
  EXPECT_EQ(p.lda, 3) << "b's column stride";
  EXPECT_EQ(p.ldb, 2) << "a's column stride";
  EXPECT_EQ(p.ldc, 5);
}

TEST_F(Ch07_1_GemmPlan, PaddedRowsKeepTheirStride) {
  // Slices of wider matrices: a [4, 3] with row stride 8, out [4, 6] with row stride 10.
  const GemmPlan p = plan_row_major_gemm({4, 3, 8, 1}, {3, 6, 6, 1}, {4, 6, 10, 1});
  EXPECT_EQ(p.ldb, 8) << cuda::to_string(p);
  EXPECT_EQ(p.ldc, 10) << cuda::to_string(p);
}

TEST_F(Ch07_1_GemmPlan, MatchesReferenceGemmForAllLayouts) {
  const int64_t sizes[][3] = {{3, 4, 5}, {1, 4, 5}, {3, 1, 5}, {3, 4, 1}, {1, 1, 1}, {6, 2, 7}};
  for (const auto& s : sizes) {
    const int64_t M = s[0], K = s[1], N = s[2];
    for (int a_layout = 0; a_layout < 4; ++a_layout) {
      for (int b_layout = 0; b_layout < 4; ++b_layout) {
        // layout bit 0: column-major; bit 1: padded by 2 elements per row/column
        const Operand a = make_operand(M, K, a_layout & 1, a_layout & 2 ? 2 : 0, 0.5);
        const Operand b = make_operand(K, N, b_layout & 1, b_layout & 2 ? 2 : 0, -0.25);
        check_product(a, b, (a_layout + b_layout) % 2 ? 3 : 0);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_F(Ch07_1_GemmPlan, SingleRowOrColumnGetsMinimalLd) {
  // a = [1, 4] whose row stride is meaningless (1 row), here 1: read as row-major [1, 4],
  // its column-major view is 4 x 1 and BLAS wants ld >= 4.
  const GemmPlan p = plan_row_major_gemm({1, 4, 1, 1}, {4, 3, 3, 1}, {1, 3, 3, 1});
  EXPECT_EQ(p.transb, GemmOp::kN) << cuda::to_string(p);
  EXPECT_EQ(p.ldb, 4) << cuda::to_string(p);
  // b = [4, 1] stored with column stride 0 (e.g. produced by expand of one column): the
  // column-major view is 4 x 1 with ld >= 4.
  const GemmPlan q = plan_row_major_gemm({2, 4, 4, 1}, {4, 1, 1, 0}, {2, 1, 1, 1});
  EXPECT_EQ(q.transa, GemmOp::kT) << cuda::to_string(q);
  EXPECT_EQ(q.lda, 4) << cuda::to_string(q);
  EXPECT_EQ(q.ldc, 1) << cuda::to_string(q);
}

TEST_F(Ch07_1_GemmPlan, RejectsLayoutsBlasCannotRead) {
  // Every second element of every second row: neither stride is 1.
  EXPECT_TT_ERROR(plan_row_major_gemm({2, 3, 6, 2}, {3, 5, 5, 1}, {2, 5, 5, 1}), "operand a",
                  "[2, 3]", "strides [6, 2]");
  // Overlapping rows (a broadcast row expanded to 3 rows).
  EXPECT_TT_ERROR(plan_row_major_gemm({2, 3, 3, 1}, {3, 5, 0, 1}, {2, 5, 5, 1}), "operand b",
                  "strides [0, 1]");
  EXPECT_TT_ERROR(plan_row_major_gemm({2, 3, 3, 1}, {4, 5, 5, 1}, {2, 5, 5, 1}), "cannot compute");
  EXPECT_TT_ERROR(plan_row_major_gemm({2, 3, 3, 1}, {3, 5, 5, 1}, {2, 5, 1, 2}), "out",
                  "row-major");
}

}  // namespace
}  // namespace tt
