/// @file zero.h
/// @brief ZeRO stage 1: AdamW whose state is sharded over the ranks (exercise ch12.4).
///
/// Plain data parallelism keeps a full copy of AdamW's two moment tensors on every rank:
/// 8 bytes per float32 parameter, twice the model itself. ZeRO-1 (Rajbhandari et al., 2020)
/// cuts the flattened parameter vector (all parameters concatenated in order, zero-padded to a
/// multiple of N) into N equal shards of S elements; rank r keeps the moments of shard r only.
/// One step:
/// 1. reduce-scatter the flattened gradients with average: rank r receives the averaged
///    gradient of its shard (the same bytes as half an all-reduce);
/// 2. AdamW on the shard: the parameters' pieces that fall in the shard, updated in place by
///    chapter 05's "adamw_step" kernel with the shard's gradient and moments;
/// 3. all-gather the updated shards: every rank gets every updated parameter (the other half).
/// Communication equals one all-reduce; optimizer memory per rank drops from 8P to 8P/N bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "tt/dist.h"
#include "tt/optim.h"

namespace tt::dist {

/// A piece of one parameter inside a shard of the flattened parameter vector.
struct ShardSegment {
  int64_t param;         ///< parameter index (flattened over the groups)
  int64_t param_offset;  ///< first element inside the (flattened) parameter
  int64_t shard_offset;  ///< first element inside the shard
  int64_t numel;         ///< length
};

/// The pieces of parameters of sizes `numels` (concatenated in order) that fall into the
/// element range [begin, end), in order; parameters of size 0 and empty pieces are left out.
std::vector<ShardSegment> shard_segments(const std::vector<int64_t>& numels, int64_t begin,
                                         int64_t end);

/// AdamW (torch.optim.AdamW's math, via chapter 05's "adamw_step") with ZeRO-1 sharded state.
/// Every rank builds it over the same parameters (same order); the constructor broadcasts them
/// from rank 0 so all ranks start identical. Use it INSTEAD of DistributedDataParallel: step()
/// averages the gradients itself. Parameters must be float32 CPU tensors.
class ZeroAdamW {
 public:
  /// Several groups, each with its own weight decay (options.weight_decay is ignored).
  ZeroAdamW(std::vector<optim::ParamGroup> groups, optim::AdamWOptions options,
            ProcessGroup& group);
  /// One group with options.weight_decay.
  ZeroAdamW(std::vector<Tensor> params, optim::AdamWOptions options, ProcessGroup& group);

  /// One step (exercise ch12.4): average the gradients over the ranks with reduce_scatter
  /// (an undefined gradient counts as zeros), update this rank's shard with "adamw_step"
  /// (each group's weight decay, step t = step_count() + 1), all_gather the shards into every
  /// parameter; then step_count() grows by one.
  void step();
  /// Clears every parameter's gradient (undefined, or zeros).
  void zero_grad(bool set_to_none = true);
  /// Learning rate of the next step.
  double lr() const { return lr_; }
  /// Sets the learning rate (finite, >= 0).
  void set_lr(double lr);
  /// Completed steps.
  int64_t step_count() const { return step_; }

  /// Elements of all parameters together (P).
  int64_t total_numel() const { return total_; }
  /// Elements per shard: S = ceil(P / N).
  int64_t shard_numel() const { return shard_; }
  /// This rank's segments.
  const std::vector<ShardSegment>& segments() const { return segments_; }
  /// Bytes of optimizer state this rank holds (two moments of S elements).
  int64_t state_bytes() const;
  /// The moments of this rank's shard, {exp_avg, exp_avg_sq} (S elements each).
  std::vector<Tensor> shard_state() const { return {exp_avg_, exp_avg_sq_}; }

 private:
  std::vector<Tensor> params_;        // flattened over the groups
  std::vector<double> weight_decay_;  // per parameter
  std::vector<int64_t> offsets_;      // per parameter, in the flattened vector
  optim::AdamWOptions options_;
  ProcessGroup& group_;
  int64_t total_ = 0, shard_ = 0;
  std::vector<ShardSegment> segments_;
  Tensor exp_avg_, exp_avg_sq_;  // [S]
  double lr_;
  int64_t step_ = 0;
};

}  // namespace tt::dist
