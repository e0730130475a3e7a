// ============================================================================================
// YOUR EXERCISE FILE for chapter 13_tensor_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch13
// Generated from solutions/13_tensor_parallel/parallel_linear.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// The forward passes of the column- and row-parallel linear layers (tt/tensor_parallel.h):
// exercises ch13.2 and ch13.3. Their backward passes follow from autograd through f and g.
#include "tt/error.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_matmul.h"
#include "tt/ops_view.h"
#include "tt/tensor_parallel.h"
#include "tt/todo.h"

namespace tt::tp {

Tensor ColumnParallelLinear::forward(const Tensor& x) {
  TT_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_features,
           "ColumnParallelLinear::forward (", group->where(), "): expected input [..., ",
           in_features, "], got ", x.defined() ? x.describe() : std::string("an undefined tensor"));
  TT_TODO("ch13.2",
          "ColumnParallelLinear::forward: f(x) W_r^T + b_r, the rank's slice [..., out/tp] of "
          "the output, gathered along the last dim ([..., out]) when gather_output");
}

Tensor RowParallelLinear::forward(const Tensor& x) {
  TT_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_per_rank, "RowParallelLinear::forward (",
           group->where(),
           "): expected this rank's slice of the "
           "input [..., ",
           in_per_rank, "] (in=", in_features, " split over tp=", group->world_size(), "), got ",
           x.defined() ? x.describe() : std::string("an undefined tensor"));
  TT_TODO("ch13.3",
          "RowParallelLinear::forward: g(x_r W_r^T) + b, the whole output [..., out] on every "
          "rank, the bias added once after the sum");
}

}  // namespace tt::tp
