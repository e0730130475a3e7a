// Chapter 12 exercise ch12.3: the bucket reducer's ready counting and the bucket all-reduce.
#include "tt/ddp.h"
#include "tt/todo.h"

namespace tt::dist {

void Reducer::mark_grad_ready(int64_t param) {
  if (!enabled_) return;
  TT_CHECK(param >= 0 && param < static_cast<int64_t>(params_.size()),
           "Reducer::mark_grad_ready: parameter ", param, " is not in 0..", params_.size() - 1);
  TT_CHECK(!ready_[static_cast<std::size_t>(param)], "Reducer::mark_grad_ready: parameter ", param,
           " (", params_[static_cast<std::size_t>(param)].describe(),
           ") was marked twice in one backward");
#if TT_SOLUTION
  ready_[static_cast<std::size_t>(param)] = 1;
  --pending_[static_cast<std::size_t>(bucket_of_[static_cast<std::size_t>(param)])];
  const auto num_buckets = static_cast<int64_t>(buckets_.size());
  while (next_bucket_ < num_buckets && pending_[static_cast<std::size_t>(next_bucket_)] == 0) {
    reduce_bucket(next_bucket_++);
  }
#else
  TT_TODO("ch12.3",
          "Reducer::mark_grad_ready: once every parameter of buckets 0..b has been marked, "
          "buckets 0..b have been reduced, each once and in increasing order whatever the "
          "marking order (so all ranks pair the same all-reduces); none earlier");
#endif
}

void Reducer::reduce_bucket(int64_t b) {
  const Bucket& bucket = buckets_[static_cast<std::size_t>(b)];
  const Tensor& buffer = buffers_[static_cast<std::size_t>(b)];
#if TT_SOLUTION
  for (const BucketEntry& e : bucket.entries) {
    const Tensor& p = params_[static_cast<std::size_t>(e.param)];
    if (!p.grad().defined()) p.set_grad(zeros_like(p));  // an unused parameter adds zeros
    buffer.narrow(0, e.offset, e.numel).copy_(p.grad().reshape({e.numel}));
  }
  group_.all_reduce(buffer, ReduceOp::kAvg);
  for (const BucketEntry& e : bucket.entries) {
    const Tensor& g = params_[static_cast<std::size_t>(e.param)].grad();
    g.copy_(buffer.narrow(0, e.offset, e.numel).view(g.shape()));
  }
  reduced_order_.push_back(b);
  ++num_reductions_;
#else
  (void)bucket, (void)buffer;
  TT_TODO("ch12.3",
          "Reducer::reduce_bucket: every gradient of bucket b becomes its average over the ranks "
          "(an undefined gradient counts as zeros and becomes a zero tensor) through ONE "
          "all_reduce of buffers_[b]; b is appended to reduced_order_ and counted in "
          "num_reductions_");
#endif
}

}  // namespace tt::dist
