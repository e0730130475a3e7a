// ============================================================================================
// YOUR EXERCISE FILE for chapter 11_mixed_precision. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch11
// Generated from solutions/11_mixed_precision/linear_bf16_gemm.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
  (void)dx;
  (void)dy;
  (void)w;
  TT_TODO("ch11.2",
          "lt_linear_dgrad_gemm: the LtGemm (column-major, cuBLASLt conventions) whose D is the "
          "row-major dx [M, K] = dy [M, N] W [N, K], A/B of dy's dtype, D of dx's dtype, no "
          "epilogue, beta 0");
}

}  // namespace tt
