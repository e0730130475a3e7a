// Causal FlashAttention in bf16 on tensor cores (tt/flash_attention_bf16.h), given code: chapter
// 10's algorithm (separate dK/dV and dQ kernels; the forward's key-tile loop is the one of chapter
// 10's TF32 flash_forward_kernel) with bf16 operands, mma.sync.aligned.m16n8k16 (bf16 x bf16 ->
// fp32), ldmatrix fragment loads and cp.async double buffering of the streamed tiles. The
// backward keeps chapter 10's geometry (64-row tiles, 4 warps of 16 rows); the forward has
// FlashAttention-2's (128 query rows a block, 32 a warp: ForwardTiles). On a Hopper GPU
// flash_attention_bf16_sm90a.cu's kernels run instead when set_flash_attention_bf16_hopper(true).
//
// Layout. As in chapter 10 the kernels take strided views (FlashLayout): each (batch, head) is n
// rows of D bf16 values, row t of q, k, v, dq, dk, dv at t * in.row from the head's start, row t
// of o and dout at t * out.row; lse and D = rowsum(dO o O) are contiguous fp32 [B * NH, n].
// k, v, dk, dv have a layout of their own (`kv`, `in` unless grouped): with grouped-query
// attention they have NKV = NH / kv.group heads, query head h reads head h / kv.group in place,
// and the dK/dV kernel of a key/value head sums over its group's query heads in a fixed order.
//
// Masks. Every kernel has a template flag kCausal. true: n queries and n keys, query i sees keys
// j <= i, key tiles above the diagonal skipped (the registered causal kernels). false, the full
// mode of a rectangular block: n query rows against nk keys (their own row count), every key
// tile visited, the zero rows past nk in the last key tile masked to -inf (forward) or P = 0
// (dQ); the dK/dV kernel of a key tile loops over every query tile, and query rows past n are
// zeros there (dO = 0: they add nothing). With kCausal the full-mode branches compile away.
//
// Shared tiles are [64][D + 8] bf16: a row of D = 64 values is 128 bytes, so the 8 row addresses
// of one ldmatrix 8x8 matrix would all start in bank 0; the padding of 8 bf16 (16 bytes) moves
// each row 4 banks further and the 8 rows cover the 32 banks.
//
// Fragments (PTX ISA, mma.m16n8k16 .bf16; lane = 4 g + t, g = 0..7, t = 0..3; each register
// holds two consecutive bf16 of a row, the lower column in the low half):
//   A 16x16: a0 (g, 2t..2t+1)  a1 (g+8, 2t..2t+1)  a2 (g, 2t+8..2t+9)  a3 (g+8, 2t+8..2t+9)
//   B 16x8:  b0 (k 2t..2t+1, n g)   b1 (k 2t+8..2t+9, n g)
//   C 16x8:  c0, c1 (g, 2t..2t+1)   c2, c3 (g+8, 2t..2t+1)       (fp32)
// ldmatrix.x4 loads four 8x8 bf16 matrices, lane l giving the address of row l % 8 of matrix
// l / 8; each lane receives (row g, columns 2t, 2t+1) of each matrix, the A/B layouts above
// (.trans: (rows 2t, 2t+1, column g), the B layout of a row-major [k][n] tile). The C fragments
// of two neighbouring 8-column tiles of S are exactly the A fragment of the 16 keys they cover,
// so P goes from the scores to P V in registers (rounded to bf16) without a shuffle.
//
// Precision. Operands are bf16 (8 significant bits); every product is accumulated in fp32; the
// scores, the online softmax (max, sum), lse and D are fp32; P and dS are rounded to bf16 only
// as mma operands; O, dQ, dK, dV are accumulated in fp32 registers and rounded to bf16 once, at
// the store. dQ is computed by its own kernel (no atomics): the results are deterministic.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "flash_bf16_device.cuh"
#include "flash_bf16_sm90a.h"
#include "tt/cuda_device.h"
#include "tt/cuda_probe.h"
#include "tt/dispatcher.h"
#include "tt/flash_attention_bf16.h"

namespace tt::cuda {

namespace {

using namespace flash_bf16;

constexpr int kTile = 64;              // rows of a tile (queries or keys)
constexpr int kWarps = 4;              // warps of a block, 16 rows each
constexpr int kThreads = kWarps * 32;  // threads of a block
constexpr int kPad = 8;                // bf16 of padding per shared row (16 bytes)
constexpr int kChunk = 32;  // backward: streamed rows (keys or queries) per product of a warp

// Blocks per multiprocessor the backward kernels are compiled for (__launch_bounds__), which
// caps their registers at 65536 / (128 threads x blocks). hs <= 64: 4 (dQ, 128 registers) and 3
// (dK/dV, 168). hs 128 doubles the fp32 accumulators and the register fragments of the warp's
// 16 rows (dK/dV keeps 2 x 64 accumulators and 2 x 32 fragments per thread), and its tiles take
// 104 KB of shared memory, so only 2 blocks fit a multiprocessor anyway: 2 blocks, 255 registers.
template <int D>
inline constexpr int kDqBlocks = D <= 64 ? 4 : 2;
template <int D>
inline constexpr int kDkdvBlocks = D <= 64 ? 3 : 2;

// ----- PTX wrappers --------------------------------------------------------------------------

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)));
}

