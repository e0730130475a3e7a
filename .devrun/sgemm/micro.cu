// Issue 23, goal 5: can a hand-written FP32 SGEMM reach >= 90% of cuBLAS FP32 (no TF32)?
// Chapter 07's best kernel (vec4: 128x128x8 block tile, 8x8 outputs per thread, float4 loads,
// double-buffered shared memory) measures 41.7 TFLOP/s against cuBLAS's 51.2 at 4096^3 on an
// H100 (82%). This standalone micro-benchmark times a family of "warp-tiled" kernels, all from
// one template, against cuBLAS in pure FP32 (session 17 also ran a copy of vec4 here: 81-82%).
// The winner, wt_c_async3, is chapter 07's given sgemm_warptile.
//
// Build (only the CUDA runtime and cuBLAS):
//   nvcc -O3 -std=c++17 -arch=sm_90 .devrun/sgemm/micro.cu -lcublas -o /tmp/sgemm_micro
//   (add -Xptxas -v to see registers and spills per kernel)
// Run:
//   /tmp/sgemm_micro                 # sizes 2048 4096 8192, all variants
//   /tmp/sgemm_micro 4096            # only 4096^3
//   /tmp/sgemm_micro 4096 8192 -f wt # only variants whose name contains "wt"
//
// Conventions, as in chapter 07's sgemm.cu: row-major C[M x N] = A[M x K] B[K x N] with row
// strides lda, ldb, ldc. NO EDGE HANDLING in the warp-tiled kernels: M must be a multiple of BM,
// N of BN, K of BK, and the rows 16-byte aligned (all true for the square power-of-two sizes
// used here; the host code checks it and prints SKIP otherwise).
//
// Per (variant, size): 5 warm-up launches, then R timed launches between two CUDA events
// (R = 20, 10 at 8192); one line with ms per launch, TFLOP/s (2 M N K / time), % of cuBLAS at
// that size, the largest error against cuBLAS's C and PASS/FAIL. cuBLAS is timed before and after
// the hand-written kernels; the faster of its two runs is the 100% reference, so clock drift
// during the run cannot flatter the hand-written kernels.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x)                                                                       \
  do {                                                                              \
    cudaError_t e = (x);                                                            \
    if (e != cudaSuccess) {                                                         \
      std::printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)
#define CB(x)                                                                 \
  do {                                                                        \
    cublasStatus_t s = (x);                                                   \
    if (s != CUBLAS_STATUS_SUCCESS) {                                         \
      std::printf("cuBLAS status %d at %s:%d\n", int(s), __FILE__, __LINE__); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

// (Chapter 07's vec4, the baseline, is measured by benchmarks/bench_cuda_matmul.cc in the same
// runs: in session 17 it was copied here, 81-82% of cuBLAS; the copy is gone, as a duplicate.)

// =============================================================================================
// The warp-tiled kernel (the design of CUTLASS's SIMT SGEMM and of Simon Boehm's "kernel 10").
//
// Three levels of tiling, each with its own reuse:
//   block tile  BM x BN   the block streams BM x BK slices of A and BK x BN slices of B through
//                         shared memory, K / BK times;
//   warp tile   WM x WN   the block's warps tile the block tile, (BM / WM) x (BN / WN) of them;
//   thread tile           a warp tile is a grid of WMITER x WNITER "sub-tiles" of
//                         WSUBM x WSUBN = (WM / WMITER) x (WN / WNITER); inside one sub-tile
//                         the 32 lanes form a (WSUBM / TM) x (WSUBN / TN) grid and each lane
//                         owns a TM x TN micro-tile. A lane's outputs are WMITER*TM rows by
//                         WNITER*TN columns, held in registers.
//
// Why warp tiles: a warp executes its loads together, so what matters for shared-memory traffic
// is how much of A and B a WARP reads per k: WM + WN values for WM x WN FMAs. A compact square-ish
// warp tile (64 x 64: 128 values for 4096 FMAs; 32 x 64: 96 for 2048) beats the vec4 kernel's
// 16 x 128 warp footprint (144 values for 2048 FMAs). Splitting a lane's outputs into WMITER x
// WNITER sub-tiles of 4-wide pieces (instead of one contiguous 8 x 8) keeps each quarter warp's
// float4 reads of B on 8 consecutive float4 = 128 bytes, i.e. conflict-free LDS.128.
//
// Shared memory per stage: As[BK][BM + 4] (A TRANSPOSED, k-major, so that a lane's TM values of
// one k are contiguous and can be read with float4) and Bs[BK][BN]. The +4 padding makes the
// transposing stores conflict-free (row stride = 4 mod 32 banks), see the load mappings below.
//
// Two ways to move the next tiles from global to shared memory while computing (kStages):
//   kStages == 0: register prefetch, as in chapter 07's vec4: LDG.128 of tile t+1 into registers
//                 before the FMAs of tile t, STS into the other of two shared buffers after them,
//                 one __syncthreads per tile. Costs (BM + BN) * BK / threads registers.
//   kStages >= 2: cp.async (sm_80+), a ring of kStages shared buffers: global -> shared without
//                 passing through registers, kStages - 1 tiles in flight. The transposition of A
//                 forces 4-byte copies for A (like CUTLASS's "align1" SIMT kernels); B is copied
//                 with 16-byte copies.
// kGroupM > 0 launches the blocks in groups of kGroupM block rows (Triton's "grouped ordering"),
// so that blocks running at the same time share rows of A and columns of B in L2.
// =============================================================================================

template <int BM_, int BN_, int BK_, int WM_, int WN_, int WMITER_, int WNITER_, int TM_, int TN_,
          int kMinBlocks_, int kStages_, int kGroupM_ = 0>
struct WtCfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;  // block tile (BK = K step)
  static constexpr int WM = WM_, WN = WN_;            // warp tile
  static constexpr int WMITER = WMITER_, WNITER = WNITER_;
  static constexpr int TM = TM_, TN = TN_;  // lane micro-tile inside one sub-tile
  static constexpr int kWarps = (BM / WM) * (BN / WN);
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocks = kMinBlocks_;  // __launch_bounds__' second argument
  static constexpr int kStages = kStages_;        // 0 = register prefetch, >= 2 = cp.async
  static constexpr int kGroupM = kGroupM_;        // 0 = plain block order
  static constexpr int WSUBM = WM / WMITER, WSUBN = WN / WNITER;  // sub-tile of a warp
  static constexpr int kLaneCols = WSUBN / TN;                    // lanes across one sub-tile
  static constexpr int kLaneRows = WSUBM / TM;                    // lanes down one sub-tile
  static constexpr int kRowsPerThread = WMITER * TM, kColsPerThread = WNITER * TN;
  static constexpr int kLdA = BM + 4;  // padded row of the transposed A tile
  static constexpr int kStageFloats = BK * kLdA + BK * BN;
  static constexpr int kBuffers = kStages == 0 ? 2 : kStages;
  static constexpr size_t kSmemBytes = sizeof(float) * kStageFloats * kBuffers;
  // global -> shared work per thread and tile
  static constexpr int kAVec4 = BM * BK / 4 / kThreads;  // register prefetch: float4s of A
  static constexpr int kBVec4 = BK * BN / 4 / kThreads;  // float4s of B (both modes)
  static constexpr int kAElems = BM * BK / kThreads;     // cp.async: 4-byte elements of A

  static_assert(BM % WM == 0 && BN % WN == 0, "warps must tile the block tile");
  static_assert(WM % WMITER == 0 && WN % WNITER == 0, "sub-tiles must tile the warp tile");
  static_assert(TM % 4 == 0 && TN % 4 == 0, "micro-tiles are read with float4");
  static_assert(WSUBM % TM == 0 && WSUBN % TN == 0 && kLaneRows * kLaneCols == 32,
                "the 32 lanes must exactly tile one sub-tile");
  static_assert(BM % 32 == 0,
                "kLdA = 4 mod 32 (conflict-free transposed stores) needs BM % 32 == 0");
  static_assert(BK % 8 == 0, "the A-load mappings below assume BK % 8 == 0");
  static_assert(BM * BK % (4 * kThreads) == 0 && BK * BN % (4 * kThreads) == 0,
                "every thread loads the same number of float4s of each tile");
  static_assert(BN >= 128, "the B-load comments assume a warp covers 512 bytes of one B row");
  static_assert(kStages == 0 || kStages >= 2, "kStages: 0 or >= 2");
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// cp.async: an asynchronous global -> shared copy that bypasses registers. .ca (cache in L1) is
// the only form allowed for 4 bytes; .cg (L2 only) for 16 bytes, as CUTLASS does.
__device__ __forceinline__ void cp_async4(float* smem, const float* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(smem)), "l"(gmem)
               : "memory");
}
__device__ __forceinline__ void cp_async16(float* smem, const float* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(smem)), "l"(gmem)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kPending>  // wait until at most kPending of this thread's groups are in flight
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    sgemm_warptile(int M, int N, int K, const float* __restrict__ A, int lda,
                   const float* __restrict__ B, int ldb, float* __restrict__ C, int ldc) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, NT = Cfg::kThreads;
  constexpr int TM = Cfg::TM, TN = Cfg::TN, WMITER = Cfg::WMITER, WNITER = Cfg::WNITER;
  constexpr int kLdA = Cfg::kLdA, RT = Cfg::kRowsPerThread, CT = Cfg::kColsPerThread;
  extern __shared__ __align__(16) float smem[];

  // ----- which block tile: plain row-major block order, or grouped (L2-friendly) order --------
  int bm = blockIdx.y, bn = blockIdx.x;
  if constexpr (Cfg::kGroupM > 0) {
    // Number the blocks 0.. in launch order and hand them out column by column inside groups of
    // kGroupM block rows: the blocks resident together cover a ~kGroupM x (wave / kGroupM)
    // patch of C instead of whole rows of it, so they share more of A and B.
    const int pid = blockIdx.y * gridDim.x + blockIdx.x;
    const int per_group = Cfg::kGroupM * gridDim.x;
    const int first_m = (pid / per_group) * Cfg::kGroupM;
    const int group_m = min(static_cast<int>(gridDim.y) - first_m, Cfg::kGroupM);
    bm = first_m + (pid % per_group) % group_m;
    bn = (pid % per_group) / group_m;
  }
  const int row0 = bm * BM, col0 = bn * BN;

  // ----- this thread's place: warp -> warp tile, lane -> position inside every sub-tile -------
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int w_row0 = (warp / (BN / Cfg::WN)) * Cfg::WM;  // warp tile origin inside the block
  const int w_col0 = (warp % (BN / Cfg::WN)) * Cfg::WN;
  const int t_row = lane / Cfg::kLaneCols, t_col = lane % Cfg::kLaneCols;
  // Offsets (in floats, inside one k row of As / Bs) of this lane's first A and B values.
  const int a_off = w_row0 + t_row * TM, b_off = w_col0 + t_col * TN;

  // ----- global -> shared, register-prefetch flavour (kStages == 0) ------------------------------
  // A tile (BM rows x BK columns, row-major in global memory) as float4 along k. Float4 number e
  // of the tile maps to row = e % 16 + 16 * (e / (4 BK)), k = 4 * ((e / 16) % (BK / 4)):
  // a warp covers 16 rows x 2 consecutive float4s (32 bytes = one full sector per row: coalesced),
  // and its transposed scalar stores As[k + i][row] fall on banks (k + i) * kLdA + row = 16 *
  // (k / 4) + 4 i + row (mod 32), i.e. 32 different banks (kLdA = 4 mod 32): conflict-free.
  // A thread's float4s are e = tid + l * NT, l = 0, 1, ...; since NT is a multiple of 4 BK, they
  // all have the same k and rows l * (4 NT / BK) apart, so ONE pointer plus a row stride
  // addresses them all, and the shared offsets are compile-time constants (few registers).
  // B tile (BK rows x BN columns): float4 e -> row e / (BN / 4), column 4 (e % (BN / 4)); a warp
  // reads 512 consecutive bytes of one row and writes them to consecutive shared words. Again a
  // thread's float4s share the column and are 4 NT / BN rows apart.
  constexpr int kARowStep = 4 * NT / BK, kBRowStep = 4 * NT / BN;
  static_assert(NT % (4 * BK) == 0 && NT % (BN / 4) == 0, "see the mapping above");
  const int a_r = tid % 16 + 16 * (tid / (4 * BK)), a_k = 4 * ((tid / 16) % (BK / 4));
  const int b_r = tid / (BN / 4), b_c = 4 * (tid % (BN / 4));
  const float* a_src = A + static_cast<int64_t>(row0 + a_r) * lda + a_k;  // advanced by BK per tile
  const float* b_src = B + static_cast<int64_t>(b_r) * ldb + col0 + b_c;  // advanced by BK rows
  const int64_t a_step = static_cast<int64_t>(kARowStep) * lda;
  const int64_t b_step = static_cast<int64_t>(kBRowStep) * ldb,
                b_tile = static_cast<int64_t>(BK) * ldb;

  [[maybe_unused]] float4 a_reg[Cfg::kStages == 0 ? Cfg::kAVec4 : 1];
  [[maybe_unused]] float4 b_reg[Cfg::kStages == 0 ? Cfg::kBVec4 : 1];
  auto load_regs = [&]() {  // the tile at a_src / b_src
    const float* pa = a_src;
#pragma unroll
    for (int l = 0; l < Cfg::kAVec4; ++l, pa += a_step)
      a_reg[l] = *reinterpret_cast<const float4*>(pa);
    const float* pb = b_src;
#pragma unroll
    for (int l = 0; l < Cfg::kBVec4; ++l, pb += b_step)
      b_reg[l] = *reinterpret_cast<const float4*>(pb);
  };
  auto store_regs = [&](int buf) {
    float* As = smem + buf * Cfg::kStageFloats + a_k * kLdA + a_r;
    float* Bs = smem + buf * Cfg::kStageFloats + BK * kLdA + b_r * BN + b_c;
#pragma unroll
    for (int l = 0; l < Cfg::kAVec4; ++l) {
      As[0 * kLdA + l * kARowStep] = a_reg[l].x;
      As[1 * kLdA + l * kARowStep] = a_reg[l].y;
      As[2 * kLdA + l * kARowStep] = a_reg[l].z;
      As[3 * kLdA + l * kARowStep] = a_reg[l].w;
    }
#pragma unroll
    for (int l = 0; l < Cfg::kBVec4; ++l)
      *reinterpret_cast<float4*>(&Bs[l * kBRowStep * BN]) = b_reg[l];
  };

  // ----- global -> shared, cp.async flavour (kStages >= 2) ---------------------------------------
  // A is copied one float at a time (a 16-byte cp.async cannot transpose). Element e of the tile
  // -> warp-group g = e / 32 and lane q = e % 32; row = 4 (g / (BK / 8)) + q % 4, k = 8 (g % (BK /
  // 8)) + q / 4: a warp reads 4 rows x 8 consecutive floats (4 full 32-byte sectors) and writes
  // banks 4 k + row = 4 (q / 4) + q % 4 (mod 32) = q: conflict-free. As above, a thread's
  // elements (e = tid + l NT) share k and are NT / BK rows apart. B as in the register flavour.
  constexpr int kAcRowStep = NT / BK;
  static_assert((NT / 32) % (BK / 8) == 0, "see the mapping above");
  const int ac_r = 4 * ((tid / 32) / (BK / 8)) + lane % 4,
            ac_k = 8 * ((tid / 32) % (BK / 8)) + lane / 4;
  const float* ac_src = A + static_cast<int64_t>(row0 + ac_r) * lda + ac_k;
  const int64_t ac_step = static_cast<int64_t>(kAcRowStep) * lda;
  auto issue_async = [&](int buf) {  // the tile at ac_src / b_src
    float* As = smem + buf * Cfg::kStageFloats + ac_k * kLdA + ac_r;
    float* Bs = smem + buf * Cfg::kStageFloats + BK * kLdA + b_r * BN + b_c;
    const float* pa = ac_src;
#pragma unroll
    for (int l = 0; l < Cfg::kAElems; ++l, pa += ac_step) cp_async4(&As[l * kAcRowStep], pa);
    const float* pb = b_src;
#pragma unroll
    for (int l = 0; l < Cfg::kBVec4; ++l, pb += b_step) cp_async16(&Bs[l * kBRowStep * BN], pb);
  };

  // ----- the math on one shared stage ------------------------------------------------------------
  // Per k: WMITER * TM / 4 + WNITER * TN / 4 LDS.128 and RT * CT FFMA. Inside a quarter warp (8
  // lanes, the unit in which LDS.128 is served) the B reads are 8 consecutive float4 (t_col =
  // 0..7) or two copies of 4 consecutive ones; the A reads are 1 or 2 distinct float4
  // (broadcast): no bank conflicts when kLaneCols >= 4.
  float acc[RT][CT];
#pragma unroll
  for (int i = 0; i < RT; ++i) {
#pragma unroll
    for (int j = 0; j < CT; ++j) acc[i][j] = 0.0f;
  }
  auto compute = [&](int buf) {
    const float* As = smem + buf * Cfg::kStageFloats;
    const float* Bs = As + BK * kLdA;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float af[RT], bf[CT];
#pragma unroll
      for (int wm = 0; wm < WMITER; ++wm) {
#pragma unroll
        for (int i4 = 0; i4 < TM / 4; ++i4) {
          const float4 v =
              *reinterpret_cast<const float4*>(&As[kk * kLdA + a_off + wm * Cfg::WSUBM + 4 * i4]);
          af[wm * TM + 4 * i4 + 0] = v.x;
          af[wm * TM + 4 * i4 + 1] = v.y;
          af[wm * TM + 4 * i4 + 2] = v.z;
          af[wm * TM + 4 * i4 + 3] = v.w;
        }
      }
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn) {
#pragma unroll
        for (int j4 = 0; j4 < TN / 4; ++j4) {
          const float4 v =
              *reinterpret_cast<const float4*>(&Bs[kk * BN + b_off + wn * Cfg::WSUBN + 4 * j4]);
          bf[wn * TN + 4 * j4 + 0] = v.x;
          bf[wn * TN + 4 * j4 + 1] = v.y;
          bf[wn * TN + 4 * j4 + 2] = v.z;
          bf[wn * TN + 4 * j4 + 3] = v.w;
        }
      }
#pragma unroll
      for (int i = 0; i < RT; ++i) {
#pragma unroll
        for (int j = 0; j < CT; ++j) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
      }
    }
  };

  // ----- the main loop ------------------------------------------------------------------------
  const int tiles = K / BK;
  if constexpr (Cfg::kStages == 0) {
    // As chapter 07's vec4: tile t+1's global loads are in flight during tile t's FMAs; the
    // buffer written after the FMAs was last read during step t-1, which the barrier at the end
    // of step t-1 has closed. One barrier per tile.
    load_regs();
    store_regs(0);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
      const bool has_next = t + 1 < tiles;
      a_src += BK;
      b_src += b_tile;
      if (has_next) load_regs();
      compute(t & 1);
      if (has_next) store_regs((t + 1) & 1);
      __syncthreads();
    }
  } else {
    // A ring of S = kStages buffers, S - 1 tiles in flight. Every step commits exactly one
    // cp.async group (possibly empty), so before step t's wait, S - 1 + t groups were committed and
    // "at most S - 2 pending" means tile t's group (number t) has landed. The barrier then makes
    // every thread's copies of tile t visible, and also proves everyone finished computing tile
    // t - 1, whose buffer (t - 1) mod S = (t + S - 1) mod S is the one refilled right after it.
    constexpr int S = Cfg::kStages;
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
      if (s < tiles) issue_async(s);
      cp_async_commit();
      ac_src += BK;
      b_src += b_tile;
    }
    for (int t = 0; t < tiles; ++t) {
      cp_async_wait<S - 2>();
      __syncthreads();
      const int next = t + S - 1;
      if (next < tiles) issue_async(next % S);
      cp_async_commit();
      ac_src += BK;
      b_src += b_tile;
      compute(t % S);
    }
    cp_async_wait<0>();  // nothing is left in flight when the block exits (all groups are empty)
  }

  // ----- epilogue: registers -> C, float4 stores ----------------------------------------------
  // A quarter warp writes 8 x 16 consecutive bytes of one row (kLaneCols >= 8) or two rows of 64.
