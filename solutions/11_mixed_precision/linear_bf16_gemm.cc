// Exercise ch11.2: the cuBLASLt descriptor of a linear layer's input gradient, dx = dy W.
//
// cuBLASLt, like every BLAS, is column-major; our tensors are row-major. A row-major [R, C]
// tensor is the column-major C x R matrix with leading dimension C, so a row-major product
// P = Q S is the column-major P^T = S^T Q^T: swap the operands and keep them as stored. The CPU
// emulation (cpu::run_lt) and cuBLASLt (cuda::run_lt) run the same description, so the tests of
// this function run without a GPU too.
#include "tt/linear_bf16.h"
#include "tt/todo.h"

namespace tt {

LtGemm lt_linear_dgrad_gemm(const Tensor& dx, const Tensor& dy, const Tensor& w) {
#if TT_SOLUTION
  const int64_t M = dy.size(0), N = dy.size(1), K = w.size(1);
  // dx^T (K x M) = W^T (K x N) dy^T (N x M). Row-major W [N, K] is the column-major K x N
  // matrix W^T with ld K, row-major dy [M, N] the column-major N x M matrix dy^T with ld N:
  // both are used as stored, and D = dx^T is row-major dx [M, K] with ld K.
  return LtGemm{.trans_a = false,
                .trans_b = false,
                .m = K,
                .n = M,
                .k = N,
                .ab_type = dy.dtype(),
                .a = w.data_ptr(),
                .lda = K,
                .b = dy.data_ptr(),
                .ldb = N,
                .d_type = dx.dtype(),
                .d = dx.data_ptr(),
                .ldd = K};
#else
  (void)dx;
  (void)dy;
  (void)w;
  TT_TODO("ch11.2",
          "lt_linear_dgrad_gemm: the LtGemm (column-major, cuBLASLt conventions) whose D is the "
          "row-major dx [M, K] = dy [M, N] W [N, K], A/B of dy's dtype, D of dx's dtype, no "
          "epilogue, beta 0");
#endif
}

}  // namespace tt
