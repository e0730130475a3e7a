// ZeroAdamW's set-up (shards, segments, state) and shard_segments; step() is exercise ch12.4
// (solutions/12_data_parallel/zero_step.cc).
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "tt/ddp.h"
#include "tt/zero.h"

namespace tt::dist {

std::vector<ShardSegment> shard_segments(const std::vector<int64_t>& numels, int64_t begin,
                                         int64_t end) {
  TT_CHECK(0 <= begin && begin <= end, "shard_segments: bad range [", begin, ", ", end, ")");
  std::vector<ShardSegment> out;
  int64_t start = 0;  // of parameter i in the flattened vector
  for (std::size_t i = 0; i < numels.size(); ++i) {
    const int64_t lo = std::max(start, begin), hi = std::min(start + numels[i], end);
    if (lo < hi) out.push_back({static_cast<int64_t>(i), lo - start, lo - begin, hi - lo});
    start += numels[i];
  }
  return out;
}

ZeroAdamW::ZeroAdamW(std::vector<Tensor> params, optim::AdamWOptions options, ProcessGroup& group)
    : ZeroAdamW(std::vector<optim::ParamGroup>{{std::move(params), options.weight_decay}}, options,
                group) {}

ZeroAdamW::ZeroAdamW(std::vector<optim::ParamGroup> groups, optim::AdamWOptions options,
                     ProcessGroup& group)
    : options_(options), group_(group), lr_(options.lr) {
  TT_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1 &&
               std::isfinite(options.eps) && options.eps >= 0,
           "ZeroAdamW: betas must be in [0, 1) and eps finite and >= 0, got (", options.beta1, ", ",
           options.beta2, "), eps ", options.eps);
  set_lr(options.lr);
  std::unordered_set<const TensorImpl*> seen;
  for (const optim::ParamGroup& g : groups) {
    TT_CHECK(std::isfinite(g.weight_decay) && g.weight_decay >= 0,
             "ZeroAdamW: weight_decay must be finite and >= 0, got ", g.weight_decay);
    for (const Tensor& p : g.params) {
      const std::size_t i = params_.size();
      TT_CHECK(p.defined() && p.dtype() == DType::kFloat32 && p.device().is_cpu() &&
                   p.is_contiguous() && p.is_leaf(),
               "ZeroAdamW: parameter ", i, " must be a contiguous float32 CPU leaf, got ",
               p.defined() ? p.describe() : std::string("an undefined tensor"));
      TT_CHECK(seen.insert(p.impl().get()).second, "ZeroAdamW: parameter ", i, " (", p.describe(),
               ") appears twice");
      params_.push_back(p);
      weight_decay_.push_back(g.weight_decay);
      offsets_.push_back(total_);
      total_ += p.numel();
    }
  }
  const int64_t n = group_.world_size();
  shard_ = (total_ + n - 1) / n;
  std::vector<int64_t> numels;
  for (const Tensor& p : params_) numels.push_back(p.numel());
  const int64_t begin = shard_ * group_.rank();
  segments_ = shard_segments(numels, begin, begin + shard_);
  exp_avg_ = zeros({shard_});
  exp_avg_sq_ = zeros({shard_});
  broadcast_tensors(group_, params_);
}

void ZeroAdamW::set_lr(double lr) {
  TT_CHECK(std::isfinite(lr) && lr >= 0,
           "ZeroAdamW::set_lr: learning rate must be finite and >= 0, got ", lr);
  lr_ = lr;
}

void ZeroAdamW::zero_grad(bool set_to_none) {
  nn::zero_grad_(params_, set_to_none);
}

int64_t ZeroAdamW::state_bytes() const {
  return 2 * shard_ * static_cast<int64_t>(dtype_size(DType::kFloat32));
}

}  // namespace tt::dist