#pragma unroll
  for (int wm = 0; wm < WMITER; ++wm) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int r = row0 + a_off + wm * Cfg::WSUBM + i;
      float* c_row = C + static_cast<int64_t>(r) * ldc + col0 + b_off;
#pragma unroll
      for (int wn = 0; wn < WNITER; ++wn) {
#pragma unroll
        for (int j4 = 0; j4 < TN / 4; ++j4) {
          const float* v = &acc[wm * TM + i][wn * TN + 4 * j4];
          *reinterpret_cast<float4*>(c_row + wn * Cfg::WSUBN + 4 * j4) =
              make_float4(v[0], v[1], v[2], v[3]);
        }
      }
    }
  }
}

// =============================================================================================
// Host side: variants, data, timing, checking.
// =============================================================================================

using Launch = void (*)(int M, int N, int K, const float* A, const float* B, float* C);

struct Variant {
  std::string name;  // short name printed on every line
  std::string desc;  // configuration, printed once
  Launch launch;
  const void* kernel;  // for cudaFuncGetAttributes / occupancy
  int threads;
  size_t smem;     // dynamic shared memory bytes
  int bm, bn, bk;  // divisibility requirements (edge handling is not implemented)
};

template <class Cfg>
void launch_wt(int M, int N, int K, const float* A, const float* B, float* C) {
  const dim3 grid(N / Cfg::BN, M / Cfg::BM);
  sgemm_warptile<Cfg><<<grid, Cfg::kThreads, Cfg::kSmemBytes>>>(M, N, K, A, K, B, N, C, N);
}

