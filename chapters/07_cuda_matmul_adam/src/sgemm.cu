// ============================================================================================
// YOUR EXERCISE FILE for chapter 07_cuda_matmul_adam. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch07
// Generated from solutions/07_cuda_matmul_adam/sgemm.cu by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 07 exercises ch07.2 - ch07.4: hand-written SGEMM, step by step, from the naive kernel
// (given) to shared-memory tiles, register blocking and vectorized, double-buffered loads, then
// (given again) warp tiles fed by a cp.async pipeline.
// Each step is benchmarked against cuBLAS in benchmarks/bench_cuda_matmul.cc; the chapter text
// explains why each one is faster (arithmetic intensity per level of the memory hierarchy).
//
// All launchers: row-major C[M x N] = A[M x K] B[K x N] (see SgemmArgs), any M, N, K (the
// warp-tiled kernel only for the shapes it fits; its launcher falls back to vec4 otherwise).
#include <algorithm>
#include <climits>
#include <cstddef>
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


// ----- given: warp tiles and a cp.async pipeline (after ch07.4) --------------------------------
// vec4 reaches about 80% of cuBLAS. This kernel closes most of the rest with three changes;
// it is given code, to read and measure, not an exercise (benchmarks/bench_cuda_matmul.cc
// "sgemm/warptile"). It has NO edge handling: sgemm_warptile launches it only when the tiles
// divide the problem and the rows are aligned, and calls sgemm_vec4 otherwise.
//
// 1. Warp tiles. The block tile is 128 x 128 again, but now each of the 8 warps owns a compact
//    64 x 32 piece of it (2 warp rows x 4 warp columns), and a lane owns 8 rows x 8 columns of
//    its warp's piece. A warp executes its shared loads together, so what shared memory must
//    deliver per k is the set of DISTINCT values the warp's lanes read: 64 of A + 32 of B = 96
//    for 64 x 32 = 2048 FMAs. In vec4 a warp is two rows of the 16 x 16 thread grid, i.e. a
//    16 x 128 footprint: 16 + 128 = 144 values for the same 2048 FMAs. Inside the warp, the
//    lanes form an 8 x 4 grid (kLaneRows x kLaneCols); lane (r, c) owns rows 8r..8r+7 of the
//    warp tile and columns {4c..4c+3, 16+4c..16+4c+3}: its 8 values of A per k are 2 float4s,
//    its 8 values of B 2 float4s, and a quarter warp (8 lanes, the unit that serves an LDS.128)
//    reads 2 distinct float4s of A (broadcast) and 4 consecutive float4s of B: no bank conflict.
// 2. BK = 16 instead of 8: twice the FMAs (1024 per thread) between two barriers.
// 3. cp.async (sm_80+): a copy from global to shared memory that does not pass through
//    registers. vec4 staged the next tile in registers: 8 of them per thread (16 with BK = 16,
//    next to 64 accumulators under the 128 that 2 blocks per SM allow) and a load plus a store
//    instruction per value. Here a ring of kStages = 3 shared buffers keeps 2 tiles in flight
//    while the third is computed on, with no staging registers and one instruction per copy.
//    A is still stored transposed (As[k][m], rows padded to kLdA = 132 floats: a lane's 8 A
//    values of one k are then 2 float4s, as in vec4). A 16-byte copy cannot transpose, so A is
//    copied 4 bytes at a time (as CUTLASS's "align1" SIMT kernels do) and B 16 bytes at a time.
// Shared memory: 3 stages x (16 x 132 + 16 x 128) floats = 49920 bytes, above the 48 KiB a
// kernel gets without asking (chapter 06's allow_dynamic_shared_memory). With 127 registers
// (launch_bounds(256, 2)) 2 blocks fit per SM, as for vec4.
namespace wt {  // the warp-tiled kernel, its tile sizes and cp.async helpers
constexpr int kBM = 128, kBN = 128, kBK = 16;  // block tile (kBK: the K step)
constexpr int kWM = 64, kWN = 32;              // warp tile
constexpr int kTM = 8, kTN = 4;                // a lane's micro-tile in each of its 2 sub-tiles
constexpr int kSubN = kWN / 2;                 // a warp tile = 1 x 2 sub-tiles of 64 x 16
constexpr int kLaneRows = kWM / kTM, kLaneCols = kSubN / kTN;  // 8 x 4 lanes per sub-tile
constexpr int kThreads = 32 * (kBM / kWM) * (kBN / kWN);       // 8 warps
constexpr int kStages = 3;
constexpr int kLdA = kBM + 4;  // padded row of the transposed A tile
constexpr int kStageFloats = kBK * kLdA + kBK * kBN;
constexpr std::size_t kSmemBytes = sizeof(float) * kStageFloats * kStages;
// Copies per thread and tile: 4-byte elements of A, 16-byte float4s of B.
constexpr int kAElems = kBM * kBK / kThreads, kBVec4 = kBK * kBN / 4 / kThreads;
static_assert(kLaneRows * kLaneCols == 32, "the 32 lanes tile one sub-tile");
static_assert(kThreads == 256 && kAElems == 8 && kBVec4 == 2, "the mappings below assume this");

__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// .ca (kept in L1) is the only form of a 4-byte cp.async; .cg (L2 only) for 16 bytes.
__device__ __forceinline__ void cp_async4(float* smem, const float* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_address(smem)), "l"(gmem)
               : "memory");
}
__device__ __forceinline__ void cp_async16(float* smem, const float* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_address(smem)), "l"(gmem)
               : "memory");
}
// Closes the copies issued so far by this thread into one group.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most kPending of this thread's groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// M, N multiples of 128, K a multiple of 16; b, c 16-byte aligned, ldb and ldc multiples of 4.
__global__ void __launch_bounds__(wt::kThreads, 2)
    sgemm_warptile_kernel(int M, int N, int K, const float* __restrict__ A, int64_t lda,
                          const float* __restrict__ B, int64_t ldb, float* __restrict__ C,
                          int64_t ldc) {
  extern __shared__ __align__(16) float smem[];  // kStages x {As[kBK][kLdA], Bs[kBK][kBN]}
  const int row0 = blockIdx.y * kBM, col0 = blockIdx.x * kBN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  // This lane's outputs: rows a_off..a_off+7 and columns b_off + {0..3, 16..19} of the block
  // tile, which are also its offsets inside one k row of As and of Bs.
  const int w_row0 = (warp / (kBN / kWN)) * kWM, w_col0 = (warp % (kBN / kWN)) * kWN;
  const int a_off = w_row0 + (lane / kLaneCols) * kTM, b_off = w_col0 + (lane % kLaneCols) * kTN;

  // Global -> shared copies of one tile. A (128 rows x 16 k), one float per copy: warp w and
  // lane q take row 4 (w / 2) + q % 4 and k = 8 (w % 2) + q / 4, then the rows 16, 32, .. below.
  // A warp thus reads 4 rows x 8 consecutive floats (4 whole 32-byte sectors), and its
  // transposing stores As[k][row] fall on banks 4k + row = q + const (mod 32, as kLdA = 4 mod
  // 32): 32 different banks. B (16 rows x 128 columns), one float4 per copy: thread t takes
  // row t / 32, columns 4 (t % 32)..+3, and row + 8: a warp copies 512 consecutive bytes.
  const int ac_r = 4 * (warp / 2) + lane % 4, ac_k = 8 * (warp % 2) + lane / 4;
  const int b_r = tid / 32, b_c = 4 * (tid % 32);
  const float* a_src = A + static_cast<int64_t>(row0 + ac_r) * lda + ac_k;   // += kBK per tile
  const float* b_src = B + static_cast<int64_t>(b_r) * ldb + col0 + b_c;     // += kBK rows
  constexpr int kARowStep = kThreads / kBK, kBRowStep = 4 * kThreads / kBN;  // 16 and 8 rows
  const int64_t a_step = kARowStep * lda, b_step = kBRowStep * ldb, b_tile = kBK * ldb;
  auto issue_copies = [&](int stage) {  // the tile at a_src / b_src into stage `stage`
    float* As = smem + stage * kStageFloats + ac_k * kLdA + ac_r;
    float* Bs = smem + stage * kStageFloats + kBK * kLdA + b_r * kBN + b_c;
    const float* pa = a_src;
#pragma unroll
    for (int l = 0; l < kAElems; ++l, pa += a_step) cp_async4(&As[l * kARowStep], pa);
    const float* pb = b_src;
#pragma unroll
    for (int l = 0; l < kBVec4; ++l, pb += b_step) cp_async16(&Bs[l * kBRowStep * kBN], pb);
  };

  // The math on one stage: per k, 4 LDS.128 and 64 FMAs per lane.
  float acc[kTM][2 * kTN] = {};
  auto compute = [&](int stage) {
    const float* As = smem + stage * kStageFloats;
    const float* Bs = As + kBK * kLdA;
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[kk * kLdA + a_off]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[kk * kLdA + a_off + 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk * kBN + b_off]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk * kBN + b_off + kSubN]);
      const float af[kTM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bf[2 * kTN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < 2 * kTN; ++j) acc[i][j] += af[i] * bf[j];
      }
    }
  };

  // The pipeline: a ring of S = kStages stages with S - 1 tiles in flight. Every step commits
  // exactly one group of copies (an empty one near the end), so before step t's wait S - 1 + t
  // groups have been committed, and "at most S - 2 pending" means that tile t's group (number t)
  // has landed. The barrier after it makes every thread's copies of tile t visible to all, and
  // also proves that everyone has finished computing tile t - 1: its stage (t - 1) mod S =
  // (t + S - 1) mod S is the one refilled right after the barrier.
  const int tiles = K / kBK;
  constexpr int S = kStages;
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < tiles) issue_copies(s);
    cp_async_commit();
    a_src += kBK;
    b_src += b_tile;
  }
  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<S - 2>();
    __syncthreads();
    if (t + S - 1 < tiles) issue_copies((t + S - 1) % S);
    cp_async_commit();
    a_src += kBK;
    b_src += b_tile;
    compute(t % S);
  }
  cp_async_wait<0>();  // nothing may be in flight when the block exits (the groups are empty)

  // Registers -> C: per row, two float4 stores (a quarter warp writes 2 rows x 64 bytes).
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    float* c_row = C + static_cast<int64_t>(row0 + a_off + i) * ldc + col0 + b_off;
    *reinterpret_cast<float4*>(c_row) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    *reinterpret_cast<float4*>(c_row + kSubN) =
        make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
  }
}
}  // namespace wt

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
          "sgemm_tiled: row-major C[M x N] = A[M x K] B[K x N] (row strides lda, ldb, ldc) for "
          "any M, N, K (K = 0 gives zeros) by a kernel that reads A and B through 32x32 "
          "shared-memory tiles; nothing launched when M or N is 0, else one checked launch on "
          "stream");
}

