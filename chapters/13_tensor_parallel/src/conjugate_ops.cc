// ============================================================================================
// YOUR EXERCISE FILE for chapter 13_tensor_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch13
// Generated from solutions/13_tensor_parallel/conjugate_ops.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// The conjugate operators f and g of tensor parallelism (tt/tensor_parallel.h): exercise
// ch13.1.
#include <vector>

#include "tt/autograd.h"
#include "tt/error.h"
#include "tt/tensor_parallel.h"
#include "tt/todo.h"

namespace tt::tp {

namespace {

// The sum over `group` of `t` in new memory: an out-of-place all-reduce that reads t and
// writes a fresh tensor (t and whoever else holds it see no change; on NCCL one collective,
// no copy). maybe_unused: the starter's TODOs do not call it.
[[maybe_unused]] Tensor summed(const Tensor& t, dist::ProcessGroup& group) {
  const Tensor in = t.contiguous();
  Tensor out = empty(in.shape(), {in.dtype(), in.device()});
  group.all_reduce(out, in, dist::ReduceOp::kSum);
  return out;
}

// f: identity forward, all-reduce backward.
class CopyToTpFn final : public autograd::Function {
 public:
  explicit CopyToTpFn(dist::ProcessGroup& group) : group_(group) {}
  std::string name() const override { return "CopyToTpBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    TT_TODO("ch13.1", "f forward: the input unchanged, as a new tensor");
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    TT_TODO("ch13.1",
            "f backward: the sum over the group's ranks of the output gradient, in a new tensor "
            "(group.all_reduce(out, in): out of place)");
  }

 private:
  dist::ProcessGroup& group_;
};

// g: all-reduce forward, identity backward.
class ReduceFromTpFn final : public autograd::Function {
 public:
  explicit ReduceFromTpFn(dist::ProcessGroup& group) : group_(group) {}
  std::string name() const override { return "ReduceFromTpBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    TT_TODO("ch13.1",
            "g forward: the sum over the group's ranks of the input, in a new tensor "
            "(group.all_reduce(out, in): out of place; never change the input)");
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    TT_TODO("ch13.1", "g backward: the output gradient unchanged");
  }

 private:
  dist::ProcessGroup& group_;
};

}  // namespace

Tensor copy_to_tp(const Tensor& x, dist::ProcessGroup& group) {
  return autograd::Function::apply<CopyToTpFn>({x}, group)[0];
}

Tensor reduce_from_tp(const Tensor& x, dist::ProcessGroup& group) {
  return autograd::Function::apply<ReduceFromTpFn>({x}, group)[0];
}

}  // namespace tt::tp