/// c += a b on the tensor cores: one 16x8x16 bf16 product, fp32 accumulation.
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ----- warp-level products ---------------------------------------------------------------------

/// The A fragments of the 16 x kK row-major shared matrix at a (leading dimension lda).
template <int kK>
__device__ __forceinline__ void load_a(uint32_t (&f)[kK / 16][4], const bf16* a, int lda) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < kK / 16; ++k)
    ldmatrix_x4(f[k], a + (lane % 16) * lda + k * 16 + lane / 16 * 8);
}

/// One warp: c (16 x kN, kN/8 C fragments) += A B^T, A given as fragments (load_a), B (kN x kK)
/// row-major in shared memory: e.g. S = Q K^T with K stored [key][hs].
template <int kN, int kK>
__device__ __forceinline__ void warp_mma_abt(float (&c)[kN / 8][4], const uint32_t (&a)[kK / 16][4],
                                             const bf16* b, int ldb) {
  const int lane = threadIdx.x % 32;
  // Lane l points at row (l % 8) + 8 (l / 16) of the 16 B rows, column 8 ((l / 8) % 2) of the k-step.
  const bf16* base = b + (lane % 8 + lane / 16 * 8) * ldb + (lane / 8) % 2 * 8;
#pragma unroll
  for (int k = 0; k < kK / 16; ++k) {
#pragma unroll
    for (int n = 0; n < kN / 16; ++n) {
      uint32_t r[4];
      ldmatrix_x4(r, base + n * 16 * ldb + k * 16);
      mma(c[2 * n], a[k], r[0], r[1]);
      mma(c[2 * n + 1], a[k], r[2], r[3]);
    }
  }
}

/// One warp, kMt row tiles of 16: c[i] (16 x kN) += A_i B^T, A_i the 16 x kK row-major shared
/// rows at a + 16 i lda, B (kN x kK) row-major in shared memory: e.g. S = Q K^T for 32 query rows.
/// The A fragments are loaded per k-step (not kept in registers) and every B fragment serves the
/// kMt tiles, so a warp of 32 rows reads half the shared bytes per product of one of 16.
template <int kMt, int kN, int kK>
__device__ __forceinline__ void warp_mma_abt_rows(float (&c)[kMt][kN / 8][4], const bf16* a,
                                                  int lda, const bf16* b, int ldb) {
  const int lane = threadIdx.x % 32;
  const bf16* abase = a + (lane % 16) * lda + lane / 16 * 8;
  const bf16* base = b + (lane % 8 + lane / 16 * 8) * ldb + (lane / 8) % 2 * 8;
#pragma unroll
  for (int k = 0; k < kK / 16; ++k) {
    uint32_t f[kMt][4];
#pragma unroll
    for (int i = 0; i < kMt; ++i) ldmatrix_x4(f[i], abase + i * 16 * lda + k * 16);
#pragma unroll
    for (int n = 0; n < kN / 16; ++n) {
      uint32_t r[4];
      ldmatrix_x4(r, base + n * 16 * ldb + k * 16);
#pragma unroll
      for (int i = 0; i < kMt; ++i) {
        mma(c[i][2 * n], f[i], r[0], r[1]);
        mma(c[i][2 * n + 1], f[i], r[2], r[3]);
      }
    }
  }
}

/// One warp, kMt row tiles of 16: c[i] (16 x kN) += P_i B, P_i (16 x kK) the fp32 C fragments of
/// warp_mma_abt_rows (rounded to bf16 here), B (kK x kN) row-major in shared memory: e.g.
/// O += P V for 32 query rows, each V fragment serving the kMt tiles.
template <int kMt, int kN, int kK>
__device__ __forceinline__ void warp_mma_pb_rows(float (&c)[kMt][kN / 8][4],
                                                 const float (&p)[kMt][kK / 8][4], const bf16* b,
                                                 int ldb) {
  const int lane = threadIdx.x % 32;
  const bf16* base = b + (lane % 8 + (lane / 8) % 2 * 8) * ldb + lane / 16 * 8;
#pragma unroll
  for (int k = 0; k < kK / 16; ++k) {
    uint32_t a[kMt][4];
#pragma unroll
    for (int i = 0; i < kMt; ++i) a_fragment<kK>(a[i], p[i], k);
#pragma unroll
    for (int n = 0; n < kN / 16; ++n) {
      uint32_t r[4];
      ldmatrix_x4_trans(r, base + k * 16 * ldb + n * 16);
#pragma unroll
      for (int i = 0; i < kMt; ++i) {
        mma(c[i][2 * n], a[i], r[0], r[1]);
        mma(c[i][2 * n + 1], a[i], r[2], r[3]);
      }
    }
  }
}

