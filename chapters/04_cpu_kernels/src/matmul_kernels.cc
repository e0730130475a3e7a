// ============================================================================================
// YOUR EXERCISE FILE for chapter 04_cpu_kernels. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch04
// Generated from solutions/04_cpu_kernels/matmul_kernels.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 04 exercises ch04.5 - ch04.7: three CPU matmul kernels, from the textbook triple loop
// to a cache-blocked kernel with a register micro-kernel, to Eigen's GEMM over the same buffers.
// MatmulGeometry (where each batch's matrices live, tt/cpu_gemm.h) is given.
#include <algorithm>
#include <vector>

#include "tt/cpu_gemm.h"
#include "tt/dispatcher.h"
#include "tt/eigen.h"
#include "tt/ops_matmul.h"
#include "tt/parallel.h"
#include "tt/todo.h"

namespace tt::cpu {
namespace {

/// Multiply-adds per parallel chunk of the naive kernel.
constexpr int64_t kMatmulGrain = 1 << 16;


}  // namespace

void matmul_naive(const Tensor& out, const Tensor& a, const Tensor& b) {
  TT_TODO(
      "ch04.5",
      "cpu::matmul_naive: out[p] = a[p] @ b[p] for every batch matrix p under the MatmulKernel contract (out contiguous [..., M, N]; each matrix of a and b row- or column-major; stride 0 on broadcast batch dims); any M, N, K >= 0");
}

void matmul_blocked(const Tensor& out, const Tensor& a, const Tensor& b) {
  TT_TODO(
      "ch04.6",
      "cpu::matmul_blocked: matmul_naive's result (any shapes; K = 0 gives zeros) computed cache-blocked, from packed panels by a register micro-kernel; the same bits for any thread count");
}

void matmul_eigen(const Tensor& out, const Tensor& a, const Tensor& b) {
  TT_TODO(
      "ch04.7",
      "cpu::matmul_eigen: matmul_naive's result computed by Eigen's GEMM reading a and b where they are (no copies); K = 0 gives zeros");
}

TT_REGISTER_KERNEL("matmul_naive", DeviceType::kCPU, matmul_naive);
TT_REGISTER_KERNEL("matmul_blocked", DeviceType::kCPU, matmul_blocked);
TT_REGISTER_KERNEL("matmul_eigen", DeviceType::kCPU, matmul_eigen);

}  // namespace tt::cpu
