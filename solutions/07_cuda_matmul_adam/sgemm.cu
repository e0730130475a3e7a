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

#if TT_SOLUTION
// ----- ch07.2: shared-memory tiles -------------------------------------------------------------
// The block computes a 32x32 tile of C. For each K step of 32, its 1024 threads copy a 32x32
// tile of A and of B into shared memory (one coalesced element each), synchronize, and each
// thread does 32 multiply-adds reading shared memory only. Each global element is now loaded
// once per block instead of once per thread: 32x fewer global loads.
constexpr int kTile = 32;

__global__ void sgemm_tiled_kernel(int M, int N, int K, const float* __restrict__ A, int64_t lda,
                                   const float* __restrict__ B, int64_t ldb, float* __restrict__ C,
                                   int64_t ldc) {
  __shared__ float As[kTile][kTile];
  __shared__ float Bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty, col = blockIdx.x * kTile + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    // Out-of-range elements are loaded as 0, so the inner loop needs no bounds checks.
    As[ty][tx] = row < M && k0 + tx < K ? A[row * lda + k0 + tx] : 0.0f;
    Bs[ty][tx] = k0 + ty < K && col < N ? B[(k0 + ty) * ldb + col] : 0.0f;
    __syncthreads();  // the tiles are complete
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk)
      acc += As[ty][kk] * Bs[kk][tx];  // As: broadcast; Bs: 32 banks
    __syncthreads();  // everyone is done reading before the next tiles overwrite them
  }
  if (row < M && col < N) C[row * ldc + col] = acc;
}

// ----- ch07.3 and ch07.4: block tiles of 128 x 128, 8 x 8 outputs per thread -----------------
// 256 threads, each accumulating 8 x 8 outputs in registers. Per K step (BK = 8) a thread loads
// 8 values of A and 8 of B from shared memory and does 64 FMAs with them, instead of 1 FMA per
// 2 loads in the tiled kernel.
constexpr int kBM = 128, kBN = 128, kBK = 8, kTM = 8, kTN = 8;
constexpr int kGemmThreads = (kBM / kTM) * (kBN / kTN);  // 256
static_assert(kBM * kBK == 4 * kGemmThreads && kBK * kBN == 4 * kGemmThreads,
              "each thread loads 4 elements of the A tile and 4 of the B tile per K step");