/// One warp: c (16 x kN) += P B, with P (16 x kK) the fp32 C fragments of a previous
/// warp_mma_abt (rounded to bf16 here) and B (kK x kN) row-major in shared memory: e.g. O += P V
/// with V stored [key][hs]. warp_mma_pb_rows for one row tile.
template <int kN, int kK>
__device__ __forceinline__ void warp_mma_pb(float (&c)[kN / 8][4], const float (&p)[kK / 8][4],
                                            const bf16* b, int ldb) {
  warp_mma_pb_rows<1, kN, kK>(reinterpret_cast<float(&)[1][kN / 8][4]>(c),
                              reinterpret_cast<const float(&)[1][kK / 8][4]>(p), b, ldb);
}

// ----- tiles -------------------------------------------------------------------------------------

/// The whole block starts copying rows [row0, row0 + kRows) of n rows of D bf16, `ld` apart (a
/// multiple of 8), into the shared tile dst [kRows][D + kPad] (cp.async, 16 bytes per copy);
/// rows at or beyond n become zeros. The caller commits and waits.
template <int D, int kRows = kTile>
__device__ __forceinline__ void load_tile_async(bf16* dst, const bf16* src, int row0, int n,
                                                int64_t ld) {
  constexpr int kVecs = D / 8;  // 16-byte pieces per row
  for (int i = threadIdx.x; i < kRows * kVecs; i += kThreads) {
    const int r = i / kVecs, c = (i % kVecs) * 8;
    const bool valid = row0 + r < n;
    cp_async_16(dst + r * (D + kPad) + c, valid ? src + int64_t{row0 + r} * ld + c : src, valid);
  }
}

/// The double buffering of the K, V tiles (kRows keys each) that the forward and the dQ kernel
/// stream: starts the copy of key tile kt + 1 into buffer (kt + 1) % 2 of sk and sv (each two
/// tiles) when kt < last, then waits for this thread's copies of tile kt (and anything before).
/// The caller syncs the block before reading, and after reading before the next call.
template <int D, int kRows = kTile>
__device__ __forceinline__ void prefetch_kv(bf16* sk, bf16* sv, const bf16* k, const bf16* v,
                                            int kt, int last, int n, int64_t ld) {
  constexpr int kTileElems = kRows * (D + kPad);
  stage_next(kt < last, [&] {
    const int nb = (kt + 1) % 2;
    load_tile_async<D, kRows>(sk + nb * kTileElems, k, (kt + 1) * kRows, n, ld);
    load_tile_async<D, kRows>(sv + nb * kTileElems, v, (kt + 1) * kRows, n, ld);
  });
}

// ----- forward -----------------------------------------------------------------------------------

/// The forward's tiling (FlashAttention-2's on sm_80/90): 4 warps of kMt = 2 row tiles of 16, so
/// a block takes kRows = 128 queries and a warp 32 (each K or V fragment it reads from shared
/// memory serves two row tiles), streaming kKeys keys per tile: 128 up to hs 64, 64 at hs 128
/// (the fp32 O of 32 rows of 128 already holds 128 registers a thread; 128 keys there spill).
/// Measured on an H200 (B8, T = 4096, one call of session 16, before the one-FFMA softmax):
/// 0.88 against 0.92 ms with 64 keys at hs 64, 0.79 against 1.51 ms with 128 keys at hs 128;
/// the previous tiling (64 queries, 16 rows a warp) took 1.02 and 1.01 ms.
template <int D>
struct ForwardTiles {
  static constexpr int kMt = 2;
  static constexpr int kRows = kWarps * 16 * kMt;
  static constexpr int kKeys = D <= 64 ? 128 : 64;
  /// Shared memory: the Q tile and two buffers of K and V tiles, in 64-row tiles of D + kPad.
  static constexpr int kSharedTiles = (kRows + 4 * kKeys) / kTile;
};

