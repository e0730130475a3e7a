// Device code shared by chapter 11's two sets of bf16 FlashAttention kernels (given code): the
// portable mma.sync kernels (flash_attention_bf16.cu) and the Hopper warpgroup-MMA kernels
// (flash_attention_bf16_sm90a.cu). Both keep a warp's 16 query rows in the C-fragment layout of
// mma.m16n8k16 (which is also the layout of a wgmma accumulator, 16 rows per warp of the
// warpgroup): lane = 4 g + t holds rows g and g + 8, columns 8 j + 2 t and 8 j + 2 t + 1 of each
// 8-column block j, as c[j][0..1] (row g) and c[j][2..3] (row g + 8).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace tt::cuda::flash_bf16 {

using bf16 = __nv_bfloat16;

inline constexpr float kLog2e = 1.4426950408889634f;  // scores in base 2: exp(x) = 2^(x log2 e)
inline constexpr float kLn2 = 0.6931471805599453f;

// ----- PTX wrappers --------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Copies 16 bytes global -> shared without registers; when !valid, writes 16 zero bytes.
__device__ __forceinline__ void cp_async_16(bf16* dst, const bf16* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
/// Copies 4 bytes global -> shared without registers (cp.async); when !valid, writes 4 zero bytes.
__device__ __forceinline__ void cp_async_4(float* dst, const float* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n");
}
/// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
/// One step of a cp.async double buffer: when `more`, issues the next stage's copies (`issue()`)
/// as one commit group and waits until only that group may still be in flight, so this thread's
/// copies of the current stage have landed; else (the last stage) waits for every group. The
/// caller syncs the block before reading the current stage.
template <typename Issue>
__device__ __forceinline__ void stage_next(bool more, Issue&& issue) {
  if (more) {
    issue();
    cp_async_commit();
    cp_async_wait<1>();
  } else {
    cp_async_wait<0>();
  }
}

/// Two floats rounded to bf16 (nearest even) in one register, `lo` in the low half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

/// The A fragment (16 x 16, bf16) of keys 16 k .. 16 k + 15 from the fp32 C fragments of the
/// two 8-key blocks 2 k and 2 k + 1 of a warp's scores: they are the same lanes and rows.
template <int kKeys>
__device__ __forceinline__ void a_fragment(uint32_t (&a)[4], const float (&p)[kKeys / 8][4],
                                           int k) {
  a[0] = pack_bf16(p[2 * k][0], p[2 * k][1]);
  a[1] = pack_bf16(p[2 * k][2], p[2 * k][3]);
  a[2] = pack_bf16(p[2 * k + 1][0], p[2 * k + 1][1]);
  a[3] = pack_bf16(p[2 * k + 1][2], p[2 * k + 1][3]);
}

/// 2^x on the special-function unit with results below 2^-126 flushed to zero (ex2.approx.ftz):
/// exact enough for softmax weights 2^(s - max) <= 1 (2^-inf = 0), and fewer instructions than
/// exp2f, whose ex2.approx (no .ftz) scales its argument and result to keep the denormals.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// ----- the forward's online softmax ------------------------------------------------------------

/// One step of the online softmax of a warp's 16 query rows over a tile of kKeys keys. On entry
/// s holds the raw scores Q K^T of the tile; on exit P = 2^(s scale_log2 - m) with m the new
/// running maximum (base 2) of each row, l (this lane's part of each row's sum) rescaled and P's
/// sums added, and alpha = 2^(m_old - m), the factor the caller applies to the unnormalized O
/// (rescale_rows) before adding P V. When `mask_tile`, the scores for which masked(key, h) holds
/// (key: the column 0 .. kKeys - 1 in the tile, h: row g or g + 8) become -inf, i.e. P = 0.
template <int kKeys, typename Masked>
__device__ __forceinline__ void softmax_step(float (&s)[kKeys / 8][4], float (&m)[2], float (&l)[2],
                                             float (&alpha)[2], float scale_log2, bool mask_tile,
                                             const Masked& masked) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // The maximum of the raw scores (scale_log2 > 0 keeps the order); masked ones become -inf.
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (mask_tile && masked(j * 8 + 2 * t + e, h)) s[j][2 * h + e] = -INFINITY;
        mx = fmaxf(mx, s[j][2 * h + e]);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // a row lies in the 4 lanes of a quad
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[h], mx * scale_log2);  // base 2; -inf while all are masked
    const float base = m_new == -INFINITY ? 0.f : m_new;
    alpha[h] = exp2_ftz(m[h] - base);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        // One FFMA and one ex2 per score: 2^(s scale_log2 - base); 2^-inf = 0.
        const float p = exp2_ftz(fmaf(s[j][2 * h + e], scale_log2, -base));
        s[j][2 * h + e] = p;
        sum += p;
      }
    }
    l[h] = l[h] * alpha[h] + sum;
    m[h] = m_new;
  }
}