// ch07.3. Thread (ty, tx) of the 16 x 16 thread grid owns rows ty + 16*i and columns tx + 16*j:
// neighbouring threads own neighbouring columns, so the reads of Bs and the writes of C are
// consecutive across the warp. As is stored transposed (As[k][m]) so that a thread's 8 A
// values for one k sit in one row of shared memory.
__global__ void __launch_bounds__(kGemmThreads)
    sgemm_regblock_kernel(int M, int N, int K, const float* __restrict__ A, int64_t lda,
                          const float* __restrict__ B, int64_t ldb, float* __restrict__ C,
                          int64_t ldc) {
  __shared__ float As[kBK][kBM];
  __shared__ float Bs[kBK][kBN];
  const int tid = threadIdx.x;
  const int tx = tid % (kBN / kTN), ty = tid / (kBN / kTN);
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  float acc[kTM][kTN] = {};
  for (int k0 = 0; k0 < K; k0 += kBK) {
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int e = tid + l * kGemmThreads;
      const int ar = e / kBK, ac = e % kBK;  // A tile: 128 rows x 8 columns
      As[ac][ar] = row0 + ar < M && k0 + ac < K ? A[(row0 + ar) * lda + k0 + ac] : 0.0f;
      const int br = e / kBN, bc = e % kBN;  // B tile: 8 rows x 128 columns
      Bs[br][bc] = k0 + br < K && col0 + bc < N ? B[(k0 + br) * ldb + col0 + bc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float af[kTM], bf[kTN];
#pragma unroll
      for (int i = 0; i < kTM; ++i) af[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < kTN; ++j) bf[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] += af[i] * bf[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int row = row0 + ty + 16 * i;
    if (row >= M) continue;
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int col = col0 + tx + 16 * j;
      if (col < N) C[row * ldc + col] = acc[i][j];
    }
  }
}

// ch07.4. The same tiling with 16-byte accesses everywhere:
//  * global loads: one float4 of A and one of B per thread per K step (kVec: the rows of A, B
//    and C start 16-byte aligned, so a float4 at a column multiple of 4 is aligned; partial
//    float4s at the right edge fall back to bounds-checked scalars);
//  * shared loads: thread (ty, tx) owns rows {4ty..4ty+3, 64+4ty..64+4ty+3} and columns
//    {4tx..4tx+3, 64+4tx..64+4tx+3}, so its 8 A and 8 B values per k are 4 float4 loads, and the
//    8 threads of a quarter warp read 128 consecutive bytes (conflict-free);
//  * the A tile is stored transposed with rows padded to 132 floats: the 4 scalar stores of a
//    float4 of A then hit 32 different banks (row stride 132 = 4 mod 32 banks), where 128 would
//    put 2 threads on each bank;
//  * two shared buffers: the loads of tile t+1 are issued before the math on tile t and stored
//    into the other buffer after it, so one barrier per K step suffices and the global latency
//    hides behind 512 FMAs per thread.
constexpr int kPadA = 4;

template <bool kVec>
__global__ void __launch_bounds__(kGemmThreads, 2)
    sgemm_vec4_kernel(int M, int N, int K, const float* __restrict__ A, int64_t lda,
                      const float* __restrict__ B, int64_t ldb, float* __restrict__ C,
                      int64_t ldc) {
  __shared__ __align__(16) float As[2][kBK][kBM + kPadA];
  __shared__ __align__(16) float Bs[2][kBK][kBN];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int a_r = tid / 2, a_c = (tid % 2) * 4;    // this thread's float4 of the A tile
  const int b_r = tid / 32, b_c = (tid % 32) * 4;  // and of the B tile
  const float* a_row = A + static_cast<int64_t>(row0 + a_r) * lda;
  const bool a_row_ok = row0 + a_r < M;

  float4 a_ld, b_ld;
  auto load_tiles = [&](int k0) {
    const int ka = k0 + a_c;
    if (a_row_ok && kVec && ka + 3 < K) {
      a_ld = *reinterpret_cast<const float4*>(a_row + ka);
    } else {
      a_ld.x = a_row_ok && ka + 0 < K ? a_row[ka + 0] : 0.0f;
      a_ld.y = a_row_ok && ka + 1 < K ? a_row[ka + 1] : 0.0f;
      a_ld.z = a_row_ok && ka + 2 < K ? a_row[ka + 2] : 0.0f;
      a_ld.w = a_row_ok && ka + 3 < K ? a_row[ka + 3] : 0.0f;
    }
    const int kb = k0 + b_r, cb = col0 + b_c;
    const float* b_row = B + static_cast<int64_t>(kb) * ldb;
    if (kb < K && kVec && cb + 3 < N) {
      b_ld = *reinterpret_cast<const float4*>(b_row + cb);
    } else {
      b_ld.x = kb < K && cb + 0 < N ? b_row[cb + 0] : 0.0f;
      b_ld.y = kb < K && cb + 1 < N ? b_row[cb + 1] : 0.0f;
      b_ld.z = kb < K && cb + 2 < N ? b_row[cb + 2] : 0.0f;
      b_ld.w = kb < K && cb + 3 < N ? b_row[cb + 3] : 0.0f;
    }
  };
  auto store_tiles = [&](int buf) {
    As[buf][a_c + 0][a_r] = a_ld.x;
    As[buf][a_c + 1][a_r] = a_ld.y;
    As[buf][a_c + 2][a_r] = a_ld.z;
    As[buf][a_c + 3][a_r] = a_ld.w;
    *reinterpret_cast<float4*>(&Bs[buf][b_r][b_c]) = b_ld;
  };

  float acc[kTM][kTN] = {};
  load_tiles(0);
  store_tiles(0);
  __syncthreads();
  int buf = 0;
  for (int k0 = 0; k0 < K; k0 += kBK) {
    const bool has_next = k0 + kBK < K;
    if (has_next) load_tiles(k0 + kBK);  // in flight during the math below
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][kk][4 * ty]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][kk][64 + 4 * ty]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][kk][4 * tx]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][kk][64 + 4 * tx]);
      const float af[kTM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bf[kTN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] += af[i] * bf[j];
      }
    }
    if (has_next) store_tiles(buf ^ 1);  // nobody reads buf ^ 1 during this step
    __syncthreads();
    buf ^= 1;
  }