/// Grid (query tiles of ForwardTiles<D>::kRows, B * NH). Writes o and lse [n] of one head
/// (b, h) = blockIdx.y from its n query rows and nk keys (kCausal: nk = n, query i sees keys
/// j <= i; else every query sees every key). Shared: the Q tile and two buffers of K and V tiles
/// (the next pair loads while this one is used). Only the key tiles that reach past a warp's
/// first row (causal) or past nk (full) pay for the mask.
template <int D, bool kCausal>
__global__ void __launch_bounds__(kThreads, 2)
    flash_bf16_forward_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                              const bf16* __restrict__ v, bf16* __restrict__ o,
                              float* __restrict__ lse, int n, int nk, int nh, FlashLayout in,
                              FlashLayout kv, FlashLayout out, float scale_log2) {
  using Tiles = ForwardTiles<D>;
  constexpr int kMt = Tiles::kMt, kRows = Tiles::kRows, kKeys = Tiles::kKeys;
  constexpr int kLd = D + kPad, kKvElems = kKeys * kLd;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* sq = reinterpret_cast<bf16*>(smem_raw);  // [kRows][kLd]
  bf16* sk = sq + kRows * kLd;                   // [2][kKeys][kLd]
  bf16* sv = sk + 2 * kKvElems;                  // [2][kKeys][kLd]
  const int tile = gridDim.x - 1 - blockIdx.x;   // longest rows (most key tiles) start first
  const int64_t head = in.offset(blockIdx.y, nh), kvhead = kv.offset(blockIdx.y, nh);
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  const int row0 = tile * kRows + warp * 16 * kMt;  // the warp's first query row
  load_tile_async<D, kRows>(sq, q + head, tile * kRows, n, in.row);
  load_tile_async<D, kKeys>(sk, k + kvhead, 0, nk, kv.row);
  load_tile_async<D, kKeys>(sv, v + kvhead, 0, nk, kv.row);
  cp_async_commit();

  float acc[kMt][D / 8][4] = {};  // unnormalized O of rows g and g+8 of each row tile (C layout)
  float m[kMt][2], l[kMt][2];     // running max (base-2 scores) and this lane's part of the sums
#pragma unroll
  for (int i = 0; i < kMt; ++i) m[i][0] = m[i][1] = -INFINITY, l[i][0] = l[i][1] = 0.f;
  // Causal: the key tiles up to the block's last row (and the last key); full: every key tile.
  const int last_key_tile = (nk - 1) / kKeys;
  const int last = kCausal ? min(((tile + 1) * kRows - 1) / kKeys, last_key_tile) : last_key_tile;
  for (int kt = 0; kt <= last; ++kt) {
    prefetch_kv<D, kKeys>(sk, sv, k + kvhead, v + kvhead, kt, last, nk, kv.row);
    __syncthreads();
    const bf16* ck = sk + kt % 2 * kKvElems;
    const bf16* cv = sv + kt % 2 * kKvElems;

    float s[kMt][kKeys / 8][4] = {};
    warp_mma_abt_rows<kMt, kKeys, D>(s, sq + warp * 16 * kMt * kLd, kLd, ck, kLd);  // S = Q K^T
    // Causal: a key of this tile is after the warp's first row; full: keys past nk in it.
    const bool masked_tile =
        kCausal ? (kt + 1) * kKeys - 1 > row0 : kt == last && (kt + 1) * kKeys > nk;
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      const int rows = row0 + 16 * i + g;  // rows `rows` and rows + 8 of row tile i
      const int keys = kt * kKeys;
      float alpha[2];
      softmax_step<kKeys>(s[i], m[i], l[i], alpha, scale_log2, masked_tile, [&](int key, int h) {
        return kCausal ? keys + key > rows + 8 * h : keys + key >= nk;
      });
      rescale_rows<D>(acc[i], alpha);
    }
    warp_mma_pb_rows<kMt, D, kKeys>(acc, s, cv, kLd);  // O += P V
    __syncthreads();  // this buffer is refilled by the prefetch of iteration kt + 1
  }
#pragma unroll
  for (int i = 0; i < kMt; ++i) {
    softmax_finish<D>(acc[i], m[i], l[i], lse + int64_t{blockIdx.y} * n, row0 + 16 * i, n);
    store_rows<D>(o + out.offset(blockIdx.y, nh), acc[i], row0 + 16 * i, n, 1.f, out.row);
  }
}

// ----- backward ----------------------------------------------------------------------------------
//
// Two kernels, no atomics: the dQ kernel (one query tile per block, which also computes
// D = rowsum(dO o O) of its rows) and then the dK/dV kernel (one key tile per block). A warp takes
// the streamed 64-row tile in chunks of kChunk = 32 rows: P and dS need no statistic beyond lse
// and D, so the chunks are independent, and the scores of a chunk hold half the registers of a
// whole tile, enough for 4 (dQ) and 3 (dK/dV) blocks per multiprocessor instead of 3 and 2. The
// dK/dV kernel stages lse and D with cp.async like the tiles, so no global load stalls a step.

