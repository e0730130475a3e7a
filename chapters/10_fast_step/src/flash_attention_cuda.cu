// ============================================================================================
// YOUR EXERCISE FILE for chapter 10_fast_step. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch10
// Generated from solutions/10_fast_step/flash_attention_cuda.cu by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Exercises ch10.5 and ch10.6: causal FlashAttention on the GPU, forward and backward, with the
// matrix products on tensor cores (TF32 mma.sync m16n8k8), registered under the CPU kernels'
// names ("flash_attention_forward", "flash_attention_backward"), so that tt::flash_attention runs
// on CUDA tensors unchanged.
//
// Layout. The kernels take strided views: each (batch, head) is n rows of D floats, row t of q, k,
// v, dq, dk, dv at t * in.row from the head's start (FlashLayout `in`), row t of o and dout at
// t * out.row (`out`); lse and D are contiguous [B * NH, n]. Contiguous [B, NH, T, hs] tensors
// have row = D; GPT-2's packed qkv [B, T, 3C] has in.row = 3C and out.row = C, so the heads are
// read and written where c_attn and c_proj want them, without copies. k, v, dk, dv have a layout
// of their own (`kv`, the same as `in` unless grouped): with grouped-query attention they have
// NKV = NH / kv.group heads, query head h reads head h / kv.group in place (kv.offset), and the
// dK/dV kernel of a key/value head sums over its group's query heads in a fixed order.
//
// Geometry. A block of 4 warps owns a tile of kTile = 64 rows (queries in the forward and the dQ
// kernel, keys in the dK/dV kernel); each warp owns 16 of them, the M of one mma. The other
// operand streams through shared memory in tiles of 64 rows. Shared tiles are [64][hs + 4]: the
// padding of 4 floats puts the 32 lanes of every fragment load in 32 different banks. Query
// tiles and key tiles have the same size, so the diagonal tile is the only one that needs the
// causal mask and every tile above it is skipped.
//
// Fragments (PTX ISA, mma.m16n8k8 .tf32; lane = 4 g + t, g = 0..7, t = 0..3):
//   A 16x8:  a0 (g, t)    a1 (g+8, t)    a2 (g, t+4)    a3 (g+8, t+4)
//   B 8x8:   b0 (t, g)    b1 (t+4, g)
//   C 16x8:  c0 (g, 2t)   c1 (g, 2t+1)   c2 (g+8, 2t)   c3 (g+8, 2t+1)
// The scores come out in C layout and go back in as the A operand of P V: instead of shuffling
// them between lanes, the 8 keys of a k-step are taken in the order 0,2,4,6,1,3,5,7 (k = t is
// key 2t, k = t + 4 is key 2t + 1) for A and for B alike; a sum does not depend on its order.
//
// Precision. TF32 keeps 10 of fp32's 23 mantissa bits of each operand (round to nearest), the
// products are accumulated in fp32, and the softmax statistics (max, sum, log-sum-exp) are fp32.
// When cuda::allow_tf32() is false, each product is done as three TF32 products ("3xTF32":
// a b ~ a_hi b_hi + a_hi b_lo + a_lo b_hi with a = a_hi + a_lo), as accurate as fp32 FMA for
// these sizes and still on tensor cores.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "tt/cuda_device.h"
#include "tt/cuda_matmul.h"
#include "tt/dispatcher.h"
#include "tt/flash_attention.h"
#include "tt/todo.h"