#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int row = row0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
    if (row >= M) continue;
    float* c_row = C + static_cast<int64_t>(row) * ldc;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = col0 + 64 * h + 4 * tx;
      const float* v = &acc[i][4 * h];
      if (kVec && col + 3 < N) {
        *reinterpret_cast<float4*>(c_row + col) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (col + j < N) c_row[col + j] = v[j];
        }
      }
    }
  }
}
#endif

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
#if TT_SOLUTION
  if (p.m == 0 || p.n == 0) return;  // a grid with a zero dimension is a launch error
  const dim3 block(kTile, kTile), grid(ceil_div(p.n, kTile), ceil_div(p.m, kTile));
  sgemm_tiled_kernel<<<grid, block, 0, stream>>>(static_cast<int>(p.m), static_cast<int>(p.n),
                                                 static_cast<int>(p.k), p.a, p.lda, p.b, p.ldb, p.c,
                                                 p.ldc);
  TT_CUDA_CHECK_LAUNCH("sgemm_tiled_kernel");
#else
  TT_TODO("ch07.2",
          "shared-memory tiled SGEMM: 32x32 blocks; per K step load one element of the A and B "
          "tiles each (0 outside the matrix), __syncthreads, 32 FMAs from shared memory, "
          "__syncthreads; return early when M or N is 0");
#endif
}

void sgemm_regblock(const SgemmArgs& p, cudaStream_t stream) {
#if TT_SOLUTION
  if (p.m == 0 || p.n == 0) return;
  const dim3 grid(ceil_div(p.n, kBN), ceil_div(p.m, kBM));
  sgemm_regblock_kernel<<<grid, kGemmThreads, 0, stream>>>(
      static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), p.a, p.lda, p.b, p.ldb,
      p.c, p.ldc);
  TT_CUDA_CHECK_LAUNCH("sgemm_regblock_kernel");
#else
  TT_TODO("ch07.3",
          "register-blocked SGEMM: 128x128 block tiles, BK = 8, 256 threads each accumulating an "
          "8x8 tile in registers (acc[8][8]); per k load 8 A and 8 B values from shared memory "
          "into registers and do 64 FMAs; return early when M or N is 0");
#endif
}

void sgemm_vec4(const SgemmArgs& p, cudaStream_t stream) {
#if TT_SOLUTION
  if (p.m == 0 || p.n == 0) return;
  const dim3 grid(ceil_div(p.n, kBN), ceil_div(p.m, kBM));
  const bool vec = p.lda % 4 == 0 && p.ldb % 4 == 0 && p.ldc % 4 == 0 && aligned16(p.a) &&
                   aligned16(p.b) && aligned16(p.c);
  const int M = static_cast<int>(p.m), N = static_cast<int>(p.n), K = static_cast<int>(p.k);
  if (vec) {
    sgemm_vec4_kernel<true>
        <<<grid, kGemmThreads, 0, stream>>>(M, N, K, p.a, p.lda, p.b, p.ldb, p.c, p.ldc);
  } else {
    sgemm_vec4_kernel<false>
        <<<grid, kGemmThreads, 0, stream>>>(M, N, K, p.a, p.lda, p.b, p.ldb, p.c, p.ldc);
  }
  TT_CUDA_CHECK_LAUNCH("sgemm_vec4_kernel");
#else
  TT_TODO("ch07.4",
          "vectorized SGEMM: regblock with float4 global loads (scalar at the edges or when rows "
          "are not 16-byte aligned), the A tile stored transposed with rows padded to 132 floats, "
          "float4 shared loads, two shared buffers and one __syncthreads per K step");
#endif
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
