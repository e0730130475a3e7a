// ============================================================================================
// YOUR EXERCISE FILE for chapter 04_cpu_kernels. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch04
// Generated from solutions/04_cpu_kernels/matmul_kernels.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 04 exercises ch04.5 - ch04.7: three CPU matmul kernels, from the textbook triple loop
// to a cache-blocked kernel with a register micro-kernel, to Eigen's GEMM over the same buffers.
// MatmulGeometry (where each batch's matrices live) is given.
#include <algorithm>
#include <vector>

#include "tt/dispatcher.h"
#include "tt/eigen.h"
#include "tt/ops_matmul.h"
#include "tt/parallel.h"
#include "tt/todo.h"

namespace tt::cpu {
namespace {

/// Multiply-adds per parallel chunk of the naive kernel.
constexpr int64_t kMatmulGrain = 1 << 16;

/// Where the matrices of a batched matmul live (see MatmulKernel for the layout contract).
/// Element (i, k) of matrix p of a is at a.data_ptr() + a_off[p] + i * a_rs + k * a_cs;
/// likewise for b; out is contiguous, so element (i, j) of matrix p is at p*M*N + i*N + j.
struct MatmulGeometry {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  int64_t a_rs = 0, a_cs = 0, b_rs = 0, b_cs = 0;  ///< row and column strides of a and b
  std::vector<int64_t> a_off, b_off;               ///< offset of matrix p in a and in b

  MatmulGeometry(const Tensor& out, const Tensor& a, const Tensor& b)
      : M(out.size(-2)),
        N(out.size(-1)),
        K(a.size(-1)),
        a_rs(a.stride(-2)),
        a_cs(a.stride(-1)),
        b_rs(b.stride(-2)),
        b_cs(b.stride(-1)) {
    const Shape batch_shape(out.shape().begin(), out.shape().end() - 2);
    const Strides sa(a.strides().begin(), a.strides().end() - 2);
    const Strides sb(b.strides().begin(), b.strides().end() - 2);
    batch = shape_numel(batch_shape);
    a_off.resize(static_cast<std::size_t>(batch));
    b_off.resize(static_cast<std::size_t>(batch));
    if (batch > 0) strided_offsets(batch_shape, sa, sb, 0, batch, a_off.data(), b_off.data());
  }
};


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
TT_REGISTER_KERNEL("matmul", DeviceType::kCPU, matmul_eigen);

}  // namespace tt::cpu
