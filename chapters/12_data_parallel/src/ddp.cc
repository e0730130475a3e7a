// The Reducer's set-up and end-of-backward logic, and DistributedDataParallel. The exercises
// (assign_buckets, mark_grad_ready, reduce_bucket) are in buckets.cc and reducer.cc.
#include "tt/ddp.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "tt/autograd.h"

namespace tt::dist {

Reducer::Reducer(std::vector<Tensor> params, std::vector<Bucket> buckets, ProcessGroup& group,
                 ReduceOp op)
    : params_(std::move(params)), buckets_(std::move(buckets)), group_(group), op_(op) {
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
    // On the parameters' device: with CUDA parameters the all-reduce goes through NCCL.
    buffers_.push_back(
        empty({bucket.numel},
              {.dtype = bucket.dtype,
               .device = params_[static_cast<std::size_t>(bucket.entries[0].param)].device()}));
  }
  grad_views_.resize(n);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (const BucketEntry& e : buckets_[b].entries) {
      const Tensor& p = params_[static_cast<std::size_t>(e.param)];
      grad_views_[static_cast<std::size_t>(e.param)] =
          buffers_[b].narrow(0, e.offset, e.numel).view(p.shape());
    }
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
  polled_ = 0;
  last_reduced_order_ = std::move(reduced_order_);
  reduced_order_.clear();
  works_.clear();  // (after an error: waits for what is still in flight)
  works_.resize(buckets_.size());
  timeline_.assign(buckets_.size(), BucketTiming{});
}

void Reducer::poll() {
  // Asks the oldest all-reduce in flight, and the next ones only while they are complete: one
  // query per mark, not one per bucket in flight (on a GPU each is a cudaEventQuery, ~1000 a
  // step for GPT-2 124M's 148 marks). NCCL completes the buckets in the order they were started
  // (one stream); with MPI a test of one request progresses them all.
  while (polled_ < next_bucket_) {
    auto& work = works_[static_cast<std::size_t>(polled_)];
    if (work && !work->is_completed()) return;
    ++polled_;
  }
}

void Reducer::finish_bucket(int64_t b) {
  const auto i = static_cast<std::size_t>(b);
  TT_CHECK(works_[i] != nullptr, "Reducer::finish_bucket (", group_.where(), "): bucket ", b,
           " has no all-reduce in flight (reduce_bucket must start one in works_[b])");
  works_[i]->wait();
  timeline_[i].started = works_[i]->started();
  timeline_[i].finished = works_[i]->finished();
  timeline_[i].device_begin = works_[i]->device_begin();
  timeline_[i].device_end = works_[i]->device_end();
  works_[i].reset();
  // The averaged gradients stay where the all-reduce left them: each parameter's .grad becomes
  // its view of the bucket (PyTorch's gradient_as_bucket_view), so nothing is copied back on
  // the critical path after backward. A later backward that accumulates into these views (no
  // zero_grad(set_to_none) in between) fills the bucket in place, and reduce_bucket then has
  // nothing to copy in either.
  for (const BucketEntry& e : buckets_[i].entries) {
    const auto param = static_cast<std::size_t>(e.param);
    params_[param].set_grad(grad_views_[param]);
  }
}

void Reducer::zero_grad(int64_t min_view_numel) {
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    buffers_[b].fill_(0.0);  // one kernel per bucket, not one per parameter
    for (const BucketEntry& e : buckets_[b].entries) {
      const auto param = static_cast<std::size_t>(e.param);
      params_[param].set_grad(e.numel >= min_view_numel ? grad_views_[param] : Tensor());
    }
  }
}

void Reducer::finalize_backward() {
  if (!enabled_) return;
  finalize_called_ = std::chrono::steady_clock::now();
  // Behind backward's kernels, before the packing of the buckets started below.
  backward_end_mark_ = buffers_.empty() ? nullptr : group_.mark(buffers_.front());
  for (auto i = static_cast<int64_t>(params_.size()) - 1; i >= 0; --i) {
    if (!ready_[static_cast<std::size_t>(i)]) mark_grad_ready(i);
  }
  TT_CHECK(next_bucket_ == static_cast<int64_t>(buckets_.size()), "Reducer::finalize_backward (",
           group_.where(), "): only ", next_bucket_, " of ", buckets_.size(),
           " buckets were all-reduced after every parameter was marked ready");
  for (int64_t b = 0; b < next_bucket_; ++b) finish_bucket(b);
  last_timeline_ = std::move(timeline_);
  finalize_returned_ = std::chrono::steady_clock::now();
  reset();
}

double hidden_fraction(double begin, double end, double compute_end) {
  TT_CHECK(end >= begin, "hidden_fraction: the communication ends (", end, ") before it begins (",
           begin, ")");
  if (end == begin) return end <= compute_end ? 1.0 : 0.0;
  return std::clamp((compute_end - begin) / (end - begin), 0.0, 1.0);
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
      options_(options),
      reducer_(module_->parameters(),
               assign_buckets(module_->parameters(), options.bucket_cap_bytes), group) {
  TT_CHECK(options.bucket_view_min_numel >= 0,
           "DistributedDataParallel: bucket_view_min_numel must be >= 0, got ",
           options.bucket_view_min_numel);
  broadcast_tensors(group_, module_->parameters());
  broadcast_tensors(group_, tensors_of(module_->named_buffers()));
  // Overlap: parameter i's hook runs as soon as its gradient is final in a backward.
  const std::vector<Tensor> params = module_->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    hooks_.push_back(autograd::register_post_accumulate_grad_hook(
        params[i],
        [this, i](const Tensor&) { reducer_.mark_grad_ready(static_cast<int64_t>(i)); }));
  }
}

}  // namespace tt::dist