template <class Cfg>
Variant make_wt(const char* name) {
  // Dynamic shared memory above 48 KB must be opted into, per kernel.
  CK(cudaFuncSetAttribute(sgemm_warptile<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(Cfg::kSmemBytes)));
  char d[256];
  std::snprintf(
      d, sizeof d,
      "block %dx%dx%d, warp %dx%d = %dx%d sub-tiles of %dx%d (lanes %dx%d, micro %dx%d), "
      "%d threads, thread tile %dx%d, %s, launch_bounds(%d,%d)%s",
      Cfg::BM, Cfg::BN, Cfg::BK, Cfg::WM, Cfg::WN, Cfg::WMITER, Cfg::WNITER, Cfg::WSUBM, Cfg::WSUBN,
      Cfg::kLaneRows, Cfg::kLaneCols, Cfg::TM, Cfg::TN, Cfg::kThreads, Cfg::kRowsPerThread,
      Cfg::kColsPerThread,
      Cfg::kStages == 0
          ? "reg prefetch + 2 smem buffers"
          : (std::string("cp.async ") + std::to_string(Cfg::kStages) + " stages").c_str(),
      Cfg::kThreads, Cfg::kMinBlocks,
      Cfg::kGroupM > 0 ? (", grouped order " + std::to_string(Cfg::kGroupM)).c_str() : "");
  Variant v;
  v.name = name;
  v.desc = d;
  v.launch = launch_wt<Cfg>;
  v.kernel = reinterpret_cast<const void*>(sgemm_warptile<Cfg>);
  v.threads = Cfg::kThreads;
  v.smem = Cfg::kSmemBytes;
  v.bm = Cfg::BM;
  v.bn = Cfg::BN;
  v.bk = Cfg::BK;
  return v;
}