namespace tt::cuda {

namespace {

constexpr int kTile = 64;                      // rows of a tile (queries or keys)
constexpr int kWarps = 4;                      // warps of a block, 16 rows each
constexpr int kThreads = kWarps * 32;          // threads of a block
constexpr float kLog2e = 1.4426950408889634f;  // scores are kept in base 2: exp(x) = 2^(x log2 e)
constexpr float kLn2 = 0.6931471805599453f;

// ----- tensor-core helpers (given) ---------------------------------------------------------------

/// x rounded to TF32 (10 mantissa bits, round to nearest), as the bits of an fp32 number.
__device__ __forceinline__ uint32_t tf32_bits(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

/// An mma operand element: its TF32 value, and for 3xTF32 also the TF32 value of the remainder.
template <bool kExact>
struct Tf32 {
  uint32_t hi;
};
template <>
struct Tf32<true> {
  uint32_t hi, lo;
};

template <bool kExact>
__device__ __forceinline__ Tf32<kExact> split(float x) {
  Tf32<kExact> r;
  r.hi = tf32_bits(x);
  if constexpr (kExact) r.lo = tf32_bits(x - __uint_as_float(r.hi));
  return r;
}

/// An operand element read from a shared tile. In TF32 mode load_tile has already rounded the
/// tile to TF32 (once per element, instead of once per use by each of the 4 warps): its bits are
/// the operand. In 3xTF32 mode the tile holds fp32 values, split here.
template <bool kExact>
__device__ __forceinline__ Tf32<kExact> from_tile(float x) {
  if constexpr (kExact) {
    return split<true>(x);
  } else {
    return Tf32<false>{__float_as_uint(x)};
  }
}

/// c += a b for one 16x8x8 tile on the tensor cores (fragments in the layout above), in TF32,
/// or in 3xTF32 (the small cross terms first).
template <bool kExact>
__device__ __forceinline__ void mma(float (&c)[4], const Tf32<kExact> (&a)[4],
                                    const Tf32<kExact> (&b)[2]) {
  auto issue = [&c](uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  };
  if constexpr (kExact) {
    issue(a[0].lo, a[1].lo, a[2].lo, a[3].lo, b[0].hi, b[1].hi);
    issue(a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].lo, b[1].lo);
  }
  issue(a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
}

/// One warp: c (16 x kN, as kN/8 C fragments) += A B^T, with A (16 x kK) and B (kN x kK) both
/// row-major in shared memory (leading dimensions lda, ldb): e.g. S = Q K^T with Q and K stored
/// [row][hs].
template <bool kExact, int kN, int kK>
__device__ __forceinline__ void warp_mma_abt(float (&c)[kN / 8][4], const float* a, int lda,
                                             const float* b, int ldb) {
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int k0 = 0; k0 < kK; k0 += 8) {
    const Tf32<kExact> fa[4] = {from_tile<kExact>(a[g * lda + k0 + t]),
                                from_tile<kExact>(a[(g + 8) * lda + k0 + t]),
                                from_tile<kExact>(a[g * lda + k0 + t + 4]),
                                from_tile<kExact>(a[(g + 8) * lda + k0 + t + 4])};
#pragma unroll
    for (int n = 0; n < kN / 8; ++n) {
      const float* bn = b + (n * 8 + g) * ldb + k0 + t;
      const Tf32<kExact> fb[2] = {from_tile<kExact>(bn[0]), from_tile<kExact>(bn[4])};
      mma<kExact>(c[n], fa, fb);
    }
  }
}

/// One warp: c (16 x kN) += P B, with P (16 x kK) the C fragments of a previous warp_mma_abt
/// (kK/8 of them, in registers) and B (kK x kN) row-major in shared memory: e.g. O += P V with V
/// stored [key][hs]. Keys are taken in the permuted order of the file comment.
template <bool kExact, int kN, int kK>
__device__ __forceinline__ void warp_mma_pb(float (&c)[kN / 8][4], const float (&p)[kK / 8][4],
                                            const float* b, int ldb) {
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int k8 = 0; k8 < kK / 8; ++k8) {
    const Tf32<kExact> fa[4] = {split<kExact>(p[k8][0]), split<kExact>(p[k8][2]),
                                split<kExact>(p[k8][1]), split<kExact>(p[k8][3])};
    const float* b0 = b + (k8 * 8 + 2 * t) * ldb + g;  // key 2t of the k-step; b0 + ldb: 2t + 1
#pragma unroll
    for (int n = 0; n < kN / 8; ++n) {
      const Tf32<kExact> fb[2] = {from_tile<kExact>(b0[n * 8]), from_tile<kExact>(b0[ldb + n * 8])};
      mma<kExact>(c[n], fa, fb);
    }
  }
}

/// The whole block copies rows [row0, row0 + kTile) of n rows of D floats, `ld` floats apart
/// (a multiple of 4), into the shared tile dst [kTile][D + 4] with 16-byte loads; rows at or
/// beyond n are zero. With kRound (TF32 mode) the values are stored rounded to TF32, ready for
/// from_tile.
template <int D, bool kRound>
__device__ __forceinline__ void load_tile(float* dst, const float* src, int row0, int n,
                                          int64_t ld) {
  constexpr int kVecs = D / 4;  // float4 per row
  for (int i = threadIdx.x; i < kTile * kVecs; i += kThreads) {
    const int r = i / kVecs, c = (i % kVecs) * 4;
    float4 val = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < n) val = *reinterpret_cast<const float4*>(src + int64_t{row0 + r} * ld + c);
    if constexpr (kRound) {
      val = make_float4(__uint_as_float(tf32_bits(val.x)), __uint_as_float(tf32_bits(val.y)),
                        __uint_as_float(tf32_bits(val.z)), __uint_as_float(tf32_bits(val.w)));
    }
    *reinterpret_cast<float4*>(dst + r * (D + 4) + c) = val;
  }
}

