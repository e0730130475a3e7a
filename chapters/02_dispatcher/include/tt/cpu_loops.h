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
  int64_t oa[kCpuLoopChunk], unused[kCpuLoopChunk];
  for (int64_t chunk = begin; chunk < end; chunk += kCpuLoopChunk) {
    const int64_t count = std::min(kCpuLoopChunk, end - chunk);
    strided_offsets(out.shape(), a.strides(), a.strides(), chunk, count, oa, unused);
    for (int64_t i = 0; i < count; ++i) o[chunk + i] = f(pa[oa[i]]);
  }
}

}  // namespace tt
