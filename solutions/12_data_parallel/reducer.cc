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
           ") was marked twice in one backward (with DistributedDataParallel: call "
           "sync_gradients() after every backward, or accumulate inside no_sync())");
  poll();
  const auto bucket = static_cast<std::size_t>(bucket_of_[static_cast<std::size_t>(param)]);
  if (pending_[bucket] == 1) timeline_[bucket].ready = std::chrono::steady_clock::now();
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
          "buckets 0..b have been started (reduce_bucket), each once and in increasing order "
          "whatever the marking order (so all ranks pair the same all-reduces); none earlier");
#endif
}

void Reducer::reduce_bucket(int64_t b) {
  const Bucket& bucket = buckets_[static_cast<std::size_t>(b)];
  const Tensor& buffer = buffers_[static_cast<std::size_t>(b)];
#if TT_SOLUTION
  for (const BucketEntry& e : bucket.entries) {
    const Tensor& p = params_[static_cast<std::size_t>(e.param)];
    if (!p.grad().defined()) p.set_grad(zeros_like(p));  // an unused parameter adds zeros
    // grad_views_[i]: parameter i's place in its bucket. A gradient that already is that view
    // (DistributedDataParallel::zero_grad and finish_bucket leave it so) needs no copy.
    const Tensor& slot = grad_views_[static_cast<std::size_t>(e.param)];
    if (p.grad().data_ptr() != slot.data_ptr()) slot.copy_(p.grad());
  }
  works_[static_cast<std::size_t>(b)] = group_.all_reduce_async(buffer, op_);
  reduced_order_.push_back(b);
  ++num_reductions_;
#else
  (void)bucket, (void)buffer;
  TT_TODO(
      "ch12.3",
      "Reducer::reduce_bucket: buffers_[b] holds every gradient of bucket b at its entry's "
      "offset (an undefined gradient counts as zeros and becomes a zero tensor) and ONE "
      "nonblocking all-reduce of it over the ranks with op_ (DDP: the average) is started, "
      "kept in works_[b] "
      "(finish_bucket hands it to the gradients); b is appended to reduced_order_ and counted in "
      "num_reductions_");
#endif
}

}  // namespace tt::dist