// The configurations. Template arguments:
//           BM   BN  BK  WM  WN WMITER WNITER TM TN minBlocks stages groupM
// Registers: accumulators RT*CT + fragments RT+CT (up to twice that when the compiler loads
// step kk+1's fragments during step kk's FMAs) + prefetch (BM+BN)*BK/threads + addresses.
// Measured with nvcc 13.0 -Xptxas -v (sm_90), no spills anywhere; the counts are in the table
// the program prints first, with the resulting blocks per SM.
std::vector<Variant> make_variants() {
  std::vector<Variant> v;
  // The classic cuBLAS / CUTLASS SIMT shape ("sgemm_128x128x8", CUTLASS's default SIMT warp
  // shape 32x64x8): 8 warps of 32x64, each lane 8x8 as 2x2 sub-tiles of 4x4. 64 accumulators,
  // ~122 registers, 2 blocks (16 warps) per SM like vec4.
  v.push_back(make_wt<WtCfg<128, 128, 8, 32, 64, 2, 2, 4, 4, 2, 0>>("wt_a"));
  // The same with 64x32 warps (lanes 8 x 4 per sub-tile).
  v.push_back(make_wt<WtCfg<128, 128, 8, 64, 32, 2, 2, 4, 4, 2, 0>>("wt_b"));
  // BK = 16 halves the barriers per FMA; 8 warps of 64x32, lane 8x8 = 1x2 sub-tiles of 8x4.
  v.push_back(make_wt<WtCfg<128, 128, 16, 64, 32, 1, 2, 8, 4, 2, 0>>("wt_c"));
  // Simon Boehm's autotuned "kernel 10" (A6000): 4 warps of 64x64, lane 8x16 = 1x4 sub-tiles of
  // 8x4; 128 accumulators, ~240 registers, 2 blocks (8 warps) per SM.
  v.push_back(make_wt<WtCfg<128, 128, 16, 64, 64, 1, 4, 8, 4, 2, 0>>("wt_d"));
  // Same block and warp tile, lane 16x8 = 2x2 sub-tiles of 8x4 (lanes 4 x 8 per sub-tile).
  v.push_back(make_wt<WtCfg<128, 128, 16, 64, 64, 2, 2, 8, 4, 2, 0>>("wt_e"));
  // Larger block tiles, 8 warps of 64x64 (128 accumulators each), 1 block per SM:
  // more reuse of every global load, ~230 registers, only 8 warps per SM.
  v.push_back(make_wt<WtCfg<128, 256, 16, 64, 64, 1, 4, 8, 4, 1, 0>>("wt_f"));
  v.push_back(make_wt<WtCfg<256, 128, 16, 64, 64, 1, 4, 8, 4, 1, 0>>("wt_g"));
  // cp.async pipelines (no staging registers): CUTLASS-style 128x128x8 with 4 stages, and the
  // BK = 16 shapes with 3 stages.
  v.push_back(make_wt<WtCfg<128, 128, 8, 32, 64, 2, 2, 4, 4, 2, 4>>("wt_a_async4"));
  v.push_back(make_wt<WtCfg<128, 128, 16, 64, 32, 1, 2, 8, 4, 2, 3>>("wt_c_async3"));
  v.push_back(make_wt<WtCfg<128, 128, 16, 64, 64, 1, 4, 8, 4, 2, 3>>("wt_d_async3"));
  v.push_back(make_wt<WtCfg<128, 256, 16, 64, 64, 1, 4, 8, 4, 1, 3>>("wt_f_async3"));
  // Grouped block order (L2 reuse) on two of the above.
  v.push_back(make_wt<WtCfg<128, 128, 8, 32, 64, 2, 2, 4, 4, 2, 0, 8>>("wt_a_grp8"));
  v.push_back(make_wt<WtCfg<128, 128, 16, 64, 64, 1, 4, 8, 4, 2, 0, 8>>("wt_d_grp8"));
  return v;
}

