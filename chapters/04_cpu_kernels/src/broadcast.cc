// ============================================================================================
// YOUR EXERCISE FILE for chapter 04_cpu_kernels. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch04
// Generated from solutions/04_cpu_kernels/broadcast.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 04 exercises ch04.1 and ch04.2: the broadcast shape of two tensors, and its backward,
// sum_to_shape (reduce a gradient to the shape of the input that was broadcast).
#include <algorithm>
#include <vector>

#include "tt/ops_elementwise.h"
#include "tt/ops_reduce.h"
#include "tt/ops_view.h"
#include "tt/todo.h"

namespace tt {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  TT_TODO(
      "ch04.1",
      "broadcast_shapes: the broadcast shape of a and b (aligned from the right, a missing dim counts as 1); throws naming op, both shapes and the dim when two sizes differ and neither is 1");
}

Tensor sum_to_shape(const Tensor& grad, const Shape& shape) {
  TT_TODO(
      "ch04.2",
      "sum_to_shape: grad, of the shape of a broadcast of `shape`, summed back to exactly `shape` over the dims broadcasting added or expanded (grad itself when the shapes are equal, a view of it when only size-1 dims were added in front); throws when grad is no broadcast of shape");
}

}  // namespace tt