/// Grid (query tiles, B * NH): dQ of one query tile, looping over the key tiles it sees (K and V
/// double-buffered), and D = rowsum(dO o O) of its rows, written to dsum for the dK/dV kernel
/// (launched after this one).
template <int D, bool kCausal>
__global__ void __launch_bounds__(kThreads, kDqBlocks<D>)
    flash_bf16_backward_dq_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                                  const bf16* __restrict__ v, const bf16* __restrict__ dout,
                                  const bf16* __restrict__ o, const float* __restrict__ lse,
                                  float* __restrict__ dsum, bf16* __restrict__ dq, int n, int nk,
                                  int nh, FlashLayout in, FlashLayout kv, FlashLayout out,
                                  float scale_log2, float scale) {
  constexpr int kLd = D + kPad, kTileElems = kTile * kLd;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* sq = reinterpret_cast<bf16*>(smem_raw);
  bf16* sdo = sq + kTileElems;
  bf16* sk = sdo + kTileElems;     // [2][kTile][kLd]
  bf16* sv = sk + 2 * kTileElems;  // [2][kTile][kLd]
  const int tile = gridDim.x - 1 - blockIdx.x;
  const int64_t head = in.offset(blockIdx.y, nh), ohead = out.offset(blockIdx.y, nh);
  const bf16* kh = k + kv.offset(blockIdx.y, nh);  // the key/value head that head reads
  const bf16* vh = v + kv.offset(blockIdx.y, nh);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int row0 = tile * kTile + warp * 16;
  load_tile_async<D>(sq, q + head, tile * kTile, n, in.row);
  load_tile_async<D>(sdo, dout + ohead, tile * kTile, n, out.row);
  load_tile_async<D>(sk, kh, 0, nk, kv.row);
  load_tile_async<D>(sv, vh, 0, nk, kv.row);
  cp_async_commit();
  float lse2[2], drow[2];  // rows g, g+8: log-sum-exp in base 2, and D (while the tiles load)
  warp_rowdot<D>(drow, dout + ohead, o + ohead, dsum + int64_t{blockIdx.y} * n, row0, n, out.row);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + g + 8 * h;
    lse2[h] = row < n ? lse[int64_t{blockIdx.y} * n + row] * kLog2e : 0.f;
  }
  uint32_t qf[D / 16][4], dof[D / 16][4];
  float acc[D / 8][4] = {};                            // dQ * sqrt(hs) of rows g, g+8
  const int last = kCausal ? tile : (nk - 1) / kTile;  // the key tiles the rows see
  for (int kt = 0; kt <= last; ++kt) {
    prefetch_kv<D>(sk, sv, kh, vh, kt, last, nk, kv.row);
    __syncthreads();
    if (kt == 0) {
      load_a<D>(qf, sq + warp * 16 * kLd, kLd);
      load_a<D>(dof, sdo + warp * 16 * kLd, kLd);
    }
    const bf16* ck = sk + kt % 2 * kTileElems;
    const bf16* cv = sv + kt % 2 * kTileElems;
#pragma unroll 1
    for (int c = 0; c < kTile / kChunk; ++c) {  // chunks of kChunk keys
      const int key0 = kt * kTile + c * kChunk;
      // This chunk and the next ones are masked (causal: after the rows; full: past the keys).
      if (kCausal ? key0 > row0 + 15 : key0 >= nk) break;
      const bf16* chk = ck + c * kChunk * kLd;
      float s[kChunk / 8][4] = {}, dp[kChunk / 8][4] = {};
      warp_mma_abt<kChunk, D>(s, qf, chk, kLd);                      // S = Q K^T
      warp_mma_abt<kChunk, D>(dp, dof, cv + c * kChunk * kLd, kLd);  // dP = dO V^T
#pragma unroll
      for (int j = 0; j < kChunk / 8; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int h = i / 2, key = key0 + j * 8 + 2 * t + (i & 1);
          const bool masked = kCausal ? kt == tile && key > row0 + g + 8 * h : key >= nk;
          const float x = s[j][i] * scale_log2 - lse2[h];
          const float p = masked ? 0.f : exp2_ftz(x);  // P recomputed
          s[j][i] = p * (dp[j][i] - drow[h]);          // dS
        }
      }
      warp_mma_pb<D, kChunk>(acc, s, chk, kLd);  // dQ += dS K
    }
    __syncthreads();
  }
  store_rows<D>(dq + head, acc, row0, n, scale, in.row);
}

