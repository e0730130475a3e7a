// The Reducer's set-up and end-of-backward logic, and DistributedDataParallel. The exercises
// (assign_buckets, mark_grad_ready, reduce_bucket) are in buckets.cc and reducer.cc.
#include "tt/ddp.h"

#include <unordered_set>
#include <utility>

#include "tt/autograd.h"

namespace tt::dist {

Reducer::Reducer(std::vector<Tensor> params, std::vector<Bucket> buckets, ProcessGroup& group)
    : params_(std::move(params)), buckets_(std::move(buckets)), group_(group) {
  const std::size_t n = params_.size();
  bucket_of_.assign(n, -1);
  std::unordered_set<const TensorImpl*> seen;
  for (std::size_t i = 0; i < n; ++i) {
    TT_CHECK(params_[i].defined(), "Reducer: parameter ", i, " is undefined");
    TT_CHECK(seen.insert(params_[i].impl().get()).second, "Reducer: parameter ", i, " (",
             params_[i].describe(), ") appears twice (pass module.parameters())");
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    TT_CHECK(!bucket.entries.empty(), "Reducer: bucket ", b, " is empty");
    int64_t offset = 0;
    for (const BucketEntry& e : bucket.entries) {
      TT_CHECK(e.param >= 0 && e.param < static_cast<int64_t>(n), "Reducer: bucket ", b,
               " names parameter ", e.param, ", not in 0..", n - 1);
      const Tensor& p = params_[static_cast<std::size_t>(e.param)];
      TT_CHECK(bucket_of_[static_cast<std::size_t>(e.param)] < 0, "Reducer: parameter ", e.param,
               " is in two buckets");
      TT_CHECK(e.offset == offset && e.numel == p.numel() && p.dtype() == bucket.dtype,
               "Reducer: bucket ", b, " places parameter ", e.param, " (", p.describe(),
               ") at offset ", e.offset, " with ", e.numel, " elements of ",
               dtype_name(bucket.dtype), "; expected offset ", offset, " and ", p.numel(),
               " elements of ", dtype_name(p.dtype()));
      bucket_of_[static_cast<std::size_t>(e.param)] = static_cast<int64_t>(b);
      offset += e.numel;
    }
    TT_CHECK(offset == bucket.numel, "Reducer: bucket ", b, " says ", bucket.numel,
             " elements, its entries hold ", offset);
    buffers_.push_back(empty({bucket.numel}, {.dtype = bucket.dtype}));
  }
  for (std::size_t i = 0; i < n; ++i) {
    TT_CHECK(bucket_of_[i] >= 0, "Reducer: parameter ", i, " (", params_[i].describe(),
             ") is in no bucket");
  }
  reset();
}

void Reducer::reset() {
  pending_.clear();
  for (const Bucket& b : buckets_) pending_.push_back(static_cast<int64_t>(b.entries.size()));
  ready_.assign(params_.size(), 0);
  next_bucket_ = 0;
  last_reduced_order_ = std::move(reduced_order_);
  reduced_order_.clear();
}

void Reducer::finalize_backward() {
  if (!enabled_) return;
  for (auto i = static_cast<int64_t>(params_.size()) - 1; i >= 0; --i) {
    if (!ready_[static_cast<std::size_t>(i)]) mark_grad_ready(i);
  }
  TT_CHECK(next_bucket_ == static_cast<int64_t>(buckets_.size()), "Reducer::finalize_backward (",
           group_.where(), "): only ", next_bucket_, " of ", buckets_.size(),
           " buckets were all-reduced after every parameter was marked ready");
  reset();
}

void broadcast_tensors(ProcessGroup& group, const std::vector<Tensor>& tensors, int root) {
  for (const Tensor& t : tensors) group.broadcast(t.detach(), root);
}

namespace {

std::vector<Tensor> tensors_of(const std::vector<nn::NamedTensor>& named) {
  std::vector<Tensor> out;
  for (const auto& nt : named) out.push_back(nt.second);
  return out;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 ProcessGroup& group, DdpOptions options)
    : module_(std::move(module)),
      group_(group),
      reducer_(module_->parameters(),
               assign_buckets(module_->parameters(), options.bucket_cap_bytes), group) {
  broadcast_tensors(group_, module_->parameters());
  broadcast_tensors(group_, tensors_of(module_->named_buffers()));
}

}  // namespace tt::dist