/// Writes the rows of a warp's 16 x D accumulator c, times `scale`, to rows of D floats `ld`
/// apart at dst, for the rows below n; `row0` is the warp's first row.
template <int D>
__device__ __forceinline__ void store_rows(float* dst, const float (&c)[D / 8][4], int row0, int n,
                                           float scale, int64_t ld) {
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + g + 8 * h;
    if (row >= n) continue;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      *reinterpret_cast<float2*>(dst + int64_t{row} * ld + j * 8 + 2 * t) =
          make_float2(c[j][2 * h] * scale, c[j][2 * h + 1] * scale);
    }
  }
}

// ----- forward (exercise ch10.5) -----------------------------------------------------------------

/// Grid (query tiles, B * NH). Writes o and lse [n] of one head (b, h) = blockIdx.y.
template <int D, bool kExact>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(const float* __restrict__ q, const float* __restrict__ k,
                         const float* __restrict__ v, float* __restrict__ o,
                         float* __restrict__ lse, int n, int nh, FlashLayout in, FlashLayout kv,
                         FlashLayout out, float scale_log2) {
  constexpr int kLd = D + 4;
  extern __shared__ float smem[];
  float* sq = smem;
  float* sk = sq + kTile * kLd;
  float* sv = sk + kTile * kLd;
  const int tile = gridDim.x - 1 - blockIdx.x;  // longest rows (most key tiles) start first
  const int64_t head = in.offset(blockIdx.y, nh), kvhead = kv.offset(blockIdx.y, nh);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int row0 = tile * kTile + warp * 16;  // the warp's first query row
  const float* wq = sq + warp * 16 * kLd;
  load_tile<D, !kExact>(sq, q + head, tile * kTile, n, in.row);

  float acc[D / 8][4] = {};             // unnormalized O of rows g and g+8 (C layout)
  float m[2] = {-INFINITY, -INFINITY};  // running max of rows g, g+8 (base-2 scores)
  float l[2] = {0.f, 0.f};              // this lane's part of their running sums
  for (int kt = 0; kt <= tile; ++kt) {  // causal: key tiles 0 .. diagonal
    __syncthreads();                    // the previous K, V tiles are no longer read
    load_tile<D, !kExact>(sk, k + kvhead, kt * kTile, n, kv.row);
    load_tile<D, !kExact>(sv, v + kvhead, kt * kTile, n, kv.row);
    __syncthreads();
    // ch10.5, this loop's body: S = Q K^T (warp_mma_abt), scale, mask the diagonal tile, the
    // online softmax of rows g and g+8 (max over the quad, alpha, weights, l, acc *= alpha),
    // then O += P V (warp_mma_pb).
    (void)scale_log2, (void)wq;
    __trap();  // unreachable: the host wrapper throws TODO ch10.5 before launching
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float total = l[h] + __shfl_xor_sync(0xffffffffu, l[h], 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    l[h] = total;
    const int row = row0 + g + 8 * h;
    if (t == 0 && row < n) lse[int64_t{blockIdx.y} * n + row] = (m[h] + log2f(total)) * kLn2;
  }
  // Each row's 1 / sum: rows g and g+8 take different factors, so scale per half.
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    acc[j][0] /= l[0];
    acc[j][1] /= l[0];
    acc[j][2] /= l[1];
    acc[j][3] /= l[1];
  }
  store_rows<D>(o + out.offset(blockIdx.y, nh), acc, row0, n, 1.f, out.row);
}

// ----- backward (exercise ch10.6) ----------------------------------------------------------------

/// D[row] = sum_c dout[row, c] o[row, c] for the rows = (b * NH + h) * n + t of every head,
/// one warp per row (given).
template <int D>
__global__ void flash_backward_rowdot_kernel(const float* __restrict__ dout,
                                             const float* __restrict__ o, float* __restrict__ d,
                                             int64_t rows, int n, int nh, FlashLayout out) {
  const int64_t row = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int64_t at = out.offset(row / n, nh) + row % n * out.row;
  float s = 0.f;
  for (int c = lane; c < D; c += 32) s += dout[at + c] * o[at + c];
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) d[row] = s;
}

