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
  TT_TODO("ch04.1",
          "broadcast_shapes: align the shapes from the right (missing dims are 1); sizes must be "
          "equal or one of them 1, else throw naming op and both shapes");
}

Tensor sum_to_shape(const Tensor& grad, const Shape& shape) {
  TT_TODO("ch04.2",
          "sum_to_shape: sum (keepdim) over the leading dims broadcasting added and the size-1 "
          "dims it expanded, then reshape to shape");
}

}  // namespace tt
