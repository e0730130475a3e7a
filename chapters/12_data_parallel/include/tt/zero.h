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
///
/// Devices: the parameters are all on the CPU (collectives through the group's CPU backend,
/// MPI) or all on this rank's GPU, cuda:local_rank (collectives through NCCL, one GPU per rank,
/// as for DistributedDataParallel). The moment shards and the step's buffers live on that device
/// and the kernels ("adamw_step", "sum_of_squares", "scale_") run there: chapter 05 registers
/// them for the CPU, chapter 07 for CUDA.
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
/// averages the gradients itself. Parameters must be contiguous float32 leaves, all on one
/// device (the CPU, or this rank's GPU: see the file comment).
class ZeroAdamW {
 public:
  /// Several groups, each with its own weight decay (options.weight_decay is ignored).
  ZeroAdamW(std::vector<optim::ParamGroup> groups, optim::AdamWOptions options,
            ProcessGroup& group);
  /// One group with options.weight_decay.
  ZeroAdamW(std::vector<Tensor> params, optim::AdamWOptions options, ProcessGroup& group);

  /// One step: reduce_gradients() then update().
  void step();
  /// First half of a step (exercise ch12.4): the gradients, flattened and zero-padded to N*S
  /// elements (an undefined gradient counts as zeros), averaged over the ranks with
  /// reduce_scatter into this rank's S-element gradient shard (grad_shard()).
  void reduce_gradients();
  /// Between the halves (training with clipping): the global L2 norm n of the averaged
  /// gradient (the shards' sums of squares, summed over the ranks: the same n on every rank;
  /// on a GPU this waits for the device, since n is returned to the host);
  /// when max_norm / (n + 1e-6) < 1 the gradient shard is scaled by it, as
  /// optim::clip_grad_norm_ does on the whole gradient. max_norm may be +inf (norm only).
  double clip_grad_norm(double max_norm);
  /// Second half of a step (exercise ch12.4): this rank's shard of the parameters updated with
  /// "adamw_step" from grad_shard() and the moment shards (each group's weight decay, step
  /// t = step_count() + 1), then the shards all_gathered into every parameter; step_count()
  /// grows by one. Throws tt::Error when reduce_gradients() was not called since the last one.
  void update();
  /// Clears every parameter's gradient (undefined, or zeros).
  void zero_grad(bool set_to_none = true);
  /// Learning rate of the next step.
  double lr() const { return lr_; }
  /// Sets the learning rate (finite, >= 0).
  void set_lr(double lr);
  /// Completed steps.
  int64_t step_count() const { return step_; }
  /// Sets the completed steps (resuming from a checkpoint; >= 0).
  void set_step_count(int64_t steps);

  /// The device of the parameters, the moment shards and the step's buffers (the CPU when
  /// there are no parameters).
  Device device() const { return device_; }
  /// Elements of all parameters together (P).
  int64_t total_numel() const { return total_; }
  /// Elements per shard: S = ceil(P / N).
  int64_t shard_numel() const { return shard_; }
  /// This rank's segments.
  const std::vector<ShardSegment>& segments() const { return segments_; }
  /// Bytes of optimizer state this rank holds (two moments of S elements). The step's buffers
  /// (N*S + S floats on device(), allocated by the first reduce_gradients() and reused) are not
  /// state and not counted.
  int64_t state_bytes() const;
  /// The moments of this rank's shard, {exp_avg, exp_avg_sq} (S elements each): handles to the
  /// live tensors, so a checkpoint load can copy into them.
  std::vector<Tensor> shard_state() const { return {exp_avg_, exp_avg_sq_}; }
  /// The averaged gradient of this rank's shard (S elements on device()) after
  /// reduce_gradients(); undefined otherwise.
  const Tensor& grad_shard() const { return grad_shard_; }
  /// The moments of every parameter, gathered from all ranks (a collective: every rank calls
  /// it): {exp_avg, exp_avg_sq}, each of total_numel() elements in the flattened order, on
  /// device(). For checkpoints; temporarily needs 2 * N*S floats on every rank's device.
  std::vector<Tensor> gather_state();
  /// Sets this rank's moment shards from full float32 moments of total_numel() elements each,
  /// on any device (as gather_state() returns them; copied to device(); no communication).
  void set_state_from_full(const Tensor& exp_avg, const Tensor& exp_avg_sq);
  /// Offset of each parameter in the flattened vector.
  const std::vector<int64_t>& offsets() const { return offsets_; }

 private:
  std::vector<Tensor> params_;        // flattened over the groups, all on device_
  std::vector<double> weight_decay_;  // per parameter
  std::vector<int64_t> offsets_;      // per parameter, in the flattened vector
  optim::AdamWOptions options_;
  ProcessGroup& group_;
  int64_t total_ = 0, shard_ = 0;
  std::vector<ShardSegment> segments_;
  Device device_ = Device::cpu();
  Tensor exp_avg_, exp_avg_sq_;  // [S]
  // The step's buffers, allocated by the first reduce_gradients() and reused by every step:
  Tensor flat_;          // [N*S] flattened gradients, later the gathered parameters
  Tensor shard_buffer_;  // [S] the storage of grad_shard_
  Tensor grad_shard_;    // [S] between reduce_gradients() and update()
  double lr_;
  int64_t step_ = 0;
};

}  // namespace tt::dist
