// Exercises ch10.3 and ch10.4: FlashAttention forward and backward of one head on the CPU.
// q, k, v, o and their gradients are n rows of hs values (row i = query / key i): row i of q, k,
// v, dq, dk and dv starts at i * ld_qkv, row i of o and dout at i * ld_o (hs for [B, NH, T, hs]
// tensors; 3C and C for GPT-2's packed qkv [B, T, 3C] and its output [B, T, C]); lse is [n].
// The glue (checks, the parallel loop over heads, registration) is in flash_attention.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tt/eigen.h"
#include "tt/flash_attention.h"
#include "tt/safe_exp.h"
#include "tt/todo.h"

namespace tt::cpu {

namespace {

/// A tile of T values, row-major (a row of scores is contiguous, as OnlineSoftmax::merge reads it).
template <typename T>
using Tile = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// `rows` rows of hs values of q, k, v, o, ... in place: rows `ld` apart (no copy).
template <typename T>
using Rows = Eigen::Map<Tile<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T>
using ConstRows = Eigen::Map<const Tile<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

template <typename T>
Rows<T> rows_of(T* p, int64_t rows, int64_t hs, int64_t ld) {
  return Rows<T>(p, rows, hs, Eigen::OuterStride<>(ld));
}
template <typename T>
ConstRows<T> rows_of(const T* p, int64_t rows, int64_t hs, int64_t ld) {
  return ConstRows<T>(p, rows, hs, Eigen::OuterStride<>(ld));
}

}  // namespace

template <typename T>
void flash_attention_forward_head(const T* q, const T* k, const T* v, T* o, T* lse, int64_t n,
                                  int64_t hs, int64_t ld_qkv, int64_t ld_o) {
#if TT_SOLUTION
  // The tile products S = Q K^T and O += P V are Eigen matrix products on views of the rows;
  // the online softmax between them goes row by row.
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  Tile<T> s(kFlashBlockQ, kFlashBlockK);  // one tile's scores, then its weights
  Tile<T> acc(kFlashBlockQ, hs);          // unnormalized O of the query tile
  std::vector<OnlineSoftmax<T>> rows(static_cast<std::size_t>(kFlashBlockQ));
  for (int64_t i0 = 0; i0 < n; i0 += kFlashBlockQ) {
    const int64_t i1 = std::min(n, i0 + kFlashBlockQ), bq = i1 - i0;
    const ConstRows<T> qi = rows_of(q + i0 * ld_qkv, bq, hs, ld_qkv);
    auto a = acc.topRows(bq);
    a.setZero();
    std::fill(rows.begin(), rows.end(), OnlineSoftmax<T>{});
    // Causal: key tiles that start after the tile's last query row are skipped entirely.
    for (int64_t j0 = 0; j0 < i1; j0 += kFlashBlockK) {
      const int64_t j1 = std::min(i1, j0 + kFlashBlockK), bk = j1 - j0;
      const ConstRows<T> kj = rows_of(k + j0 * ld_qkv, bk, hs, ld_qkv);
      auto p = s.topLeftCorner(bq, bk);
      p.noalias() = (qi * scale) * kj.transpose();
      for (int64_t r = 0; r < bq; ++r) {
        const int64_t m = std::clamp<int64_t>(i0 + r + 1 - j0, 0, bk);  // keys j0 .. j0+m-1 <= i
        if (m > 0) a.row(r) *= rows[r].merge(&p(r, 0), m);
        p.row(r).tail(bk - m).setZero();  // keys above row i's diagonal: weight 0
      }
      a.noalias() += p * rows_of(v + j0 * ld_qkv, bk, hs, ld_qkv);
    }
    for (int64_t r = 0; r < bq; ++r) {
      const OnlineSoftmax<T>& row = rows[r];
      // sum >= 1: row i always sees key i.
      rows_of(o + (i0 + r) * ld_o, 1, hs, ld_o) = a.row(r) * (T(1) / row.sum);
      lse[i0 + r] = row.logsumexp();
    }
  }
#else
  (void)q, (void)k, (void)v, (void)o, (void)lse, (void)n, (void)hs, (void)ld_qkv, (void)ld_o;
  TT_TODO("ch10.3",
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
  using Column = Eigen::Array<T, Eigen::Dynamic, 1>;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  // D_i = rowsum(dO o O): the softmax backward's sum_j P_ij dP_ij, without P.
  const ConstRows<T> dout_all = rows_of(dout, n, hs, ld_o);
  const Column d = dout_all.cwiseProduct(rows_of(o, n, hs, ld_o)).rowwise().sum();
  rows_of(dq, n, hs, ld_qkv).setZero();
  rows_of(dk, n, hs, ld_qkv).setZero();
  rows_of(dv, n, hs, ld_qkv).setZero();
  Tile<T> s(kFlashBlockQ, kFlashBlockK), ds(kFlashBlockQ, kFlashBlockK);
  // Outer loop over key tiles: their dK and dV rows stay hot while every query tile with a row
  // i >= j0 (causal: the rows that see at least one key of the tile) passes by. Every product
  // is an Eigen matrix product of a tile.
  for (int64_t j0 = 0; j0 < n; j0 += kFlashBlockK) {
    const int64_t j1 = std::min(n, j0 + kFlashBlockK), bk = j1 - j0;
    const ConstRows<T> kj = rows_of(k + j0 * ld_qkv, bk, hs, ld_qkv);
    const ConstRows<T> vj = rows_of(v + j0 * ld_qkv, bk, hs, ld_qkv);
    Rows<T> dkj = rows_of(dk + j0 * ld_qkv, bk, hs, ld_qkv);
    Rows<T> dvj = rows_of(dv + j0 * ld_qkv, bk, hs, ld_qkv);
    for (int64_t i0 = j0 / kFlashBlockQ * kFlashBlockQ; i0 < n; i0 += kFlashBlockQ) {
      const int64_t bq = std::min(n, i0 + kFlashBlockQ) - i0;
      const ConstRows<T> qi = rows_of(q + i0 * ld_qkv, bq, hs, ld_qkv);
      const ConstRows<T> doi = rows_of(dout + i0 * ld_o, bq, hs, ld_o);
      auto p = s.topLeftCorner(bq, bk);
      auto dsi = ds.topLeftCorner(bq, bk);
      p.noalias() = (qi * scale) * kj.transpose();
      for (int64_t r = 0; r < bq; ++r) {  // row by row: contiguous rows, SIMD exp
        const int64_t i = i0 + r, m = std::clamp<int64_t>(i + 1 - j0, 0, bk);
        p.row(r).head(m).array() -= lse[i];
        safe_exp_inplace(&p(r, 0), m);    // P recomputed (0 where it underflows, on every CPU)
        p.row(r).tail(bk - m).setZero();  // keys above row i's diagonal: P = 0
      }
      dvj.noalias() += p.transpose() * doi;  // dV = P^T dO
      dsi.noalias() = doi * vj.transpose();  // dP = dO V^T
      for (int64_t r = 0; r < bq; ++r) {     // dS = P o (dP - D) / sqrt(hs)
        dsi.row(r) = (p.row(r).array() * (dsi.row(r).array() - d[i0 + r]) * scale).matrix();
      }
      rows_of(dq + i0 * ld_qkv, bq, hs, ld_qkv).noalias() += dsi * kj;  // dQ = dS K / sqrt
      dkj.noalias() += dsi.transpose() * qi;                            // dK = dS^T Q / sqrt
    }
  }
#else
  (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)o, (void)lse;
  (void)n, (void)hs, (void)ld_qkv, (void)ld_o;
  TT_TODO("ch10.4",
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