/// Grid (key tiles, B * NKV): dK and dV of one key tile of key/value head blockIdx.y, looping
/// over the kv.group query heads that read it (in order: a deterministic sum) and, for each, over
/// the query tiles that see the key tile (Q, dO and their lse, D double-buffered, all with
/// cp.async).
template <int D, bool kCausal>
__global__ void __launch_bounds__(kThreads, kDkdvBlocks<D>)
    flash_bf16_backward_dkdv_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k,
                                    const bf16* __restrict__ v, const bf16* __restrict__ dout,
                                    const float* __restrict__ lse, const float* __restrict__ dsum,
                                    bf16* __restrict__ dk, bf16* __restrict__ dv, int n, int nk,
                                    int nh, FlashLayout in, FlashLayout kv, FlashLayout out,
                                    float scale_log2, float scale) {
  static_assert(kThreads == 2 * kTile, "one thread per lse and per D value of a tile");
  constexpr int kLd = D + kPad, kTileElems = kTile * kLd;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* sk = reinterpret_cast<bf16*>(smem_raw);
  bf16* sv = sk + kTileElems;
  bf16* sq = sv + kTileElems;                                  // [2][kTile][kLd]
  bf16* sdo = sq + 2 * kTileElems;                             // [2][kTile][kLd]
  float* sl = reinterpret_cast<float*>(sdo + 2 * kTileElems);  // [2][kTile] lse (natural log)
  float* sd = sl + 2 * kTile;                                  // [2][kTile] D
  const int tile = blockIdx.x;  // key tile; tile 0 is seen by every query tile: first
  const int group = static_cast<int>(kv.group), nkv = nh / group;
  // The group's first query head (B * NH < 2^16).
  const int bh0 =
      static_cast<int>(blockIdx.y) / nkv * nh + static_cast<int>(blockIdx.y) % nkv * group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int row0 = tile * kTile + warp * 16;  // the warp's first key
  const int tiles = (n + kTile - 1) / kTile;  // query tiles
  // Step it of the loop: query head bh0 + it / span (the group's heads in order), query tile
  // qt0 + it % span (those that see this key tile: causal, from the diagonal on; full, all).
  const int qt0 = kCausal ? tile : 0, span = tiles - qt0, steps = group * span;
  // Starts copying the query tile of step it into buffer it % 2: Q, dO, and lse, D (threads
  // 0..63 and 64..127). Rows at or beyond n are zeros, lse and D included: there S^T = 0, so
  // P = 1, but dO = 0 and dS = 0, so they add nothing to dV += P^T dO and dK += dS^T Q. (Key
  // rows at or beyond nk are zeros too; their dK, dV rows are not stored.)
  auto stage = [&](int it) {
    const int bh = bh0 + it / span, qt = qt0 + it % span, b = it % 2;
    load_tile_async<D>(sq + b * kTileElems, q + in.offset(bh, nh), qt * kTile, n, in.row);
    load_tile_async<D>(sdo + b * kTileElems, dout + out.offset(bh, nh), qt * kTile, n, out.row);
    const int i = threadIdx.x % kTile, row = qt * kTile + i;
    const float* src = (threadIdx.x < kTile ? lse : dsum) + int64_t{bh} * n;
    cp_async_4((threadIdx.x < kTile ? sl : sd) + b * kTile + i, row < n ? src + row : src, row < n);
  };
  load_tile_async<D>(sk, k + kv.offset(bh0, nh), tile * kTile, nk, kv.row);
  load_tile_async<D>(sv, v + kv.offset(bh0, nh), tile * kTile, nk, kv.row);
  stage(0);
  cp_async_commit();
  uint32_t kf[D / 16][4], vf[D / 16][4];               // the warp's 16 keys, A fragments
  float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};  // keys g, g+8 of the warp
  for (int it = 0; it < steps; ++it) {
    const int qt = qt0 + it % span;
    stage_next(it + 1 < steps, [&] { stage(it + 1); });
    __syncthreads();
    if (it == 0) {
      load_a<D>(kf, sk + warp * 16 * kLd, kLd);
      load_a<D>(vf, sv + warp * 16 * kLd, kLd);
    }
    const int b = it % 2;
    const bf16* cq = sq + b * kTileElems;
    const bf16* cdo = sdo + b * kTileElems;
    const float* cl = sl + b * kTile;
    const float* cd = sd + b * kTile;
#pragma unroll 1
    for (int c = 0; c < kTile / kChunk; ++c) {  // chunks of kChunk queries
      // Causal: all masked when the chunk's last query is before the warp's first key.
      if (kCausal && qt == tile && qt * kTile + c * kChunk + kChunk - 1 < row0) continue;
      const bf16* chq = cq + c * kChunk * kLd;
      const bf16* chdo = cdo + c * kChunk * kLd;
      float st[kChunk / 8][4] = {}, dpt[kChunk / 8][4] = {};
      warp_mma_abt<kChunk, D>(st, kf, chq, kLd);    // S^T = K Q^T (keys x queries)
      warp_mma_abt<kChunk, D>(dpt, vf, chdo, kLd);  // dP^T = V dO^T
#pragma unroll
      for (int j = 0; j < kChunk / 8; ++j) {
        const int col = c * kChunk + j * 8 + 2 * t;  // queries col, col + 1 of the tile
        const float2 lj = *reinterpret_cast<const float2*>(cl + col);
        const float2 dj = *reinterpret_cast<const float2*>(cd + col);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int h = i / 2, e = i & 1;
          const bool masked = kCausal && qt == tile && row0 + g + 8 * h > qt * kTile + col + e;
          const float x = st[j][i] * scale_log2 - (e ? lj.y : lj.x) * kLog2e;
          const float p = masked ? 0.f : exp2_ftz(x);
          st[j][i] = p;
          dpt[j][i] = p * (dpt[j][i] - (e ? dj.y : dj.x));  // dS^T
        }
      }
      warp_mma_pb<D, kChunk>(dv_acc, st, chdo, kLd);  // dV += P^T dO
      warp_mma_pb<D, kChunk>(dk_acc, dpt, chq, kLd);  // dK += dS^T Q
    }
    __syncthreads();
  }
  store_rows<D>(dk + kv.offset(bh0, nh), dk_acc, row0, nk, scale, kv.row);
  store_rows<D>(dv + kv.offset(bh0, nh), dv_acc, row0, nk, 1.f, kv.row);
}

