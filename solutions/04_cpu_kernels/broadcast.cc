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
#if TT_SOLUTION
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Align from the right: missing leading dims have size 1.
    const int64_t da = i + a.size() < n ? 1 : a[i + a.size() - n];
    const int64_t db = i + b.size() < n ? 1 : b[i + b.size() - n];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      TT_THROW(op, ": shapes ", a, " and ", b, " are not broadcastable: sizes ", da, " and ", db,
               " at dim ", i, " of the result (sizes must be equal or one of them 1)");
    }
  }
  return out;
#else
  TT_TODO(
      "ch04.1",
      "broadcast_shapes: the broadcast shape of a and b (aligned from the right, a missing dim counts as 1); throws naming op, both shapes and the dim when two sizes differ and neither is 1");
#endif
}

Tensor sum_to_shape(const Tensor& grad, const Shape& shape) {
#if TT_SOLUTION
  if (grad.shape() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  TT_CHECK(lead >= 0, "sum_to_shape: gradient of shape ", grad.shape(),
           " has fewer dims than the target shape ", shape);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead) {
      // A dim that broadcasting added in front; one of size 1 needs no sum, only the reshape.
      if (grad.size(d) != 1) dims.push_back(d);
      continue;
    }
    const int64_t want = shape[d - lead];
    if (want == grad.size(d)) continue;
    TT_CHECK(want == 1, "sum_to_shape: gradient of shape ", grad.shape(),
             " is not a broadcast of shape ", shape, " (dim ", d, ": ", grad.size(d), " vs ", want,
             ")");
    dims.push_back(d);  // a size-1 dim that was expanded
  }
  if (dims.empty()) return reshape(grad, shape);
  // keepdim=true keeps the expanded size-1 dims in place; reshape drops the leading ones.
  return reshape(sum(grad, dims, /*keepdim=*/true), shape);
#else
  TT_TODO(
      "ch04.2",
      "sum_to_shape: grad, of the shape of a broadcast of `shape`, summed back to exactly `shape` over the dims broadcasting added or expanded (grad itself when the shapes are equal, a view of it when only size-1 dims were added in front); throws when grad is no broadcast of shape");
#endif
}

}  // namespace tt