// ----- data and checking kernels --------------------------------------------------------------
// Inputs: uniform in [-1, 1) from a counter-based hash of (seed, index), so every run and every
// size is reproducible without a slow host-side generator and copy.
__global__ void fill_uniform(float* x, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i);  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;  // 24 random bits
  }
}

// max over all elements of |c - ref| / (|ref| + floor), as float bits (non-negative floats order
// like their bit patterns, so atomicMax on unsigned works). NaN (e.g. an element the kernel never
// wrote: C is filled with NaN before every variant) counts as infinity.
__global__ void max_rel_err(const float* c, const float* ref, int64_t n, float floor_,
                            unsigned* out) {
  float m = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float e = fabsf(c[i] - ref[i]) / (fabsf(ref[i]) + floor_);
    if (!(e <= 3.0e38f)) e = INFINITY;
    m = fmaxf(m, e);
  }
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) atomicMax(out, __float_as_uint(m));
}

// ----- timing -----------------------------------------------------------------------------------
template <class F>
float time_ms(F&& f, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) f();
  CK(cudaGetLastError());
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0));
  for (int i = 0; i < reps; ++i) f();
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  CK(cudaGetLastError());
  float ms = 0.0f;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return ms / reps;
}

int main(int argc, char** argv) {
  std::vector<int> sizes;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-f") == 0 && i + 1 < argc) {
      filter = argv[++i];
    } else {
      sizes.push_back(std::atoi(argv[i]));
    }
  }
  if (sizes.empty()) sizes = {2048, 4096, 8192};

  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  std::printf(
      "device: %s, %d SMs, max clock %.0f MHz, L2 %d MB (FP32 FMA peak at that clock "
      "= SMs x 128 x 2 x clock = %.1f TFLOP/s)\n",
      prop.name, prop.multiProcessorCount, clock_khz / 1e3, prop.l2CacheSize >> 20,
      prop.multiProcessorCount * 128.0 * 2.0 * clock_khz * 1e3 / 1e12);

  std::vector<Variant> variants = make_variants();
  std::vector<Variant> chosen;
  for (const Variant& v : variants) {
    if (filter.empty() || v.name.find(filter) != std::string::npos) chosen.push_back(v);
  }

  // Registers, shared memory and resident blocks per SM as the runtime sees them (the same
  // numbers as -Xptxas -v, plus the occupancy they allow).
  std::printf("\n%-13s %5s %6s %8s %9s  %s\n", "variant", "regs", "spillB", "smem KB", "blocks/SM",
              "configuration");
  for (const Variant& v : chosen) {
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, v.kernel));
    int blocks = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, v.kernel, v.threads, v.smem));
    std::printf("%-13s %5d %6d %8.1f %9d  %s\n", v.name.c_str(), fa.numRegs,
                static_cast<int>(fa.localSizeBytes), (fa.sharedSizeBytes + v.smem) / 1024.0, blocks,
                v.desc.c_str());
  }

  cublasHandle_t handle;
  CB(cublasCreate(&handle));
  // Pure FP32: the default math mode never uses tensor cores for an FP32 GEMM with
  // CUBLAS_COMPUTE_32F (TF32 needs CUBLAS_TF32_TENSOR_OP_MATH or COMPUTE_32F_FAST_TF32). This is
  // the call chapter 07's "matmul" makes with TF32 off, so the reference is the chapter's.
  CB(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));

  for (int n : sizes) {
    const int M = n, N = n, K = n;
    const int64_t nA = int64_t(M) * K, nB = int64_t(K) * N, nC = int64_t(M) * N;
    float *A, *B, *C, *Cref;
    unsigned* d_err;
    CK(cudaMalloc(&A, nA * sizeof(float)));
    CK(cudaMalloc(&B, nB * sizeof(float)));
    CK(cudaMalloc(&C, nC * sizeof(float)));
    CK(cudaMalloc(&Cref, nC * sizeof(float)));
    CK(cudaMalloc(&d_err, sizeof(unsigned)));
    fill_uniform<<<1024, 256>>>(A, nA, 1234);
    fill_uniform<<<1024, 256>>>(B, nB, 5678);
    CK(cudaGetLastError());

    const int reps = n >= 8192 ? 10 : 20, warmup = 5;
    const double flops = 2.0 * M * N * K;
    const float alpha = 1.0f, beta = 0.0f;
    // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS's first operand is our B (an
    // N x K column-major matrix with ld N), its second our A (K x M, ld K), its C^T is N x M with
    // ld N, i.e. exactly our row-major C.
    auto cublas_call = [&](float* out) {
      CB(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_32F, N, A,
                      CUDA_R_32F, K, &beta, out, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT));
    };

    // Error floor: sqrt(K) / 3 is the standard deviation of an entry of C for uniform [-1, 1)
    // inputs (each product has variance 1/9). A correct FP32 kernel that sums in another order
    // differs from cuBLAS by roughly 1e-5 of that (rounding of partial sums of that size); a floor
    // like 1e-3 would make entries that happen to be near 0 fail correct kernels at K = 8192.
    // A wrong index or a missing k step gives ~1e-2 or more, and TF32 rounding of the inputs roughly 2e-3, so
    // tolerance 1e-3 separates them.
    const float err_floor = std::sqrt(static_cast<float>(K)) / 3.0f, tol = 1e-3f;
    auto check = [&](const float* c) {
      CK(cudaMemset(d_err, 0, sizeof(unsigned)));
      max_rel_err<<<1024, 256>>>(c, Cref, nC, err_floor, d_err);
      CK(cudaGetLastError());
      unsigned bits = 0;
      CK(cudaMemcpy(&bits, d_err, sizeof bits, cudaMemcpyDeviceToHost));
      float e;
      std::memcpy(&e, &bits, sizeof e);
      return e;
    };

    std::printf("\n=== M = N = K = %d (%d timed launches after %d warm-up) ===\n", n, reps, warmup);
    std::printf("%-13s %9s %9s %9s %11s  %s\n", "variant", "ms", "TFLOP/s", "%cuBLAS", "max err",
                "check");
    if (n == sizes.front()) {
      // Once: 0.3 s of back-to-back cuBLAS launches, so that the first timings do not catch the
      // GPU still raising its clocks.
      const auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300)) {
        cublas_call(Cref);
        CK(cudaDeviceSynchronize());
      }
    }
    const float cublas_ms1 = time_ms([&] { cublas_call(Cref); }, warmup, reps);
    std::printf("%-13s %9.3f %9.2f %9s %11s  %s\n", "cublas", cublas_ms1, flops / cublas_ms1 / 1e9,
                "(ref)", "-", "reference");

    struct Row {
      std::string name;
      float ms, err;
      bool skipped;
    };
    std::vector<Row> rows;
    for (const Variant& v : chosen) {
      if (M % v.bm || N % v.bn || K % v.bk) {
        rows.push_back({v.name, 0.0f, 0.0f, true});
        continue;
      }
      CK(cudaMemset(C, 0xFF, nC * sizeof(float)));  // NaN everywhere: unwritten entries fail
      v.launch(M, N, K, A, B, C);                   // the checked result: one cold launch
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      const float err = check(C);
      const float ms = time_ms([&] { v.launch(M, N, K, A, B, C); }, warmup, reps);
      rows.push_back({v.name, ms, err, false});
    }
    // cuBLAS again (into C; the reference stays in Cref), and the faster of the two runs is 100%.
    const float cublas_ms2 = time_ms([&] { cublas_call(C); }, warmup, reps);
    const float ref_ms = std::min(cublas_ms1, cublas_ms2);
    for (const Row& r : rows) {
      if (r.skipped) {
        std::printf("%-13s %9s  SKIP (size not a multiple of the tile)\n", r.name.c_str(), "-");
        continue;
      }
      std::printf("%-13s %9.3f %9.2f %8.1f%% %11.2e  %s\n", r.name.c_str(), r.ms,
                  flops / r.ms / 1e9, 100.0 * ref_ms / r.ms, r.err, r.err <= tol ? "PASS" : "FAIL");
    }
    std::printf("%-13s %9.3f %9.2f %9s %11s  %s\n", "cublas(again)", cublas_ms2,
                flops / cublas_ms2 / 1e9, "", "-", "reference = faster of the two cuBLAS runs");

    CK(cudaFree(A));
    CK(cudaFree(B));
    CK(cudaFree(C));
    CK(cudaFree(Cref));
    CK(cudaFree(d_err));
    std::fflush(stdout);
  }
  CB(cublasDestroy(handle));
  return 0;
}
