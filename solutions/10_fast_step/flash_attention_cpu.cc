// Exercises ch10.2 and ch10.3: FlashAttention forward and backward of one head on the CPU.
// q, k, v, o and their gradients are n rows of hs values (row i = query / key i): row i of q, k,
// v, dq, dk and dv starts at i * ld_qkv, row i of o and dout at i * ld_o (hs for [B, NH, T, hs]
// tensors; 3C and C for GPT-2's packed qkv [B, T, 3C] and its output [B, T, C]); lse is [n].
// The glue (checks, the parallel loop over heads, registration) is in flash_attention.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tt/flash_attention.h"
#include "tt/todo.h"

namespace tt::cpu {

namespace {

/// sum_c a[c] * b[c] over hs elements (vectorized: the SIMD lanes keep partial sums, added in
/// a fixed order, so the result is the same on every run).
template <typename T>
T dot(const T* a, const T* b, int64_t hs) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < hs; ++c) s += a[c] * b[c];
  return s;
}

/// y[c] += w * x[c] over hs elements.
template <typename T>
void axpy(T* y, T w, const T* x, int64_t hs) {
#pragma omp simd
  for (int64_t c = 0; c < hs; ++c) y[c] += w * x[c];
}

}  // namespace

template <typename T>
void flash_attention_forward_head(const T* q, const T* k, const T* v, T* o, T* lse, int64_t n,
                                  int64_t hs, int64_t ld_qkv, int64_t ld_o) {
#if TT_SOLUTION
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  std::vector<T> acc(static_cast<std::size_t>(kFlashBlockQ * hs));  // unnormalized O of the tile
  std::vector<OnlineSoftmax<T>> rows(static_cast<std::size_t>(kFlashBlockQ));
  std::vector<T> p(static_cast<std::size_t>(kFlashBlockK));  // one row's scores, then weights
  for (int64_t i0 = 0; i0 < n; i0 += kFlashBlockQ) {
    const int64_t i1 = std::min(n, i0 + kFlashBlockQ);
    std::fill(acc.begin(), acc.end(), T(0));
    std::fill(rows.begin(), rows.end(), OnlineSoftmax<T>{});
    // Causal: key tiles that start after the tile's last query row are skipped entirely.
    for (int64_t j0 = 0; j0 < i1; j0 += kFlashBlockK) {
      const int64_t j1 = std::min(i1, j0 + kFlashBlockK);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t m = std::min(j1, i + 1) - j0;  // keys j0 .. j0+m-1 are <= i
        if (m <= 0) continue;                        // the whole tile is above row i's diagonal
        for (int64_t j = 0; j < m; ++j) {
          p[j] = dot(q + i * ld_qkv, k + (j0 + j) * ld_qkv, hs) * scale;
        }
        T* a = acc.data() + (i - i0) * hs;
        const T alpha = rows[i - i0].merge(p.data(), m);
        for (int64_t c = 0; c < hs; ++c) a[c] *= alpha;
        for (int64_t j = 0; j < m; ++j) axpy(a, p[j], v + (j0 + j) * ld_qkv, hs);
      }
    }
    for (int64_t i = i0; i < i1; ++i) {
      const OnlineSoftmax<T>& r = rows[i - i0];
      const T inv = T(1) / r.sum;  // sum >= 1: row i always sees key i
      for (int64_t c = 0; c < hs; ++c) o[i * ld_o + c] = acc[(i - i0) * hs + c] * inv;
      lse[i] = r.logsumexp();
    }
  }
#else
  (void)q, (void)k, (void)v, (void)o, (void)lse, (void)n, (void)hs, (void)ld_qkv, (void)ld_o;
  TT_TODO("ch10.2",
          "flash_attention_forward_head: o[i] = sum_{j<=i} softmax_j(q_i.k_j / sqrt(hs)) v_j and "
          "lse[i] = log sum_{j<=i} exp(q_i.k_j / sqrt(hs)) for n rows of hs values (q, k, v rows "
          "ld_qkv apart, o rows ld_o apart), any n >= 1, in tiles of kFlashBlockQ x kFlashBlockK "
          "with OnlineSoftmax; no n x n buffer, tiles above the diagonal skipped");
#endif
}

template <typename T>
void flash_attention_backward_head(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k,
                                   const T* v, const T* o, const T* lse, int64_t n, int64_t hs,
                                   int64_t ld_qkv, int64_t ld_o) {
#if TT_SOLUTION
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  // D_i = rowsum(dO o O): the softmax backward's sum_j P_ij dP_ij, without P.
  std::vector<T> d(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    d[i] = dot(dout + i * ld_o, o + i * ld_o, hs);
    std::fill_n(dq + i * ld_qkv, hs, T(0));
    std::fill_n(dk + i * ld_qkv, hs, T(0));
    std::fill_n(dv + i * ld_qkv, hs, T(0));
  }
  std::vector<T> p(static_cast<std::size_t>(kFlashBlockK));
  // Outer loop over key tiles: their dK and dV rows stay hot while every query row i >= j0
  // (causal: the rows that see at least one key of the tile) passes by.
  for (int64_t j0 = 0; j0 < n; j0 += kFlashBlockK) {
    const int64_t j1 = std::min(n, j0 + kFlashBlockK);
    for (int64_t i = j0; i < n; ++i) {
      const int64_t m = std::min(j1, i + 1) - j0;
      const T* qi = q + i * ld_qkv;
      const T* doi = dout + i * ld_o;
      for (int64_t j = 0; j < m; ++j) {
        p[j] = std::exp(dot(qi, k + (j0 + j) * ld_qkv, hs) * scale - lse[i]);  // P recomputed
      }
      for (int64_t j = 0; j < m; ++j) {
        const int64_t kj = (j0 + j) * ld_qkv;                       // row j0 + j of k, v, dk, dv
        axpy(dv + kj, p[j], doi, hs);                               // dV = P^T dO
        const T ds = p[j] * (dot(doi, v + kj, hs) - d[i]) * scale;  // dS = P o (dP - D)
        axpy(dq + i * ld_qkv, ds, k + kj, hs);                      // dQ = dS K / sqrt
        axpy(dk + kj, ds, qi, hs);                                  // dK = dS^T Q / sqrt
      }
    }
  }
#else
  (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)o, (void)lse;
  (void)n, (void)hs, (void)ld_qkv, (void)ld_o;
  TT_TODO("ch10.3",
          "flash_attention_backward_head: dq, dk, dv (rows ld_qkv apart, like q, k, v; dout and "
          "o rows ld_o apart) of causal attention from dout, "
          "recomputing P_ij = exp(q_i.k_j / sqrt(hs) - lse[i]) tile by tile (no n x n buffer); "
          "with D_i = dout_i.o_i: dV = P^T dO, dS = P o (dO V^T - D), dQ = dS K / sqrt(hs), "
          "dK = dS^T Q / sqrt(hs)");
#endif
}

template void flash_attention_forward_head<float>(const float*, const float*, const float*, float*,
                                                  float*, int64_t, int64_t, int64_t, int64_t);
template void flash_attention_forward_head<double>(const double*, const double*, const double*,
                                                   double*, double*, int64_t, int64_t, int64_t,
                                                   int64_t);
template void flash_attention_backward_head<float>(float*, float*, float*, const float*,
                                                   const float*, const float*, const float*,
                                                   const float*, const float*, int64_t, int64_t,
                                                   int64_t, int64_t);
template void flash_attention_backward_head<double>(double*, double*, double*, const double*,
                                                    const double*, const double*, const double*,
                                                    const double*, const double*, int64_t, int64_t,
                                                    int64_t, int64_t);

}  // namespace tt::cpu
