// ============================================================================================
// YOUR EXERCISE FILE for chapter 01_tensor. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch01
// Generated from solutions/01_tensor/tensor_views.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 01 exercises: strides, element offsets, views and the strided copy.
// The reference solutions live here; tools/sync_starters generates the learner's starter
// chapters/01_tensor/src/tensor_views.cc from this file.
#include <algorithm>
#include <numeric>

#include "tt/tensor.h"
#include "tt/todo.h"

namespace tt {

int64_t Tensor::element_offset(const std::vector<int64_t>& index) const {
  TT_TODO(
      "ch01.1",
      "Tensor::element_offset: offset() + sum over d of index[d] * stride(d), in elements, for one index per dim (negative ones count from the end); throws naming the shape when an index is out of range or the number of indices is not dim()");
}

std::optional<Strides> compute_view_strides(const Shape& old_shape, const Strides& old_strides,
                                            const Shape& new_shape) {
  TT_TODO(
      "ch01.2",
      "compute_view_strides: strides under which new_shape (same numel) reads the elements of (old_shape, old_strides) in the same row-major order, or nullopt when no strides can (the view would need a copy); size-1, stride-0, 0-d and empty shapes included");
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  TT_TODO(
      "ch01.3",
      "Tensor::permute: a view (same storage and offset) with size(i) == old size(dims[i]) and stride(i) == old stride(dims[i]); throws naming the shape unless dims is a permutation of the dims (negative dims wrap)");
}

Tensor Tensor::slice(int64_t dim_, int64_t start, int64_t end, int64_t step) const {
  TT_TODO(
      "ch01.4",
      "Tensor::slice: a view of the elements start, start+step, ... < end along dim (negative start/end count from the end, both clamped to [0, size]); throws when step <= 0, dim is out of range or the tensor is 0-d");
}

Tensor Tensor::expand(const Shape& target) const {
  TT_TODO(
      "ch01.5",
      "Tensor::expand: a view of shape `shape` (aligned from the right, new leading dims allowed, -1 keeps a size) in which every broadcast index reads the same element; only size-1 dims may grow, else throw naming both shapes");
}

Tensor Tensor::squeeze(int64_t dim_) const {
  TT_TODO(
      "ch01.6",
      "Tensor::squeeze: a view without dim, which must have size 1 (else throw naming the shape and the size); a 0-d tensor accepts dim 0 and -1 and returns a view of itself");
}

Tensor Tensor::unsqueeze(int64_t dim_) const {
  TT_TODO(
      "ch01.6",
      "Tensor::unsqueeze: a view with a size-1 dim inserted at position dim in [-(dim()+1), dim()] (else throw); a contiguous tensor stays contiguous");
}

void strided_offsets(const Shape& shape, const Strides& sa, const Strides& sb, int64_t begin,
                     int64_t count, int64_t* off_a, int64_t* off_b) {
  TT_TODO(
      "ch01.7",
      "strided_offsets: off_a[i] and off_b[i] = the offsets (strides sa and sb, relative to element 0) of the element with row-major linear index begin + i of shape, for i < count, in O(1) amortized time per element");
}

}  // namespace tt