/// acc (a warp's 16 x D rows, C layout) times alpha[0] (row g) and alpha[1] (row g + 8).
template <int D>
__device__ __forceinline__ void rescale_rows(float (&acc)[D / 8][4], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    acc[j][0] *= alpha[0];
    acc[j][1] *= alpha[0];
    acc[j][2] *= alpha[1];
    acc[j][3] *= alpha[1];
  }
}

/// The end of a warp's forward for its rows row0 .. row0 + 15 (those below n): the quad's sums
/// completed, lse[row] = (m + log2 sum) ln 2 written (natural log), acc normalized by the sums.
template <int D>
__device__ __forceinline__ void softmax_finish(float (&acc)[D / 8][4], const float (&m)[2],
                                               const float (&l)[2], float* lse, int row0, int n) {
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float total = l[h] + __shfl_xor_sync(0xffffffffu, l[h], 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    inv[h] = 1.f / total;
    const int row = row0 + g + 8 * h;
    if (t == 0 && row < n) lse[row] = (m[h] + log2f(total)) * kLn2;
  }
  rescale_rows<D>(acc, inv);
}

/// Writes a warp's 16 x D fp32 accumulator c, times `scale`, as bf16 rows `ld` apart at dst,
/// for the rows below n; `row0` is the warp's first row.
template <int D>
__device__ __forceinline__ void store_rows(bf16* dst, const float (&c)[D / 8][4], int row0, int n,
                                           float scale, int64_t ld) {
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + g + 8 * h;
    if (row >= n) continue;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      *reinterpret_cast<uint32_t*>(dst + int64_t{row} * ld + j * 8 + 2 * t) =
          pack_bf16(c[j][2 * h] * scale, c[j][2 * h + 1] * scale);
    }
  }
}

// ----- the backward's row statistic ---------------------------------------------------------------

/// One warp: D = sum_c dout[row, c] o[row, c] in fp32 for its 16 rows row0 .. row0 + 15 of one
/// head (dout, o at the head's start, rows `ld` apart), written to d[row] for the rows below n;
/// returns, in the C layout, D of rows g and g + 8 (0 beyond n). Lanes 2r, 2r + 1 read the two
/// halves of row r with 16-byte loads.
template <int D>
__device__ __forceinline__ void warp_rowdot(float (&drow)[2], const bf16* dout, const bf16* o,
                                            float* d, int row0, int n, int64_t ld) {
  const int lane = threadIdx.x % 32, g = lane >> 2, row = row0 + lane / 2;
  float s = 0.f;
  if (row < n) {
    const int64_t at = int64_t{row} * ld + lane % 2 * (D / 2);
#pragma unroll
    for (int c = 0; c < D / 2; c += 8) {
      const uint4 a = *reinterpret_cast<const uint4*>(dout + at + c);
      const uint4 b = *reinterpret_cast<const uint4*>(o + at + c);
      const auto* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
      const auto* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 x = __bfloat1622float2(a2[e]), y = __bfloat1622float2(b2[e]);
        s += x.x * y.x + x.y * y.y;
      }
    }
  }
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  if (lane % 2 == 0 && row < n) d[row] = s;
  drow[0] = __shfl_sync(0xffffffffu, s, 2 * g);  // row g lies in lanes 2g, 2g + 1
  drow[1] = __shfl_sync(0xffffffffu, s, 2 * g + 16);
}

}  // namespace tt::cuda::flash_bf16
