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
#if TT_SOLUTION
  // The same operations as nn::Linear::forward on this rank's rows of the weight.
  Tensor y = matmul(copy_to_tp(x, *group), transpose(weight, 0, 1));
  if (bias.defined()) y = add(y, bias);
  return gather_output ? gather_last_dim(y, *group) : y;
#else
  TT_TODO("ch13.2",
          "ColumnParallelLinear::forward: f(x) W_r^T + b_r, the rank's slice [..., out/tp] of "
          "the output, gathered along the last dim ([..., out]) when gather_output");
#endif
}

Tensor RowParallelLinear::forward(const Tensor& x) {
  TT_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_per_rank, "RowParallelLinear::forward (",
           group->where(),
           "): expected this rank's slice of the "
           "input [..., ",
           in_per_rank, "] (in=", in_features, " split over tp=", group->world_size(), "), got ",
           x.defined() ? x.describe() : std::string("an undefined tensor"));
#if TT_SOLUTION
  Tensor y = reduce_from_tp(matmul(x, transpose(weight, 0, 1)), *group);
  return bias.defined() ? add(y, bias) : y;
#else
  TT_TODO("ch13.3",
          "RowParallelLinear::forward: g(x_r W_r^T) + b, the whole output [..., out] on every "
          "rank, the bias added once after the sum");
#endif
}

}  // namespace tt::tp