/// Grid (query tiles, B * NH): dQ of one query tile, looping over the key tiles it sees.
template <int D, bool kExact>
__global__ void __launch_bounds__(kThreads)
    flash_backward_dq_kernel(const float* __restrict__ q, const float* __restrict__ k,
                             const float* __restrict__ v, const float* __restrict__ dout,
                             const float* __restrict__ lse, const float* __restrict__ dsum,
                             float* __restrict__ dq, int n, int nh, FlashLayout in, FlashLayout kv,
                             FlashLayout out, float scale_log2, float scale) {
  constexpr int kLd = D + 4;
  extern __shared__ float smem[];
  float* sq = smem;
  float* sdo = sq + kTile * kLd;
  float* sk = sdo + kTile * kLd;
  float* sv = sk + kTile * kLd;
  const int tile = gridDim.x - 1 - blockIdx.x;
  const int64_t head = in.offset(blockIdx.y, nh), ohead = out.offset(blockIdx.y, nh);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int row0 = tile * kTile + warp * 16;
  const float* wq = sq + warp * 16 * kLd;
  const float* wdo = sdo + warp * 16 * kLd;
  (void)t;
  load_tile<D, !kExact>(sq, q + head, tile * kTile, n, in.row);
  load_tile<D, !kExact>(sdo, dout + ohead, tile * kTile, n, out.row);
  float lse2[2], drow[2];  // rows g, g+8: log-sum-exp in base 2, and D
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + g + 8 * h;
    lse2[h] = row < n ? lse[int64_t{blockIdx.y} * n + row] * kLog2e : 0.f;
    drow[h] = row < n ? dsum[int64_t{blockIdx.y} * n + row] : 0.f;
  }
  float acc[D / 8][4] = {};  // dQ * sqrt(hs) of rows g, g+8
  for (int kt = 0; kt <= tile; ++kt) {
    __syncthreads();
    // The key/value head that query head blockIdx.y reads (recomputed: fewer live registers).
    load_tile<D, !kExact>(sk, k + kv.offset(blockIdx.y, nh), kt * kTile, n, kv.row);
    load_tile<D, !kExact>(sv, v + kv.offset(blockIdx.y, nh), kt * kTile, n, kv.row);
    __syncthreads();
    // ch10.6, this loop's body: S = Q K^T and dP = dO V^T (warp_mma_abt), P = exp2(S - L) (0
    // on the masked part of the diagonal tile), dS = P (dP - D), then dQ += dS K (warp_mma_pb).
    (void)scale_log2, (void)wq, (void)wdo;
    __trap();  // unreachable: the host wrapper throws TODO ch10.6 before launching
  }
  store_rows<D>(dq + head, acc, row0, n, scale, in.row);
}

