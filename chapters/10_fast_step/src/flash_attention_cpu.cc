// ============================================================================================
// YOUR EXERCISE FILE for chapter 10_fast_step. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch10
// Generated from solutions/10_fast_step/flash_attention_cpu.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
  (void)q, (void)k, (void)v, (void)o, (void)lse, (void)n, (void)hs, (void)ld_qkv, (void)ld_o;
  TT_TODO("ch10.3",
          "flash_attention_forward_head: o[i] = sum_{j<=i} softmax_j(q_i.k_j / sqrt(hs)) v_j and "
          "lse[i] = log sum_{j<=i} exp(q_i.k_j / sqrt(hs)) for n rows of hs values (q, k, v rows "
          "ld_qkv apart, o rows ld_o apart), any n >= 1, in tiles of kFlashBlockQ x kFlashBlockK "
          "with OnlineSoftmax; no n x n buffer, tiles above the diagonal skipped");
}

template <typename T>
void flash_attention_backward_head(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k,
                                   const T* v, const T* o, const T* lse, int64_t n, int64_t hs,
                                   int64_t ld_qkv, int64_t ld_o) {
  (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)o, (void)lse;
  (void)n, (void)hs, (void)ld_qkv, (void)ld_o;
  TT_TODO("ch10.4",
          "flash_attention_backward_head: dq, dk, dv (rows ld_qkv apart, like q, k, v; dout and "
          "o rows ld_o apart) of causal attention from dout, "
          "recomputing P_ij = exp(q_i.k_j / sqrt(hs) - lse[i]) tile by tile (no n x n buffer); "
          "with D_i = dout_i.o_i: dV = P^T dO, dS = P o (dO V^T - D), dQ = dS K / sqrt(hs), "
          "dK = dS^T Q / sqrt(hs)");
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
