// Chapter 12 exercise ch12.4: one ZeRO-1 step in two halves: reduce_gradients (flatten, then
// reduce-scatter) and update (AdamW on this rank's shard, then all-gather), on the parameters'
// device (device(): the CPU, or this rank's GPU).
#include <map>

#include "tt/dispatcher.h"
#include "tt/todo.h"
#include "tt/zero.h"

namespace tt::dist {

void ZeroAdamW::reduce_gradients() {
  // The step's buffers on device(), allocated once and reused: flat_ (N*S elements, still
  // holding the last step's values) and grad_shard_'s S elements.
  if (!flat_.defined()) {
    flat_ = empty({group_.world_size() * shard_}, {.device = device_});
    shard_buffer_ = empty({shard_}, {.device = device_});
  }
  grad_shard_ = shard_buffer_;
#if TT_SOLUTION
  flat_.fill_(0.0);  // the padding, and the parameters without a gradient
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].grad();
    if (g.defined()) flat_.narrow(0, offsets_[i], g.numel()).copy_(g.reshape({g.numel()}));
  }
  group_.reduce_scatter(grad_shard_, flat_, ReduceOp::kAvg);
#else
  TT_TODO("ch12.4",
          "ZeroAdamW::reduce_gradients: grad_shard_ (S elements) = this rank's slice of the "
          "flattened, zero-padded gradients averaged over the ranks (one reduce_scatter)");
#endif
}

void ZeroAdamW::update() {
  TT_CHECK(grad_shard_.defined(), "ZeroAdamW::update (", group_.where(),
           "): call reduce_gradients() first");
  const int64_t t = step_ + 1;
#if TT_SOLUTION
  // One "adamw_step" call per weight decay over this shard's pieces of the parameters.
  struct Lists {
    std::vector<Tensor> params, grads, m, v;
  };
  std::map<double, Lists> by_decay;
  for (const ShardSegment& s : segments_) {
    const Tensor& p = params_[static_cast<std::size_t>(s.param)];
    Lists& l = by_decay[weight_decay_[static_cast<std::size_t>(s.param)]];
    l.params.push_back(p.detach().view({p.numel()}).narrow(0, s.param_offset, s.numel));
    l.grads.push_back(grad_shard_.narrow(0, s.shard_offset, s.numel));
    l.m.push_back(exp_avg_.narrow(0, s.shard_offset, s.numel));
    l.v.push_back(exp_avg_sq_.narrow(0, s.shard_offset, s.numel));
  }
  for (const auto& [decay, l] : by_decay) {
    const optim::AdamWStepArgs args{lr_, options_.beta1, options_.beta2, options_.eps, decay, t};
    call_kernel<optim::AdamWStepKernel>("adamw_step", device_, l.params, l.grads, l.m, l.v, args);
  }
  // The gradient shard is spent: its buffer carries the updated shard to the all_gather (its
  // padding, past the last segment, is never copied back).
  for (const ShardSegment& s : segments_) {
    const Tensor& p = params_[static_cast<std::size_t>(s.param)];
    grad_shard_.narrow(0, s.shard_offset, s.numel)
        .copy_(p.detach().view({p.numel()}).narrow(0, s.param_offset, s.numel));
  }
  group_.all_gather(flat_, grad_shard_);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    p.detach().copy_(flat_.narrow(0, offsets_[i], p.numel()).view(p.shape()));
  }
#else
  TT_TODO("ch12.4",
          "ZeroAdamW::update: every parameter ends as after torch AdamW (step t) on the "
          "averaged gradient, identical on all ranks; this rank updates only segments() with "
          "\"adamw_step\" from grad_shard_ and its moment shards, and all_gathers the updated "
          "shards");
#endif
  grad_shard_ = Tensor();
  step_ = t;
}

}  // namespace tt::dist