// ----- host side ---------------------------------------------------------------------------------

/// Checks the kernels' tensors (check_flash_cuda_tensors: bfloat16, hs 32, 64 or 128, 16-byte
/// addresses and strides for cp.async; k, v, dk, dv in `kv_inputs`, possibly grouped under the
/// causal mask, Tk rows of their own under the full one) and returns their geometry.
FlashGeometry check_bf16_tensors(const char* op, std::initializer_list<const Tensor*> inputs,
                                 std::initializer_list<const Tensor*> kv_inputs,
                                 std::initializer_list<const Tensor*> outputs, const Tensor& lse,
                                 FlashMask mask) {
  return check_flash_cuda_tensors(op, DType::kBFloat16, &flash_attention_bf16_supports,
                                  "32, 64 or 128", inputs, outputs, lse, kv_inputs, mask);
}

/// Calls f.template operator()<D>() for the head size (one of flash_attention_bf16_supports).
template <typename F>
void dispatch_head_size(int64_t hs, F&& f) {
  if (hs == 32) f.template operator()<32>();
  if (hs == 64) f.template operator()<64>();
  if (hs == 128) f.template operator()<128>();
}

/// Dynamic shared memory of `tiles` [kTile][D + kPad] bf16 tiles plus `extra` floats for kKernel
/// on device `dev`, allowed for it (chapter 06's allow_dynamic_shared_memory).
template <auto kKernel>
std::size_t shared_bytes(int dev, int d, int tiles, int extra = 0) {
  const std::size_t bytes =
      sizeof(bf16) * std::size_t(tiles) * kTile * (d + kPad) + sizeof(float) * extra;
  TT_CHECK(allow_dynamic_shared_memory(reinterpret_cast<const void*>(kKernel), bytes, dev),
           "cuda::flash_attention_bf16: hs = ", d, " needs ", bytes,
           " bytes of shared memory per block, device ", dev, " allows ",
           max_shared_memory_optin(dev),
           " (hs 128 needs a GPU with at least 105 KB per block: A100, H100)");
  return bytes;
}

const bf16* bf16_data(const Tensor& t) {
  return static_cast<const bf16*>(t.data_ptr());
}
bf16* bf16_data_mut(const Tensor& t) {
  return static_cast<bf16*>(t.data_ptr());
}

constexpr FlashMask mask_of(bool causal) {
  return causal ? FlashMask::kCausal : FlashMask::kFull;
}

/// Whether the forward runs on device `dev` as the Hopper kernel: set_flash_attention_bf16_hopper
/// is on and the device has compute capability 9.0 (sm_90a's instructions run there only).
bool runs_hopper_kernel(int dev) {
  return flash_attention_bf16_hopper_enabled() && cuda_compute_capability(dev) == 90;
}

// The forward kernel `op` of either mask (kCausal: a square causal call; else a full block).
template <bool kCausal>
void launch_forward(const char* op, const Tensor& out, const Tensor& lse, const Tensor& q,
                    const Tensor& k, const Tensor& v) {
  const FlashGeometry g = check_bf16_tensors(op, {&q}, {&k, &v}, {&out}, lse, mask_of(kCausal));
  if (q.numel() == 0) return;
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const int n = static_cast<int>(g.T), nk = static_cast<int>(g.Tk), nh = static_cast<int>(g.NH);
  const float scale_log2 = kLog2e / std::sqrt(static_cast<float>(g.hs));
  if (runs_hopper_kernel(dev)) {
    FlashSm90aForward f;
    f.q = bf16_data(q), f.k = bf16_data(k), f.v = bf16_data(v), f.o = bf16_data_mut(out);
    f.lse = lse.data<float>();
    f.n = n, f.nk = nk, f.nh = nh, f.hs = static_cast<int>(g.hs);
    f.bh = static_cast<unsigned>(g.B * g.NH);
    f.in = g.qkv, f.kv = g.kv, f.out = g.out, f.scale_log2 = scale_log2;
    f.device = dev, f.stream = stream(dev);
    flash_bf16_sm90a_forward(f, kCausal);
    return;
  }
  dispatch_head_size(g.hs, [&]<int D>() {
    using Tiles = ForwardTiles<D>;
    const dim3 grid((n + Tiles::kRows - 1) / Tiles::kRows, static_cast<unsigned>(g.B * g.NH));
    constexpr auto kernel = flash_bf16_forward_kernel<D, kCausal>;
    const std::size_t smem = shared_bytes<kernel>(dev, D, Tiles::kSharedTiles);
    kernel<<<grid, kThreads, smem, stream(dev)>>>(bf16_data(q), bf16_data(k), bf16_data(v),
                                                  bf16_data_mut(out), lse.data<float>(), n, nk, nh,
                                                  g.qkv, g.kv, g.out, scale_log2);
    TT_CUDA_CHECK_LAUNCH("flash_bf16_forward_kernel");
  });
}

