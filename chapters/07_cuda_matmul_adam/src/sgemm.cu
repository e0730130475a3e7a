// ============================================================================================
// YOUR EXERCISE FILE for chapter 07_cuda_matmul_adam. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch07
// Generated from solutions/07_cuda_matmul_adam/sgemm.cu by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 07 exercises ch07.2 - ch07.4: hand-written SGEMM, step by step, from the naive kernel
// (given) to shared-memory tiles, register blocking and vectorized, double-buffered loads.
// Each step is benchmarked against cuBLAS in benchmarks/bench_cuda_matmul.cc; the chapter text
// explains why each one is faster (arithmetic intensity per level of the memory hierarchy).
//
// All kernels: row-major C[M x N] = A[M x K] B[K x N] (see SgemmArgs), any M, N, K.
#include <algorithm>
#include <climits>
#include <vector>

#include "tt/cuda_device.h"
#include "tt/cuda_matmul.h"
#include "tt/cuda_sgemm.h"
#include "tt/dispatcher.h"
#include "tt/todo.h"

namespace tt::cuda {
namespace {

unsigned ceil_div(int64_t x, int64_t d) {
  return static_cast<unsigned>((x + d - 1) / d);
}

// ----- naive (given) --------------------------------------------------------------------------
// threadIdx.x walks the columns, so a warp reads 32 consecutive floats of a B row and writes 32
// consecutive floats of C (coalesced), while all its threads read the same A element
// (a broadcast). Every multiply-add still needs two loads from L1/L2: about 0.25 flop per
// byte, far below what the FMA units could do per byte of bandwidth.
constexpr int kNaiveX = 32, kNaiveY = 8;

__global__ void sgemm_naive_kernel(int M, int N, int K, const float* __restrict__ A, int64_t lda,
                                   const float* __restrict__ B, int64_t ldb, float* __restrict__ C,
                                   int64_t ldc) {
  const int col = blockIdx.x * kNaiveX + threadIdx.x;
  const int row = blockIdx.y * kNaiveY + threadIdx.y;
  if (row >= M || col >= N) return;
  const float* a = A + row * lda;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += a[k] * B[k * ldb + col];
  C[row * ldc + col] = acc;
}


bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

// ----- launchers ------------------------------------------------------------------------------

void sgemm_naive(const SgemmArgs& p, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0) return;
  const dim3 block(kNaiveX, kNaiveY), grid(ceil_div(p.n, kNaiveX), ceil_div(p.m, kNaiveY));
  sgemm_naive_kernel<<<grid, block, 0, stream>>>(static_cast<int>(p.m), static_cast<int>(p.n),
                                                 static_cast<int>(p.k), p.a, p.lda, p.b, p.ldb, p.c,
                                                 p.ldc);
  TT_CUDA_CHECK_LAUNCH("sgemm_naive_kernel");
}

void sgemm_tiled(const SgemmArgs& p, cudaStream_t stream) {
  TT_TODO("ch07.2",
          "shared-memory tiled SGEMM: 32x32 blocks; per K step load one element of the A and B "
          "tiles each (0 outside the matrix), __syncthreads, 32 FMAs from shared memory, "
          "__syncthreads; return early when M or N is 0");
}

void sgemm_regblock(const SgemmArgs& p, cudaStream_t stream) {
  TT_TODO("ch07.3",
          "register-blocked SGEMM: 128x128 block tiles, BK = 8, 256 threads each accumulating an "
          "8x8 tile in registers (acc[8][8]); per k load 8 A and 8 B values from shared memory "
          "into registers and do 64 FMAs; return early when M or N is 0");
}

void sgemm_vec4(const SgemmArgs& p, cudaStream_t stream) {
  TT_TODO("ch07.4",
          "vectorized SGEMM: regblock with float4 global loads (scalar at the edges or when rows "
          "are not 16-byte aligned), the A tile stored transposed with rows padded to 132 floats, "
          "float4 shared loads, two shared buffers and one __syncthreads per K step");
}

// ----- MatmulKernel wrappers (given) -----------------------------------------------------------

namespace {

/// Validates a MatmulKernel call for the float32 SGEMMs, makes non-row-major operands
/// contiguous, and runs `launch` once per matrix of the batch on the device's stream.
void run_sgemm(const Tensor& out, const Tensor& a_in, const Tensor& b_in, const char* name,
               SgemmLauncher* launch) {
  TT_CHECK(out.device().is_cuda() && a_in.device() == out.device() && b_in.device() == out.device(),
           name, ": expected out, a and b on one CUDA device, got ", out.describe(), ", ",
           a_in.describe(), ", ", b_in.describe());
  TT_CHECK(out.dtype() == DType::kFloat32 && a_in.dtype() == DType::kFloat32 &&
               b_in.dtype() == DType::kFloat32,
           name, ": hand-written SGEMM supports float32 only, got ", out.describe(), ", ",
           a_in.describe(), ", ", b_in.describe(), " (use \"matmul\" (cuBLAS) for float64)");
  TT_CHECK(out.dim() >= 2 && a_in.dim() == out.dim() && b_in.dim() == out.dim() &&
               out.is_contiguous() && a_in.size(-2) == out.size(-2) &&
               b_in.size(-1) == out.size(-1) && a_in.size(-1) == b_in.size(-2),
           name, ": expected out [..., M, N] (contiguous) = a [..., M, K] @ b [..., K, N], got ",
           out.describe(), ", ", a_in.describe(), ", ", b_in.describe());
  auto row_major = [](const Tensor& x) {
    return x.stride(-1) == 1 && x.stride(-2) >= x.size(-1) ? x : x.contiguous();
  };
  const Tensor a = row_major(a_in), b = row_major(b_in);
  const int64_t M = out.size(-2), N = out.size(-1), K = a.size(-1);
  TT_CHECK(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && ceil_div(M, 8) <= 65535u, name,
           ": sizes M=", M, " N=", N, " K=", K, " exceed the kernel's 32-bit indexing / grid");
  const Shape batch_shape(out.shape().begin(), out.shape().end() - 2);
  const int64_t batch = shape_numel(batch_shape);
  if (batch == 0 || M == 0 || N == 0) return;
  std::vector<int64_t> off_a(static_cast<std::size_t>(batch)), off_b(off_a.size());
  strided_offsets(batch_shape, Strides(a.strides().begin(), a.strides().end() - 2),
                  Strides(b.strides().begin(), b.strides().end() - 2), 0, batch, off_a.data(),
                  off_b.data());
  const int index = out.device().index;
  DeviceGuard guard(index);
  for (int64_t p = 0; p < batch; ++p) {
    SgemmArgs args;
    args.m = M;
    args.n = N;
    args.k = K;
    args.a = a.data<float>() + off_a[static_cast<std::size_t>(p)];
    args.lda = a.stride(-2);
    args.b = b.data<float>() + off_b[static_cast<std::size_t>(p)];
    args.ldb = b.stride(-2);
    args.c = out.data<float>() + p * M * N;
    args.ldc = N;
    launch(args, stream(index));
  }
}

}  // namespace

void matmul_naive(const Tensor& out, const Tensor& a, const Tensor& b) {
  run_sgemm(out, a, b, "matmul_cuda_naive", sgemm_naive);
}
void matmul_tiled(const Tensor& out, const Tensor& a, const Tensor& b) {
  run_sgemm(out, a, b, "matmul_cuda_tiled", sgemm_tiled);
}
void matmul_regblock(const Tensor& out, const Tensor& a, const Tensor& b) {
  run_sgemm(out, a, b, "matmul_cuda_regblock", sgemm_regblock);
}
void matmul_vec4(const Tensor& out, const Tensor& a, const Tensor& b) {
  run_sgemm(out, a, b, "matmul_cuda_vec4", sgemm_vec4);
}

TT_REGISTER_KERNEL("matmul_cuda_naive", DeviceType::kCUDA, matmul_naive);
TT_REGISTER_KERNEL("matmul_cuda_tiled", DeviceType::kCUDA, matmul_tiled);
TT_REGISTER_KERNEL("matmul_cuda_regblock", DeviceType::kCUDA, matmul_regblock);
TT_REGISTER_KERNEL("matmul_cuda_vec4", DeviceType::kCUDA, matmul_vec4);

}  // namespace tt::cuda
