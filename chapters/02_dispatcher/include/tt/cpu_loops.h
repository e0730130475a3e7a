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

/// out[i] = f(a[i], b[i]) over all elements. `out` must be contiguous with a's shape; `a` and
/// `b` have the same shape and any strides (stride 0 for broadcast dims). T is the element type
/// of all three. Elements are visited in row-major order.
template <typename T, typename F>
void cpu_binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  const int64_t n = out.numel();
  T* o = static_cast<T*>(out.data_ptr());
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  if (a.is_contiguous() && b.is_contiguous()) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(pa[i], pb[i]);
    return;
  }
  int64_t oa[kCpuLoopChunk], ob[kCpuLoopChunk];
  for (int64_t begin = 0; begin < n; begin += kCpuLoopChunk) {
    const int64_t count = std::min(kCpuLoopChunk, n - begin);
    strided_offsets(out.shape(), a.strides(), b.strides(), begin, count, oa, ob);
    for (int64_t i = 0; i < count; ++i) o[begin + i] = f(pa[oa[i]], pb[ob[i]]);
  }
}

/// out[i] = f(a[i]) over all elements; `out` contiguous, `a` any strides.
template <typename T, typename F>
void cpu_unary_loop(const Tensor& out, const Tensor& a, F f) {
  const int64_t n = out.numel();
  T* o = static_cast<T*>(out.data_ptr());
  const T* pa = static_cast<const T*>(a.data_ptr());
  if (a.is_contiguous()) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(pa[i]);
    return;
  }
  int64_t oa[kCpuLoopChunk], unused[kCpuLoopChunk];
  for (int64_t begin = 0; begin < n; begin += kCpuLoopChunk) {
    const int64_t count = std::min(kCpuLoopChunk, n - begin);
    strided_offsets(out.shape(), a.strides(), a.strides(), begin, count, oa, unused);
    for (int64_t i = 0; i < count; ++i) o[begin + i] = f(pa[oa[i]]);
  }
}

}  // namespace tt
