// Tensor-parallel layers (tt/tensor_parallel.h): the gather along the last dim, the sharding
// of a full nn::Linear, and the MLP composition. f and g (ch13.1) are in conjugate_ops.cc, the
// forward passes of the parallel linears (ch13.2, ch13.3) in parallel_linear.cc.
#include <vector>

#include "tt/autograd.h"
#include "tt/error.h"
#include "tt/ops_nn.h"
#include "tt/ops_view.h"
#include "tt/sequence_parallel.h"
#include "tt/tensor_parallel.h"

namespace tt::tp {

namespace {

// all-gather forward, own slice backward.
class GatherLastDimFn final : public autograd::Function {
 public:
  explicit GatherLastDimFn(dist::ProcessGroup& group) : group_(group) {}
  std::string name() const override { return "GatherLastDimBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor x = in[0].contiguous();
    TT_CHECK(x.dim() >= 1, "gather_last_dim (", group_.where(),
             "): needs a tensor of rank >= 1, got ", x.describe());
    const int64_t n = x.size(-1);
    const int64_t tp = group_.world_size();
    const int64_t rows = x.numel() / (n == 0 ? 1 : n);
    Tensor buffer = empty({tp, rows, n}, TensorOptions{x.dtype(), x.device()});
    group_.all_gather(buffer, x);
    Shape shape = x.shape();
    shape.back() = n * tp;
    // [tp, rows, n] -> [rows, tp, n]: rank r's features land at [r*n, (r+1)*n) of each row.
    return {permute(buffer, {1, 0, 2}).contiguous().view(shape)};
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    const int64_t full = g[0].size(-1);
    const int64_t n = full / group_.world_size();
    const int64_t begin = n * group_.rank();
    return {g[0].slice(-1, begin, begin + n).contiguous()};
  }

 private:
  dist::ProcessGroup& group_;
};

// This rank's tokens forward (no communication), all-gather backward.
class SplitToSequenceFn final : public autograd::Function {
 public:
  SplitToSequenceFn(dist::ProcessGroup& group, int64_t dim) : group_(group), dim_(dim) {}
  std::string name() const override { return "SplitToSequenceBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor& x = in[0];
    TT_CHECK((dim_ == 0 || dim_ == 1) && x.dim() >= 2 && x.size(dim_) % group_.world_size() == 0,
             "split_to_sequence (", group_.where(), "): needs [B, T, ...] with dim ", dim_,
             " (0 or 1) divisible by tp=", group_.world_size(), ", got ", x.describe());
    const int64_t n = x.size(dim_) / group_.world_size();
    return {x.narrow(dim_, n * group_.rank(), n).contiguous()};
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    return {sequence_all_gather(g[0], group_, dim_)};
  }

 private:
  dist::ProcessGroup& group_;
  int64_t dim_;
};

// This rank's part [begin, begin + n/tp) of `full`'s weight along `dim` (0: output features,
// 1: input features), as a new parameter tensor; throws when tp does not divide the dim.
Tensor weight_shard(const char* kind, const nn::Linear& full, int64_t dim,
                    dist::ProcessGroup& group, int64_t* begin_out) {
  const int64_t n = full.weight.size(dim);
  const std::string what = detail::str(kind, "(in=", full.in_features, ", out=", full.out_features,
                                       ") on ", group.where());
  const int64_t begin = shard_begin(what.c_str(), n, group.world_size(), group.rank());
  *begin_out = begin;
  return full.weight.detach().narrow(dim, begin, n / group.world_size()).contiguous().clone();
}

// f with an all-reduce started early (EarlyGradReduce).
class CopyToTpEarlyFn final : public autograd::Function {
 public:
  CopyToTpEarlyFn(dist::ProcessGroup& group, std::shared_ptr<EarlyGradReduce> early)
      : group_(group), early_(std::move(early)) {}
  std::string name() const override { return "CopyToTpEarlyBackward"; }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor x = in[0].contiguous();
    return {x.view(x.shape())};
  }
  std::vector<Tensor> backward(const std::vector<Tensor>& g) override {
    EarlyGradReduce& e = *early_;
    const Tensor& dy = g[0];
    const bool same = e.work != nullptr && dy.is_contiguous() && e.source.defined() &&
                      dy.data_ptr() == e.source.data_ptr() && dy.numel() == e.source.numel();
    if (e.work) e.work->wait();
    Tensor out;
    if (same) {
      out = e.sum.view(dy.shape());
      ++e.finished;
    } else {
      // g's forward is the sum in a new tensor (backward runs without recording).
      out = reduce_from_tp(dy, group_);
    }
    e.source = e.sum = Tensor();
    e.work.reset();
    return {out};
  }

