/// @file cuda_sgemm.h
/// @brief The hand-written SGEMM kernels of chapter 07 at the raw-pointer level: what each
/// launcher computes and how it tiles the work. The registry-facing wrappers (MatmulKernel
/// signature) are in tt/cuda_matmul.h.
///
/// CUDA builds only (uses cudaStream_t).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tt::cuda {

/// One row-major float32 product on the device:
/// \f$ C_{ij} = \sum_{k<K} A_{ik} B_{kj} \f$ for \f$ i < M, j < N \f$, with A[i][k] at
/// a[i*lda + k], B[k][j] at b[k*ldb + j] and C[i][j] at c[i*ldc + j] (lda >= K, ldb >= N,
/// ldc >= N; M, N, K below 2^31). Every launcher accepts any sizes (edges are bounds-checked),
/// returns at once when M or N is 0, writes zeros when K is 0, and only queues work on `stream`.
struct SgemmArgs {
  int64_t m = 0;             ///< rows of A and C
  int64_t n = 0;             ///< columns of B and C
  int64_t k = 0;             ///< columns of A, rows of B
  const float* a = nullptr;  ///< A, M x K
  int64_t lda = 0;           ///< row stride of A
  const float* b = nullptr;  ///< B, K x N
  int64_t ldb = 0;           ///< row stride of B
  float* c = nullptr;        ///< C, M x N (overwritten)
  int64_t ldc = 0;           ///< row stride of C
};

/// The launcher type shared by the five SGEMMs.
using SgemmLauncher = void(const SgemmArgs& args, cudaStream_t stream);

/// One thread per C element, K-loop straight from global memory (given: the baseline).
void sgemm_naive(const SgemmArgs& args, cudaStream_t stream);
/// 32x32 thread blocks; each K step stages a 32x32 tile of A and of B in shared memory, so each
/// global element is read by one thread instead of 32 (exercise ch07.2).
void sgemm_tiled(const SgemmArgs& args, cudaStream_t stream);
/// 128x128 block tiles, BK = 8, 256 threads each computing an 8x8 register tile: 16 FMAs per
/// shared-memory load instead of 1 (exercise ch07.3).
void sgemm_regblock(const SgemmArgs& args, cudaStream_t stream);
/// regblock with float4 global and shared loads, double-buffered shared memory (one barrier per
/// K step, next tile's loads in flight during the math) and a padded, bank-conflict-free
/// transposed A tile (exercise ch07.4).
void sgemm_vec4(const SgemmArgs& args, cudaStream_t stream);
/// Warp-tiled (64x32 per warp, 8x8 per lane) 128x128x16 block tiles fed by a 3-stage cp.async
/// pipeline (given, not an exercise); launched only when M and N are multiples of 128, K of 16,
/// b and c 16-byte aligned and ldb, ldc multiples of 4, otherwise it calls sgemm_vec4.
void sgemm_warptile(const SgemmArgs& args, cudaStream_t stream);

}  // namespace tt::cuda
