/// @file tensor_parallel.h
/// @brief Megatron-style tensor parallelism: the conjugate operators f and g, column- and
/// row-parallel linear layers and the tensor-parallel MLP (chapter 13).
///
/// Every rank of a tensor-parallel group holds 1/tp of a layer's weight and sees the same
/// input. Two autograd functions move data between the "replicated" and the "partial" worlds:
///
/// | op | forward | backward |
/// |---|---|---|
/// | f = copy_to_tp | identity | all-reduce (sum) of the gradient |
/// | g = reduce_from_tp | all-reduce (sum) | identity |
///
/// They are conjugate: the backward of one is the forward of the other. A column-parallel
/// linear begins with f (its input is replicated, its input gradient a sum of partial ones); a
/// row-parallel linear ends with g (its output is a sum of partial products). An MLP of a
/// column-parallel c_fc, an elementwise GELU and a row-parallel c_proj needs one all-reduce
/// forward and one backward, and nothing in between.
///
/// The collectives run on the given group (chapter 12's ProcessGroup, MPI for CPU tensors,
/// NCCL for CUDA tensors); every rank of the group must make the same calls in the same order.
#pragma once

#include <memory>
#include <string>

#include "tt/dist.h"
#include "tt/layers.h"
#include "tt/module.h"
#include "tt/tensor.h"

namespace tt::tp {

/// f (exercise ch13.1): returns `x` unchanged (a new tensor with the same values) and, in
/// backward, the sum over `group`'s ranks of the output's gradient.
Tensor copy_to_tp(const Tensor& x, dist::ProcessGroup& group);

/// g (exercise ch13.1): returns the sum over `group`'s ranks of `x` and, in backward, the
/// output's gradient unchanged.
Tensor reduce_from_tp(const Tensor& x, dist::ProcessGroup& group);

/// An all-reduce of a column-parallel layer's input gradient started early, by the layer's own
/// backward (chapter 11's LinearHooks::dgrad, right after the dx GEMM), so that it overlaps the
/// layer's weight-gradient GEMM; copy_to_tp_early's backward finishes it.
struct EarlyGradReduce {
  /// Starts the all-reduce (sum over `group`) of `dx` into a new tensor (out of place), without
  /// waiting; dx must stay unchanged until the sum is taken.
  void start(const Tensor& dx, dist::ProcessGroup& group);
  Tensor source;                     ///< the dx it was started on
  Tensor sum;                        ///< the new tensor the sum goes to
  std::unique_ptr<dist::Work> work;  ///< the collective in flight
  int64_t finished = 0;              ///< backward passes that took the early sum (for tests)
};

/// f (copy_to_tp) whose backward takes the sum `early` started when the gradient it receives is
/// the one `early` saw (the same memory and size: the layer after f is its only user), waiting
/// for it; otherwise (or when nothing was started) it waits for what is in flight and sums the
/// gradient itself, as f does. Forward: a view of x. Every rank must take the same path (they
/// run the same graph).
Tensor copy_to_tp_early(const Tensor& x, dist::ProcessGroup& group,
                        std::shared_ptr<EarlyGradReduce> early);

/// Concatenates the ranks' `x` ([..., n] each) along the last dim in rank order ([..., tp*n]);
/// backward keeps this rank's slice of the gradient. The optional output gather of a
/// column-parallel linear.
Tensor gather_last_dim(const Tensor& x, dist::ProcessGroup& group);

/// Rank `rank`'s part [begin, begin + n / parts) of `n` features split into `parts` equal parts;
/// throws tt::Error naming `what`, n and parts when parts does not divide n.
int64_t shard_begin(const char* what, int64_t n, int parts, int rank);

/// A linear layer whose weight [out, in] is split along the OUTPUT dim: rank r holds rows
/// [r*out/tp, (r+1)*out/tp) of the weight and of the bias. forward(x) takes the replicated
/// input [..., in] and returns this rank's slice of the output [..., out/tp], or the whole
/// output [..., out] with gather_output.
class ColumnParallelLinear : public nn::Module {
 public:
  /// This rank's shard of `full` (the weights are copied, `full` is not changed). Throws
  /// tt::Error when `group`'s size does not divide full.out_features.
  ColumnParallelLinear(const nn::Linear& full, dist::ProcessGroup& group,
                       bool gather_output = false);
  /// y = f(x) W_r^T + b_r, gathered along the last dim when gather_output (exercise ch13.2).
  /// Throws tt::Error when x is not [..., in_features].
  Tensor forward(const Tensor& x) override;
  /// "in=8, out=16 (8 on this rank), tp=2, gather_output=false".
  std::string extra_repr() const override;

  int64_t in_features;        ///< size of the input's last dim
  int64_t out_features;       ///< the whole layer's output features
  int64_t out_per_rank;       ///< out_features / tp
  bool gather_output;         ///< forward returns the whole output
  Tensor weight;              ///< [out_per_rank, in]: rows of the full weight
  Tensor bias;                ///< [out_per_rank], undefined without bias
  dist::ProcessGroup* group;  ///< the tensor-parallel group
};

/// A linear layer whose weight [out, in] is split along the INPUT dim: rank r holds columns
/// [r*in/tp, (r+1)*in/tp) of the weight and the whole bias. forward(x) takes this rank's slice
/// of the input [..., in/tp] (what a ColumnParallelLinear without gather returns) and returns
/// the whole output [..., out] on every rank: the partial products are summed by g, the bias is
/// added once, after the sum.
class RowParallelLinear : public nn::Module {
 public:
  /// This rank's shard of `full` (copied). Throws tt::Error when `group`'s size does not divide
  /// full.in_features.
  RowParallelLinear(const nn::Linear& full, dist::ProcessGroup& group);
  /// y = g(x_r W_r^T) + b (exercise ch13.3). Throws tt::Error when x is not [..., in/tp].
  Tensor forward(const Tensor& x) override;
  /// "in=16 (8 on this rank), out=8, tp=2".
  std::string extra_repr() const override;

  int64_t in_features;        ///< the whole layer's input features
  int64_t in_per_rank;        ///< in_features / tp: the input's last dim on this rank
  int64_t out_features;       ///< size of the output's last dim
  Tensor weight;              ///< [out, in_per_rank]: columns of the full weight
  Tensor bias;                ///< [out], the whole bias (replicated), undefined without bias
  dist::ProcessGroup* group;  ///< the tensor-parallel group
};

/// The transformer MLP split the Megatron way: c_fc column-parallel (no gather), GELU on the
/// rank's hidden slice, c_proj row-parallel. Input and output [..., C] replicated; one
/// all-reduce in forward (c_proj's g), one in backward (c_fc's f).
class TensorParallelMLP : public nn::Module {
 public:
  /// Shards of `c_fc` [C -> H] and `c_proj` [H -> C]; tp must divide H.
  TensorParallelMLP(const nn::Linear& c_fc, const nn::Linear& c_proj, dist::ProcessGroup& group);
  /// c_proj(gelu(c_fc(x))).
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<ColumnParallelLinear> c_fc;  ///< column-parallel expansion
  std::shared_ptr<RowParallelLinear> c_proj;   ///< row-parallel projection
};

}  // namespace tt::tp