/// Grid (key tiles, B * NKV): dK and dV of one key tile of key/value head blockIdx.y, looping over
/// the kv.group query heads that read it (in order: a deterministic sum) and, for each, over the
/// query tiles that see the key tile.
template <int D, bool kExact>
__global__ void __launch_bounds__(kThreads)
    flash_backward_dkdv_kernel(const float* __restrict__ q, const float* __restrict__ k,
                               const float* __restrict__ v, const float* __restrict__ dout,
                               const float* __restrict__ lse, const float* __restrict__ dsum,
                               float* __restrict__ dk, float* __restrict__ dv, int n, int nh,
                               FlashLayout in, FlashLayout kv, FlashLayout out, float scale_log2,
                               float scale) {
  constexpr int kLd = D + 4;
  extern __shared__ float smem[];
  float* sk = smem;
  float* sv = sk + kTile * kLd;
  float* sq = sv + kTile * kLd;
  float* sdo = sq + kTile * kLd;
  float* sl = sdo + kTile * kLd;  // lse of the query tile, base 2 (+inf beyond n: P = 0)
  float* sd = sl + kTile;         // D of the query tile
  const int tile = blockIdx.x;    // key tile; tile 0 is seen by every query tile: first
  const int group = static_cast<int>(kv.group), nkv = nh / group;
  // The group's first query head (B * NH < 2^16).
  const int bh0 =
      static_cast<int>(blockIdx.y) / nkv * nh + static_cast<int>(blockIdx.y) % nkv * group;
  const int64_t kvhead = kv.offset(bh0, nh);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int row0 = tile * kTile + warp * 16;  // the warp's first key
  const float* wk = sk + warp * 16 * kLd;
  const float* wv = sv + warp * 16 * kLd;
  (void)g, (void)t;
  load_tile<D, !kExact>(sk, k + kvhead, tile * kTile, n, kv.row);
  load_tile<D, !kExact>(sv, v + kvhead, tile * kTile, n, kv.row);
  float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};  // keys g, g+8 of the warp
  const int tiles = (n + kTile - 1) / kTile;
  const int span = tiles - tile;               // query tiles that see this key tile, per query head
  for (int it = 0; it < group * span; ++it) {  // the group's query heads in order, then tiles
    const int bh = bh0 + it / span, qt = tile + it % span;
    const int64_t head = in.offset(bh, nh), ohead = out.offset(bh, nh);
    __syncthreads();
    load_tile<D, !kExact>(sq, q + head, qt * kTile, n, in.row);
    load_tile<D, !kExact>(sdo, dout + ohead, qt * kTile, n, out.row);
    for (int i = threadIdx.x; i < kTile; i += kThreads) {
      const int row = qt * kTile + i;
      sl[i] = row < n ? lse[int64_t{bh} * n + row] * kLog2e : INFINITY;
      sd[i] = row < n ? dsum[int64_t{bh} * n + row] : 0.f;
    }
    __syncthreads();
    // ch10.6, this loop's body: S^T = K Q^T and dP^T = V dO^T (warp_mma_abt), P^T (L and D of
    // the queries in sl, sd; 0 on the masked part of the diagonal tile), dS^T = P^T (dP^T - D),
    // then dV += P^T dO and dK += dS^T Q (warp_mma_pb).
    (void)scale_log2, (void)wk, (void)wv;
    __trap();  // unreachable: the host wrapper throws TODO ch10.6 before launching
  }
  store_rows<D>(dk + kvhead, dk_acc, row0, n, scale, kv.row);
  store_rows<D>(dv + kvhead, dv_acc, row0, n, 1.f, kv.row);
}

// ----- host side (given) ----------------------------------------------------

/// Checks the kernels' tensors: float32 on one CUDA device, hs one of 32, 64, 128, and the rest of
/// check_flash_cuda_tensors (16-byte addresses and strides for the float4 loads; k, v, dk, dv in
/// `kv_inputs`, possibly grouped). Returns their geometry.
FlashGeometry check_cuda_tensors(const char* op, std::initializer_list<const Tensor*> inputs,
                                 std::initializer_list<const Tensor*> kv_inputs,
                                 std::initializer_list<const Tensor*> outputs, const Tensor& lse) {
  return check_flash_cuda_tensors(
      op, DType::kFloat32,
      [](int64_t hs) { return flash_attention_supports(DeviceType::kCUDA, hs); }, "32, 64 or 128",
      inputs, outputs, lse, kv_inputs);
}

/// Calls f.template operator()<D, kExact>() for the head size and the TF32 setting.
template <typename F>
void dispatch_kernel(int64_t hs, F&& f) {
  const bool exact = !allow_tf32();
  auto with = [&]<int D>() {
    if (exact) {
      f.template operator()<D, true>();
    } else {
      f.template operator()<D, false>();
    }
  };
  if (hs == 32) with.template operator()<32>();
  if (hs == 64) with.template operator()<64>();
  if (hs == 128) with.template operator()<128>();
}