// The backward kernel `op` of either mask (the dQ kernel, then the dK/dV kernel).
template <bool kCausal>
void launch_backward(const char* op, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                     const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& out, const Tensor& lse) {
  const FlashGeometry g =
      check_bf16_tensors(op, {&q, &dq}, {&k, &v, &dk, &dv}, {&out, &dout}, lse, mask_of(kCausal));
  if (q.numel() == 0) return;
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const int n = static_cast<int>(g.T), nk = static_cast<int>(g.Tk), nh = static_cast<int>(g.NH);
  const dim3 grid((n + kTile - 1) / kTile, static_cast<unsigned>(g.B * g.NH));
  const dim3 grid_kv((nk + kTile - 1) / kTile,
                     static_cast<unsigned>(g.B * (g.NH / g.kv.group)));  // key tiles, kv heads
  const float scale = 1.f / std::sqrt(static_cast<float>(g.hs)), scale_log2 = kLog2e * scale;
  const Tensor dsum = empty(lse.shape(), {DType::kFloat32, q.device()});
  if (runs_hopper_kernel(dev)) {
    FlashSm90aBackward f;
    f.q = bf16_data(q), f.k = bf16_data(k), f.v = bf16_data(v), f.dout = bf16_data(dout);
    f.o = bf16_data(out), f.lse = lse.data<float>(), f.dsum = dsum.data<float>();
    f.dq = bf16_data_mut(dq), f.dk = bf16_data_mut(dk), f.dv = bf16_data_mut(dv);
    f.n = n, f.nk = nk, f.nh = nh, f.hs = static_cast<int>(g.hs);
    f.bh = grid.y, f.bkv = grid_kv.y;
    f.in = g.qkv, f.kv = g.kv, f.out = g.out, f.scale_log2 = scale_log2, f.scale = scale;
    f.device = dev, f.stream = stream(dev);
    flash_bf16_sm90a_backward(f, kCausal);
    return;
  }
  dispatch_head_size(g.hs, [&]<int D>() {
    // dQ and D first: the dK/dV kernel reads D.
    constexpr auto dqk = flash_bf16_backward_dq_kernel<D, kCausal>;
    const std::size_t smem_q = shared_bytes<dqk>(dev, D, 6);
    dqk<<<grid, kThreads, smem_q, stream(dev)>>>(bf16_data(q), bf16_data(k), bf16_data(v),
                                                 bf16_data(dout), bf16_data(out), lse.data<float>(),
                                                 dsum.data<float>(), bf16_data_mut(dq), n, nk, nh,
                                                 g.qkv, g.kv, g.out, scale_log2, scale);
    TT_CUDA_CHECK_LAUNCH("flash_bf16_backward_dq_kernel");
    constexpr auto dkdv = flash_bf16_backward_dkdv_kernel<D, kCausal>;
    const std::size_t smem_kv = shared_bytes<dkdv>(dev, D, 6, 4 * kTile);
    dkdv<<<grid_kv, kThreads, smem_kv, stream(dev)>>>(
        bf16_data(q), bf16_data(k), bf16_data(v), bf16_data(dout), lse.data<float>(),
        dsum.data<float>(), bf16_data_mut(dk), bf16_data_mut(dv), n, nk, nh, g.qkv, g.kv, g.out,
        scale_log2, scale);
    TT_CUDA_CHECK_LAUNCH("flash_bf16_backward_dkdv_kernel");
  });
}

}  // namespace

void flash_attention_bf16_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                  const Tensor& k, const Tensor& v) {
  launch_forward<true>("flash_attention_bf16_forward", out, lse, q, k, v);
}

void flash_attention_bf16_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                   const Tensor& dout, const Tensor& q, const Tensor& k,
                                   const Tensor& v, const Tensor& out, const Tensor& lse) {
  launch_backward<true>("flash_attention_bf16_backward", dq, dk, dv, dout, q, k, v, out, lse);
}

void flash_attention_bf16_full_forward(const Tensor& out, const Tensor& lse, const Tensor& q,
                                       const Tensor& k, const Tensor& v) {
  launch_forward<false>("flash_attention_bf16_full_forward", out, lse, q, k, v);
}

void flash_attention_bf16_full_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                        const Tensor& dout, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& out, const Tensor& lse) {
  launch_backward<false>("flash_attention_bf16_full_backward", dq, dk, dv, dout, q, k, v, out, lse);
}

TT_REGISTER_KERNEL("flash_attention_bf16_forward", DeviceType::kCUDA,
                   cuda::flash_attention_bf16_forward);
TT_REGISTER_KERNEL("flash_attention_bf16_backward", DeviceType::kCUDA,
                   cuda::flash_attention_bf16_backward);
TT_REGISTER_KERNEL("flash_attention_bf16_full_forward", DeviceType::kCUDA,
                   cuda::flash_attention_bf16_full_forward);
TT_REGISTER_KERNEL("flash_attention_bf16_full_backward", DeviceType::kCUDA,
                   cuda::flash_attention_bf16_full_backward);

}  // namespace tt::cuda