void sgemm_regblock(const SgemmArgs& p, cudaStream_t stream) {
  TT_TODO("ch07.3",
          "sgemm_regblock: the C = A B of sgemm_tiled, any M, N, K, by a kernel whose threads "
          "each keep 8x8 outputs of a 128x128 block tile in registers; nothing launched when M "
          "or N is 0, else one checked launch on stream");
}

void sgemm_vec4(const SgemmArgs& p, cudaStream_t stream) {
  TT_TODO("ch07.4",
          "sgemm_vec4: the C = A B of sgemm_regblock, any M, N, K, strides and alignment, with "
          "16-byte global and shared accesses where rows are aligned (scalar otherwise) and "
          "double-buffered shared tiles; nothing launched when M or N is 0, else one checked "
          "launch on stream");
}

void sgemm_warptile(const SgemmArgs& p, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0) return;
  // The warp-tiled kernel has no edge handling (M and N multiples of 128, K of 16) and moves B
  // and C 16 bytes at a time (b and c 16-byte aligned, ldb and ldc multiples of 4; A is copied
  // 4 bytes at a time, so any a and lda will do). Every other problem, and a device that cannot
  // give it 49920 bytes of shared memory, goes to sgemm_vec4, which handles any shape, stride
  // and alignment. K = 0 takes the fast path when M and N fit: zero tiles, C = 0.
  const bool fits = p.m % wt::kBM == 0 && p.n % wt::kBN == 0 && p.k % wt::kBK == 0 &&
                    p.ldb % 4 == 0 && p.ldc % 4 == 0 && aligned16(p.b) && aligned16(p.c);
  int dev = 0;
  if (fits) TT_CUDA_CHECK(cudaGetDevice(&dev));  // the launcher's caller made it current
  if (!fits || !allow_dynamic_shared_memory(
                   reinterpret_cast<const void*>(wt::sgemm_warptile_kernel), wt::kSmemBytes, dev)) {
    sgemm_vec4(p, stream);
    return;
  }
  const dim3 grid(static_cast<unsigned>(p.n / wt::kBN), static_cast<unsigned>(p.m / wt::kBM));
  wt::sgemm_warptile_kernel<<<grid, wt::kThreads, wt::kSmemBytes, stream>>>(
      static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), p.a, p.lda, p.b, p.ldb,
      p.c, p.ldc);
  TT_CUDA_CHECK_LAUNCH("sgemm_warptile_kernel");
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
void matmul_warptile(const Tensor& out, const Tensor& a, const Tensor& b) {
  run_sgemm(out, a, b, "matmul_cuda_warptile", sgemm_warptile);
}

TT_REGISTER_KERNEL("matmul_cuda_naive", DeviceType::kCUDA, matmul_naive);
TT_REGISTER_KERNEL("matmul_cuda_tiled", DeviceType::kCUDA, matmul_tiled);
TT_REGISTER_KERNEL("matmul_cuda_regblock", DeviceType::kCUDA, matmul_regblock);
TT_REGISTER_KERNEL("matmul_cuda_vec4", DeviceType::kCUDA, matmul_vec4);
TT_REGISTER_KERNEL("matmul_cuda_warptile", DeviceType::kCUDA, matmul_warptile);

}  // namespace tt::cuda
