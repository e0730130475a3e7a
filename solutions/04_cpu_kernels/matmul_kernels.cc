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

#if TT_SOLUTION
// ----- blocked kernel: block sizes and the micro-kernel ---------------------------------------
//
// C is cut into MC x NC tiles (one parallel task each); K into KC slices. For each slice the
// task packs its A block (MC x KC, in MR-row panels) and B block (KC x NC, in NR-column panels)
// into contiguous buffers, then the micro-kernel computes each MR x NR piece of C with its
// accumulators in registers, streaming one column of the A panel and one row of the B panel
// per k. Sizes: an A panel (MR*KC) and a B panel (KC*NR) fit in L1, the B block in L2.
constexpr int64_t kMC = 72, kKC = 256, kNC = 256;
constexpr int kMR = 6;
template <typename T>
constexpr int kNR = 64 / sizeof(T);  // 16 floats or 8 doubles: two or four AVX2 registers

/// Packs rows [i0, i0+mc) x cols [k0, k0+kc) of A into MR-row panels, zero-padding the last.
template <typename T>
void pack_a(const T* a, int64_t rs, int64_t cs, int64_t mc, int64_t kc, T* dst) {
  for (int64_t ip = 0; ip < mc; ip += kMR) {
    for (int64_t k = 0; k < kc; ++k) {
      for (int ii = 0; ii < kMR; ++ii) {
        *dst++ = ip + ii < mc ? a[(ip + ii) * rs + k * cs] : T(0);
      }
    }
  }
}

/// Packs rows [k0, k0+kc) x cols [j0, j0+nc) of B into NR-column panels, zero-padding the last.
template <typename T>
void pack_b(const T* b, int64_t rs, int64_t cs, int64_t kc, int64_t nc, T* dst) {
  for (int64_t jp = 0; jp < nc; jp += kNR<T>) {
    for (int64_t k = 0; k < kc; ++k) {
      for (int jj = 0; jj < kNR<T>; ++jj) {
        *dst++ = jp + jj < nc ? b[k * rs + (jp + jj) * cs] : T(0);
      }
    }
  }
}

/// acc = sum over k < kc of (A panel column k) x (B panel row k): an MR x NR outer product per
/// k, kept in registers (the fixed-size loops unroll and vectorize over NR).
template <typename T>
void micro_kernel(int64_t kc, const T* __restrict ap, const T* __restrict bp,
                  T (&acc)[kMR][kNR<T>]) {
  for (int i = 0; i < kMR; ++i) {
    for (int j = 0; j < kNR<T>; ++j) acc[i][j] = T(0);
  }
  for (int64_t k = 0; k < kc; ++k) {
#pragma GCC unroll 8
    for (int i = 0; i < kMR; ++i) {
      const T ai = ap[k * kMR + i];
#pragma GCC unroll 16
      for (int j = 0; j < kNR<T>; ++j) acc[i][j] += ai * bp[k * kNR<T> + j];
    }
  }
}
#endif

}  // namespace

void matmul_naive(const Tensor& out, const Tensor& a, const Tensor& b) {
#if TT_SOLUTION
  dispatch_floating(out.dtype(), "matmul_naive", [&]<typename T>() {
    const MatmulGeometry g(out, a, b);
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
    T* pc = static_cast<T*>(out.data_ptr());
    if (g.K == 0) {  // a and b may have no storage: no pointer arithmetic on them
      std::fill(pc, pc + out.numel(), T(0));
      return;
    }
    const int64_t grain = std::max<int64_t>(1, kMatmulGrain / std::max<int64_t>(1, g.N * g.K));
    // One task per output row; each dot product runs k = 0, 1, ..., K-1.
    parallel_for(0, g.batch * g.M, grain, [&](int64_t rb, int64_t re) {
      for (int64_t row = rb; row < re; ++row) {
        const int64_t p = row / g.M, i = row % g.M;
        const T* ai = pa + g.a_off[p] + i * g.a_rs;
        const T* bm = pb + g.b_off[p];
        T* ci = pc + row * g.N;
        for (int64_t j = 0; j < g.N; ++j) {
          T acc = 0;
          for (int64_t k = 0; k < g.K; ++k) acc += ai[k * g.a_cs] * bm[k * g.b_rs + j * g.b_cs];
          ci[j] = acc;
        }
      }
    });
  });
#else
  TT_TODO(
      "ch04.5",
      "cpu::matmul_naive: out[p] = a[p] @ b[p] for every batch matrix p under the MatmulKernel contract (out contiguous [..., M, N]; each matrix of a and b row- or column-major; stride 0 on broadcast batch dims); any M, N, K >= 0");
#endif
}

