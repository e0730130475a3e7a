/// @file strided_indexer.h
/// @brief StridedIndexer: the geometry of up to two strided operands packed into a small struct
/// that a CUDA kernel receives by value, and the per-element offset computation it runs.
///
/// A kernel thread that owns the row-major linear index \f$ i \f$ of an n-d shape needs the
/// multi-index \f$ (i_0, \dots, i_{n-1}) \f$ and then each operand's element offset
/// \f[ \text{off}_a = \sum_k i_k \cdot \text{stride}^a_k, \qquad
///     i_{n-1} = i \bmod s_{n-1},\ i_{n-2} = \lfloor i / s_{n-1} \rfloor \bmod s_{n-2},\ \dots \f]
/// Broadcast dims have stride 0, so the same formula serves `[B, T, C] + [C]`.
/// Divisions are the expensive part on a GPU (a 64-bit division is a software routine of
/// ~70 instructions), so make_strided_indexer first merges dims that are laid out contiguously
/// in both operands: a contiguous tensor becomes one dim and needs no division at all.
///
/// This header is plain C++ (used by g++ and nvcc): the indexer is built on the host and tested
/// there; offsets() runs on both sides.
#pragma once

#include <cstdint>

#include "tt/tensor.h"

#if defined(__CUDACC__)
#define TT_HOST_DEVICE __host__ __device__
#else
/// Marks a function callable from host and device code (`__host__ __device__` under nvcc,
/// nothing under a host-only compiler).
#define TT_HOST_DEVICE
#endif

namespace tt::cuda {

/// Most dims a StridedIndexer holds after merging (GPT-2 needs at most 4).
inline constexpr int kMaxIndexerDims = 8;

/// Element offsets of one linear index in the two operands of an indexer.
struct StridedOffsets {
  int64_t a = 0;  ///< offset in operand a, in elements from its element 0
  int64_t b = 0;  ///< offset in operand b
};

/// Sizes and the strides of two operands (a and b), innermost dim last, with dims merged where
/// possible. Passed to kernels by value (a few hundred bytes of kernel parameters).
struct StridedIndexer {
  int ndim = 0;                             ///< number of (merged) dims; 0 for one element
  int64_t sizes[kMaxIndexerDims] = {};      ///< size of each merged dim
  int64_t strides_a[kMaxIndexerDims] = {};  ///< strides of operand a, in elements
  int64_t strides_b[kMaxIndexerDims] = {};  ///< strides of operand b, in elements

  /// Offsets in a and b of the element with row-major linear index `linear` (0 <= linear <
  /// product of sizes). The divisions are done in `Index`: a 32-bit unsigned division is several
  /// times cheaper on a GPU than a 64-bit one (see dispatch_index_type). The outermost dim needs
  /// no modulo, so a 1-d indexer does no division at all.
  template <typename Index>
  TT_HOST_DEVICE StridedOffsets offsets(Index linear) const {
    StridedOffsets off;
    for (int d = ndim - 1; d > 0; --d) {
      const auto size = static_cast<Index>(sizes[d]);
      const Index q = linear / size;
      const auto i = static_cast<int64_t>(linear - q * size);
      off.a += i * strides_a[d];
      off.b += i * strides_b[d];
      linear = q;
    }
    if (ndim > 0) {
      off.a += static_cast<int64_t>(linear) * strides_a[0];
      off.b += static_cast<int64_t>(linear) * strides_b[0];
    }
    return off;
  }
};

/// Calls `f.template operator()<Index>()` with Index = uint32_t when `n` < 2^31 and int64_t
/// otherwise: the index type of a grid-stride loop over `n` elements and of its offsets() calls.
/// Below 2^31, i + (grid stride) cannot wrap around a 32-bit unsigned index.
template <typename F>
decltype(auto) dispatch_index_type(int64_t n, F&& f) {
  if (n < (int64_t{1} << 31)) return f.template operator()<uint32_t>();
  return f.template operator()<int64_t>();
}

/// The indexer of `n` contiguous elements in both operands: one dim of stride 1 (what
/// make_strided_indexer returns for any contiguous layout).
inline StridedIndexer contiguous_indexer(int64_t n) {
  StridedIndexer idx;
  idx.ndim = 1;
  idx.sizes[0] = n;
  idx.strides_a[0] = 1;
  idx.strides_b[0] = 1;
  return idx;
}

/// Builds the indexer of `shape` walked with strides `a` and `b` (one entry per dim; 0 for a
/// broadcast dim): drops size-1 dims and merges each dim into the next inner one when both
/// operands step over it contiguously (stride[d] == stride[d+1] * size[d+1] for a and b), so
/// that offsets(i) equals the offsets of chapter 01's strided_offsets for every i (exercise
/// ch06.1). Throws tt::Error naming the shape and strides when more than kMaxIndexerDims dims
/// remain or the lengths differ.
StridedIndexer make_strided_indexer(const Shape& shape, const Strides& a, const Strides& b);

}  // namespace tt::cuda
