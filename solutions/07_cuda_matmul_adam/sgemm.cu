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
#if TT_SOLUTION
  if (p.m == 0 || p.n == 0) return;  // a grid with a zero dimension is a launch error
  const dim3 block(kTile, kTile), grid(ceil_div(p.n, kTile), ceil_div(p.m, kTile));
  sgemm_tiled_kernel<<<grid, block, 0, stream>>>(static_cast<int>(p.m), static_cast<int>(p.n),
                                                 static_cast<int>(p.k), p.a, p.lda, p.b, p.ldb, p.c,
                                                 p.ldc);
  TT_CUDA_CHECK_LAUNCH("sgemm_tiled_kernel");
#else
  TT_TODO("ch07.2",
          "sgemm_tiled: row-major C[M x N] = A[M x K] B[K x N] (row strides lda, ldb, ldc) for "
          "any M, N, K (K = 0 gives zeros) by a kernel that reads A and B through 32x32 "
          "shared-memory tiles; nothing launched when M or N is 0, else one checked launch on "
          "stream");
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
          "sgemm_regblock: the C = A B of sgemm_tiled, any M, N, K, by a kernel whose threads "
          "each keep 8x8 outputs of a 128x128 block tile in registers; nothing launched when M "
          "or N is 0, else one checked launch on stream");
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
          "sgemm_vec4: the C = A B of sgemm_regblock, any M, N, K, strides and alignment, with "
          "16-byte global and shared accesses where rows are aligned (scalar otherwise) and "
          "double-buffered shared tiles; nothing launched when M or N is 0, else one checked "
          "launch on stream");
#endif
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
