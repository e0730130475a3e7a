// ZeroAdamW's set-up (shards, segments, state), clipping, checkpoint state and shard_segments;
// reduce_gradients() and update() are exercise ch12.4 (solutions/12_data_parallel/zero_step.cc).
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "tt/ddp.h"
#include "tt/dispatcher.h"
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
      TT_CHECK(p.defined() && p.dtype() == DType::kFloat32 && p.is_contiguous() && p.is_leaf(),
               "ZeroAdamW: parameter ", i, " must be a contiguous float32 leaf, got ",
               p.defined() ? p.describe() : std::string("an undefined tensor"));
      if (params_.empty()) device_ = p.device();
      TT_CHECK(p.device() == device_, "ZeroAdamW: parameter ", i, " (", p.describe(), ") is on ",
               p.device().str(), " but parameter 0 is on ", device_.str(),
               ": all parameters must be on one device (the CPU, or this rank's GPU)");
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
  exp_avg_ = zeros({shard_}, {.device = device_});
  exp_avg_sq_ = zeros({shard_}, {.device = device_});
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

void ZeroAdamW::step() {
  reduce_gradients();
  update();
}

double ZeroAdamW::clip_grad_norm(double max_norm) {
  TT_CHECK(grad_shard_.defined(), "ZeroAdamW::clip_grad_norm (", group_.where(),
           "): call reduce_gradients() first");
  TT_CHECK(max_norm > 0, "ZeroAdamW::clip_grad_norm: max_norm must be > 0, got ", max_norm);
  const std::vector<Tensor> shard{grad_shard_};
  // "sum_of_squares" returns the shard's sum on the host (on a GPU it waits for the kernel),
  // and the norm is needed on the host anyway (the return value, the clipping decision): so
  // the one scalar all-reduce is of a CPU float64 tensor, through the CPU backend (MPI), on
  // every device. (A device tensor through NCCL would cost the same wait, plus a copy.)
  const Tensor sum_sq =
      full({1}, call_kernel<optim::SumOfSquaresKernel>("sum_of_squares", device_, shard),
           {.dtype = DType::kFloat64});
  group_.all_reduce(sum_sq, ReduceOp::kSum);
  const double norm = std::sqrt(sum_sq.item());
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1) {
    call_kernel<optim::ScaleInplaceKernel>("scale_", device_, shard, coef);
  }
  return norm;
}

void ZeroAdamW::set_step_count(int64_t steps) {
  TT_CHECK(steps >= 0, "ZeroAdamW::set_step_count: steps must be >= 0, got ", steps);
  step_ = steps;
}

std::vector<Tensor> ZeroAdamW::gather_state() {
  const int64_t n = group_.world_size();
  std::vector<Tensor> out;
  for (const Tensor& shard : {exp_avg_, exp_avg_sq_}) {
    const Tensor full_state = empty({n * shard_}, {.device = device_});
    group_.all_gather(full_state, shard);
    out.push_back(full_state.narrow(0, 0, total_));
  }
  return out;
}

void ZeroAdamW::set_state_from_full(const Tensor& exp_avg, const Tensor& exp_avg_sq) {
  const int64_t begin = shard_ * group_.rank();
  const int64_t len = std::clamp<int64_t>(total_ - begin, 0, shard_);
  Tensor* shards[] = {&exp_avg_, &exp_avg_sq_};
  const Tensor* fulls[] = {&exp_avg, &exp_avg_sq};
  for (int k = 0; k < 2; ++k) {
    const Tensor& f = *fulls[k];
    TT_CHECK(f.defined() && f.dtype() == DType::kFloat32 && f.numel() == total_,
             "ZeroAdamW::set_state_from_full: expected ", total_, " float32 elements, got ",
             f.defined() ? f.describe() : std::string("an undefined tensor"));
    shards[k]->fill_(0.0);
    // copy_ crosses devices when f is not on device_ (e.g. moments read from a file).
    if (len > 0) shards[k]->narrow(0, 0, len).copy_(f.reshape({total_}).narrow(0, begin, len));
  }
}

int64_t ZeroAdamW::state_bytes() const {
  return 2 * shard_ * static_cast<int64_t>(dtype_size(DType::kFloat32));
}

}  // namespace tt::dist
