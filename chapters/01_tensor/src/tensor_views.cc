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
      "Tensor::element_offset: check every index against its size, then offset + sum(index[d] * stride[d])");
}

std::optional<Strides> compute_view_strides(const Shape& old_shape, const Strides& old_strides,
                                            const Shape& new_shape) {
  TT_TODO(
      "ch01.2",
      "compute_view_strides: split the old dims into contiguous chunks and re-split each chunk into new dims of equal numel");
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  TT_TODO(
      "ch01.3",
      "Tensor::permute: validate that dims is a permutation, then reorder shape and strides (no copy)");
}

Tensor Tensor::slice(int64_t dim_, int64_t start, int64_t end, int64_t step) const {
  TT_TODO(
      "ch01.4",
      "Tensor::slice: new offset += start*stride, size = ceil((end-start)/step), stride *= step");
}

Tensor Tensor::expand(const Shape& target) const {
  TT_TODO(
      "ch01.5",
      "Tensor::expand: align dims from the right; equal sizes keep their stride, size-1 dims and new leading dims get stride 0");
}

Tensor Tensor::squeeze(int64_t dim_) const {
  TT_TODO("ch01.6",
          "Tensor::squeeze: check the dim has size 1, then erase it from shape and strides");
}

Tensor Tensor::unsqueeze(int64_t dim_) const {
  TT_TODO(
      "ch01.6",
      "Tensor::unsqueeze: insert size 1 at dim with stride size(dim)*stride(dim) (1 at the end)");
}

void strided_offsets(const Shape& shape, const Strides& sa, const Strides& sb, int64_t begin,
                     int64_t count, int64_t* off_a, int64_t* off_b) {
  TT_TODO(
      "ch01.7",
      "strided_offsets: split begin into a multi-index, then advance it like an odometer, updating both offsets");
}

}  // namespace tt