 private:
  dist::ProcessGroup& group_;
  std::shared_ptr<EarlyGradReduce> early_;
};

}  // namespace

Tensor gather_last_dim(const Tensor& x, dist::ProcessGroup& group) {
  return autograd::Function::apply<GatherLastDimFn>({x}, group)[0];
}

Tensor split_to_sequence(const Tensor& x, dist::ProcessGroup& group, int64_t dim) {
  return autograd::Function::apply<SplitToSequenceFn>({x}, group, dim)[0];
}

int64_t shard_begin(const char* what, int64_t n, int parts, int rank) {
  TT_CHECK(parts >= 1 && n % parts == 0, what, ": the tensor-parallel size ", parts,
           " does not divide ", n, " features (each rank must hold n / tp of them)");
  return n / parts * rank;
}

ColumnParallelLinear::ColumnParallelLinear(const nn::Linear& full, dist::ProcessGroup& group_,
                                           bool gather_output_)
    : Module("ColumnParallelLinear"),
      in_features(full.in_features),
      out_features(full.out_features),
      out_per_rank(0),
      gather_output(gather_output_),
      group(&group_) {
  int64_t begin = 0;
  weight =
      register_parameter("weight", weight_shard("ColumnParallelLinear", full, 0, group_, &begin));
  out_per_rank = weight.size(0);
  if (full.bias.defined()) {
    bias = register_parameter(
        "bias", full.bias.detach().narrow(0, begin, out_per_rank).contiguous().clone());
  }
}

std::string ColumnParallelLinear::extra_repr() const {
  return detail::str("in=", in_features, ", out=", out_features, " (", out_per_rank,
                     " on this rank), tp=", group->world_size(),
                     ", gather_output=", gather_output ? "true" : "false");
}

RowParallelLinear::RowParallelLinear(const nn::Linear& full, dist::ProcessGroup& group_)
    : Module("RowParallelLinear"),
      in_features(full.in_features),
      in_per_rank(0),
      out_features(full.out_features),
      group(&group_) {
  int64_t begin = 0;
  weight = register_parameter("weight", weight_shard("RowParallelLinear", full, 1, group_, &begin));
  in_per_rank = weight.size(1);
  if (full.bias.defined()) bias = register_parameter("bias", full.bias.detach().clone());
}

std::string RowParallelLinear::extra_repr() const {
  return detail::str("in=", in_features, " (", in_per_rank, " on this rank), out=", out_features,
                     ", tp=", group->world_size());
}

TensorParallelMLP::TensorParallelMLP(const nn::Linear& fc, const nn::Linear& proj,
                                     dist::ProcessGroup& group)
    : Module("TensorParallelMLP") {
  TT_CHECK(fc.out_features == proj.in_features && fc.in_features == proj.out_features,
           "TensorParallelMLP: c_fc (", fc.extra_repr(), ") and c_proj (", proj.extra_repr(),
           ") must map C -> H -> C");
  c_fc = register_module("c_fc", std::make_shared<ColumnParallelLinear>(fc, group));
  c_proj = register_module("c_proj", std::make_shared<RowParallelLinear>(proj, group));
}

Tensor TensorParallelMLP::forward(const Tensor& x) {
  // No communication between the two layers: GELU is elementwise, so it applies to each rank's
  // hidden slice independently.
  return c_proj->forward(gelu(c_fc->forward(x)));
}

void EarlyGradReduce::start(const Tensor& dx, dist::ProcessGroup& group) {
  TT_CHECK(work == nullptr, "EarlyGradReduce (", group.where(),
           "): an all-reduce is already in flight for this layer");
  source = dx;
  const Tensor in = dx.contiguous();
  sum = empty(in.shape(), {in.dtype(), in.device()});
  work = group.all_reduce_async(sum, in, dist::ReduceOp::kSum);  // out of place: dx unchanged
}

Tensor copy_to_tp_early(const Tensor& x, dist::ProcessGroup& group,
                        std::shared_ptr<EarlyGradReduce> early) {
  TT_CHECK(early != nullptr, "copy_to_tp_early (", group.where(), "): no EarlyGradReduce");
  return autograd::Function::apply<CopyToTpEarlyFn>({x}, group, std::move(early))[0];
}

}  // namespace tt::tp
