/// @file cpu_loops.h
/// @brief The element-wise CPU loops every CPU kernel is written with: a fast path for
/// contiguous operands and a chunked strided path (via strided_offsets) for everything else.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tt/tensor.h"

namespace tt {

/// Number of elements whose offsets are computed per strided_offsets call.
inline constexpr int64_t kCpuLoopChunk = 512;

/// Rows at least this long take the row path of the loops below: offsets are computed once per
/// row and the last dim is walked with its own stride (a loop that vectorizes when the stride is
/// 1 or 0, e.g. a bias [C] broadcast over the rows of [N, C]).
inline constexpr int64_t kCpuLoopMinRow = 16;

/// Calls fn(o, oa, ob, len) for each piece of [begin, end) that lies in one row of `shape` (its
/// last dim): o is the row-major index of the piece's first element, oa and ob its offsets under
/// strides sa and sb; the piece's elements follow at steps sa.back() and sb.back().
template <typename Fn>
void for_each_row_piece(const Shape& shape, const Strides& sa, const Strides& sb, int64_t begin,
                        int64_t end, Fn fn) {
  const int64_t n = shape.back();
  const Shape outer(shape.begin(), shape.end() - 1);
  const Strides outer_a(sa.begin(), sa.end() - 1), outer_b(sb.begin(), sb.end() - 1);
  int64_t ra[kCpuLoopChunk], rb[kCpuLoopChunk];
  for (int64_t r0 = begin / n; r0 * n < end; r0 += kCpuLoopChunk) {
    const int64_t rows = std::min(kCpuLoopChunk, (end - 1) / n + 1 - r0);
    strided_offsets(outer, outer_a, outer_b, r0, rows, ra, rb);
    for (int64_t k = 0; k < rows; ++k) {
      const int64_t row_start = (r0 + k) * n;
      const int64_t j0 = std::max<int64_t>(begin - row_start, 0);
      const int64_t j1 = std::min<int64_t>(end - row_start, n);
      fn(row_start + j0, ra[k] + j0 * sa.back(), rb[k] + j0 * sb.back(), j1 - j0);
    }
  }
}

/// out[i] = f(a[i], b[i]) for the row-major indices i in [begin, end) (end = -1: all elements).
/// `out` must be contiguous with a's shape; `a` and `b` have the same shape and any strides
/// (stride 0 for broadcast dims). T is the element type of all three. Elements are visited in
/// row-major order. The range lets a parallel caller (chapter 04) give each thread one part.
template <typename T, typename F>
void cpu_binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f, int64_t begin = 0,
                     int64_t end = -1) {
  if (end < 0) end = out.numel();
  T* o = static_cast<T*>(out.data_ptr());
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  if (a.is_contiguous() && b.is_contiguous()) {
    for (int64_t i = begin; i < end; ++i) o[i] = f(pa[i], pb[i]);
    return;
  }
  if (out.dim() > 0 && out.size(-1) >= kCpuLoopMinRow) {
    const int64_t sa = a.stride(-1), sb = b.stride(-1);
    for_each_row_piece(out.shape(), a.strides(), b.strides(), begin, end,
                       [&](int64_t i, int64_t oa, int64_t ob, int64_t len) {
                         T* orow = o + i;
                         const T* arow = pa + oa;
                         const T* brow = pb + ob;
                         if (sa == 1 && sb == 1) {
                           for (int64_t j = 0; j < len; ++j) orow[j] = f(arow[j], brow[j]);
                         } else if (sa == 1 && sb == 0) {
                           for (int64_t j = 0; j < len; ++j) orow[j] = f(arow[j], *brow);
                         } else if (sa == 0 && sb == 1) {
                           for (int64_t j = 0; j < len; ++j) orow[j] = f(*arow, brow[j]);
                         } else {
                           for (int64_t j = 0; j < len; ++j)
                             orow[j] = f(arow[j * sa], brow[j * sb]);
                         }
                       });
    return;
  }
  int64_t oa[kCpuLoopChunk], ob[kCpuLoopChunk];
  for (int64_t chunk = begin; chunk < end; chunk += kCpuLoopChunk) {
    const int64_t count = std::min(kCpuLoopChunk, end - chunk);
    strided_offsets(out.shape(), a.strides(), b.strides(), chunk, count, oa, ob);
    for (int64_t i = 0; i < count; ++i) o[chunk + i] = f(pa[oa[i]], pb[ob[i]]);
  }
}

/// out[i] = f(a[i]) for the row-major indices i in [begin, end) (end = -1: all elements);
/// `out` contiguous, `a` any strides.
template <typename T, typename F>
void cpu_unary_loop(const Tensor& out, const Tensor& a, F f, int64_t begin = 0, int64_t end = -1) {
  if (end < 0) end = out.numel();
  T* o = static_cast<T*>(out.data_ptr());
  const T* pa = static_cast<const T*>(a.data_ptr());
  if (a.is_contiguous()) {
    for (int64_t i = begin; i < end; ++i) o[i] = f(pa[i]);
    return;
  }
  if (out.dim() > 0 && out.size(-1) >= kCpuLoopMinRow) {
    const int64_t sa = a.stride(-1);
    for_each_row_piece(out.shape(), a.strides(), a.strides(), begin, end,
                       [&](int64_t i, int64_t oa, int64_t, int64_t len) {
                         T* orow = o + i;
                         const T* arow = pa + oa;
                         if (sa == 1) {
                           for (int64_t j = 0; j < len; ++j) orow[j] = f(arow[j]);
                         } else {
                           for (int64_t j = 0; j < len; ++j) orow[j] = f(arow[j * sa]);
                         }
                       });
    return;
  }
  int64_t oa[kCpuLoopChunk], unused[kCpuLoopChunk];
  for (int64_t chunk = begin; chunk < end; chunk += kCpuLoopChunk) {
    const int64_t count = std::min(kCpuLoopChunk, end - chunk);
    strided_offsets(out.shape(), a.strides(), a.strides(), chunk, count, oa, unused);
    for (int64_t i = 0; i < count; ++i) o[chunk + i] = f(pa[oa[i]]);
  }
}

}  // namespace tt