/// Dynamic shared memory of `tiles` [kTile][D + 4] tiles plus `extra` floats, for kKernel on
/// device `dev`. Above 48 KB a kernel must opt in with cudaFuncSetAttribute: chapter 06's
/// allow_dynamic_shared_memory does it once per kernel and device, not at every launch.
template <auto kKernel>
std::size_t shared_bytes(int dev, int d, int tiles, int extra = 0) {
  const std::size_t bytes = sizeof(float) * (std::size_t(tiles) * kTile * (d + 4) + extra);
  TT_CHECK(allow_dynamic_shared_memory(reinterpret_cast<const void*>(kKernel), bytes, dev),
           "cuda::flash_attention: hs = ", d, " needs ", bytes,
           " bytes of shared memory per block, device ", dev, " allows ",
           max_shared_memory_optin(dev));
  return bytes;
}

}  // namespace

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v) {
  const FlashGeometry g =
      check_cuda_tensors("flash_attention_forward", {&q}, {&k, &v}, {&out}, lse);
  if (q.numel() == 0) return;
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const int n = static_cast<int>(g.T), nh = static_cast<int>(g.NH);
  const dim3 grid((n + kTile - 1) / kTile, static_cast<unsigned>(g.B * g.NH));
  const float scale_log2 = kLog2e / std::sqrt(static_cast<float>(g.hs));
  dispatch_kernel(g.hs, [&]<int D, bool kExact>() {
    TT_TODO("ch10.5",
            "flash_forward_kernel: per 64-row query tile, O = softmax(Q K^T / sqrt(hs), causal) V "
            "and lse = log-sum-exp of each row, with S = Q K^T and O += P V on tensor cores "
            "(warp_mma_abt, warp_mma_pb), the online softmax per row across the quad, the "
            "diagonal tile masked; matches the float64 reference within the TF32 tolerance");
    constexpr auto kernel = flash_forward_kernel<D, kExact>;
    const std::size_t smem = shared_bytes<kernel>(dev, D, 3);
    kernel<<<grid, kThreads, smem, stream(dev)>>>(q.data<float>(), k.data<float>(), v.data<float>(),
                                                  out.data<float>(), lse.data<float>(), n, nh,
                                                  g.qkv, g.kv, g.out, scale_log2);
    TT_CUDA_CHECK_LAUNCH("flash_forward_kernel");
  });
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse) {
  const FlashGeometry g = check_cuda_tensors("flash_attention_backward", {&q, &dq},
                                             {&k, &v, &dk, &dv}, {&out, &dout}, lse);
  if (q.numel() == 0) return;
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const int n = static_cast<int>(g.T), nh = static_cast<int>(g.NH);
  const int64_t rows = g.B * g.NH * n;
  const dim3 grid((n + kTile - 1) / kTile, static_cast<unsigned>(g.B * g.NH));
  const dim3 grid_kv(grid.x, static_cast<unsigned>(g.B * (g.NH / g.kv.group)));  // kv heads
  const float scale = 1.f / std::sqrt(static_cast<float>(g.hs)), scale_log2 = kLog2e * scale;
  const Tensor dsum = empty(lse.shape(), {DType::kFloat32, q.device()});
  dispatch_kernel(g.hs, [&]<int D, bool kExact>() {
    TT_TODO("ch10.6",
            "flash_backward_dkdv_kernel and flash_backward_dq_kernel: dK, dV per 64-key tile "
            "and dQ per 64-query tile, recomputing P = exp(S - lse) on "
            "tensor cores, dS = P o (dP - D), dV = P^T dO, dK = dS^T Q / sqrt(hs), "
            "dQ = dS K / sqrt(hs), causal tiles skipped; matches the float64 reference");
    flash_backward_rowdot_kernel<D>
        <<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0, stream(dev)>>>(
            dout.data<float>(), out.data<float>(), dsum.data<float>(), rows, n, nh, g.out);
    TT_CUDA_CHECK_LAUNCH("flash_backward_rowdot_kernel");
    constexpr auto dkdv = flash_backward_dkdv_kernel<D, kExact>;
    const std::size_t smem_kv = shared_bytes<dkdv>(dev, D, 4, 2 * kTile);
    dkdv<<<grid_kv, kThreads, smem_kv, stream(dev)>>>(
        q.data<float>(), k.data<float>(), v.data<float>(), dout.data<float>(), lse.data<float>(),
        dsum.data<float>(), dk.data<float>(), dv.data<float>(), n, nh, g.qkv, g.kv, g.out,
        scale_log2, scale);
    TT_CUDA_CHECK_LAUNCH("flash_backward_dkdv_kernel");
    constexpr auto dqk = flash_backward_dq_kernel<D, kExact>;
    const std::size_t smem_q = shared_bytes<dqk>(dev, D, 4);
    dqk<<<grid, kThreads, smem_q, stream(dev)>>>(
        q.data<float>(), k.data<float>(), v.data<float>(), dout.data<float>(), lse.data<float>(),
        dsum.data<float>(), dq.data<float>(), n, nh, g.qkv, g.kv, g.out, scale_log2, scale);
    TT_CUDA_CHECK_LAUNCH("flash_backward_dq_kernel");
  });
}

TT_REGISTER_KERNEL("flash_attention_forward", DeviceType::kCUDA, cuda::flash_attention_forward);
TT_REGISTER_KERNEL("flash_attention_backward", DeviceType::kCUDA, cuda::flash_attention_backward);

}  // namespace tt::cuda