void matmul_blocked(const Tensor& out, const Tensor& a, const Tensor& b) {
#if TT_SOLUTION
  dispatch_floating(out.dtype(), "matmul_blocked", [&]<typename T>() {
    constexpr int64_t NR = kNR<T>;
    const MatmulGeometry g(out, a, b);
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
    T* pc = static_cast<T*>(out.data_ptr());
    if (g.K == 0) {
      std::fill(pc, pc + out.numel(), T(0));
      return;
    }
    const int64_t n_ib = (g.M + kMC - 1) / kMC, n_jb = (g.N + kNC - 1) / kNC;
    // One task per (batch, MC x NC tile of C): tiles never share output, and each output's
    // K slices are added in order, so the result does not depend on the thread count.
    parallel_for(0, g.batch * n_ib * n_jb, 1, [&](int64_t tb, int64_t te) {
      std::vector<T> a_pack(static_cast<std::size_t>((kMC + kMR) * kKC));
      std::vector<T> b_pack(static_cast<std::size_t>(kKC * (kNC + NR)));
      for (int64_t t = tb; t < te; ++t) {
        const int64_t p = t / (n_ib * n_jb);
        const int64_t i0 = (t / n_jb) % n_ib * kMC, j0 = t % n_jb * kNC;
        const int64_t mc = std::min(kMC, g.M - i0), nc = std::min(kNC, g.N - j0);
        for (int64_t k0 = 0; k0 < g.K; k0 += kKC) {
          const int64_t kc = std::min(kKC, g.K - k0);
          pack_a(pa + g.a_off[p] + i0 * g.a_rs + k0 * g.a_cs, g.a_rs, g.a_cs, mc, kc,
                 a_pack.data());
          pack_b(pb + g.b_off[p] + k0 * g.b_rs + j0 * g.b_cs, g.b_rs, g.b_cs, kc, nc,
                 b_pack.data());
          for (int64_t jr = 0; jr < nc; jr += NR) {
            for (int64_t ir = 0; ir < mc; ir += kMR) {
              T acc[kMR][NR];
              micro_kernel<T>(kc, a_pack.data() + ir * kc, b_pack.data() + jr * kc, acc);
              // Write the valid part of the MR x NR piece: first slice stores, later ones add.
              for (int64_t i = 0; i < std::min<int64_t>(kMR, mc - ir); ++i) {
                T* c = pc + (p * g.M + i0 + ir + i) * g.N + j0 + jr;
                const int64_t n = std::min<int64_t>(NR, nc - jr);
                for (int64_t j = 0; j < n; ++j) c[j] = k0 == 0 ? acc[i][j] : c[j] + acc[i][j];
              }
            }
          }
        }
      }
    });
  });
#else
  TT_TODO(
      "ch04.6",
      "cpu::matmul_blocked: matmul_naive's result (any shapes; K = 0 gives zeros) computed cache-blocked, from packed panels by a register micro-kernel; the same bits for any thread count");
#endif
}

void matmul_eigen(const Tensor& out, const Tensor& a, const Tensor& b) {
#if TT_SOLUTION
  dispatch_floating(out.dtype(), "matmul_eigen", [&]<typename T>() {
    using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
    using Stride = Eigen::OuterStride<>;
    const MatmulGeometry g(out, a, b);
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
    T* pc = static_cast<T*>(out.data_ptr());
    if (g.M == 0 || g.N == 0) return;
    if (g.K == 0) {
      std::fill(pc, pc + out.numel(), T(0));
      return;
    }
    // Calls f with an Eigen view of a (rows x cols) matrix: row-major when its columns are
    // adjacent (cs == 1), otherwise column-major (rs == 1, the contract of MatmulKernel).
    auto with_map = [](const T* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, auto&& f) {
      if (cs == 1 && (rs >= cols || rows == 1)) {
        f(Eigen::Map<const RowMajor, Eigen::Unaligned, Stride>(p, rows, cols,
                                                               Stride(std::max(rs, cols))));
      } else {
        f(Eigen::Map<const ColMajor, Eigen::Unaligned, Stride>(p, rows, cols,
                                                               Stride(std::max(cs, rows))));
      }
    };
    auto one = [&](int64_t p) {
      Eigen::Map<RowMajor> C(pc + p * g.M * g.N, g.M, g.N);
      with_map(pa + g.a_off[p], g.M, g.K, g.a_rs, g.a_cs, [&](const auto& A) {
        with_map(pb + g.b_off[p], g.K, g.N, g.b_rs, g.b_cs,
                 [&](const auto& B) { C.noalias() = A * B; });
      });
    };
    if (g.batch == 1) {
      one(0);  // Eigen parallelizes one large GEMM itself (Eigen::nbThreads() threads)
    } else {
      // Many matrices: one per task; inside a parallel region Eigen runs single-threaded.
      parallel_for(0, g.batch, 1, [&](int64_t pb0, int64_t pe) {
        for (int64_t p = pb0; p < pe; ++p) one(p);
      });
    }
  });
#else
  TT_TODO(
      "ch04.7",
      "cpu::matmul_eigen: matmul_naive's result computed by Eigen's GEMM reading a and b where they are (no copies); K = 0 gives zeros");
#endif
}

TT_REGISTER_KERNEL("matmul_naive", DeviceType::kCPU, matmul_naive);
TT_REGISTER_KERNEL("matmul_blocked", DeviceType::kCPU, matmul_blocked);
TT_REGISTER_KERNEL("matmul_eigen", DeviceType::kCPU, matmul_eigen);

}  // namespace tt::cpu
