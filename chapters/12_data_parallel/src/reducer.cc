// ============================================================================================
// YOUR EXERCISE FILE for chapter 12_data_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch12
// Generated from solutions/12_data_parallel/reducer.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
  TT_TODO("ch12.3",
          "Reducer::mark_grad_ready: once every parameter of buckets 0..b has been marked, "
          "buckets 0..b have been started (reduce_bucket), each once and in increasing order "
          "whatever the marking order (so all ranks pair the same all-reduces); none earlier");
}

void Reducer::reduce_bucket(int64_t b) {
  const Bucket& bucket = buckets_[static_cast<std::size_t>(b)];
  const Tensor& buffer = buffers_[static_cast<std::size_t>(b)];
  (void)bucket, (void)buffer;
  TT_TODO(
      "ch12.3",
      "Reducer::reduce_bucket: buffers_[b] holds every gradient of bucket b at its entry's "
      "offset (an undefined gradient counts as zeros and becomes a zero tensor) and ONE "
      "nonblocking all-reduce of it over the ranks with op_ (DDP: the average) is started, "
      "kept in works_[b] "
      "(finish_bucket hands it to the gradients); b is appended to reduced_order_ and counted in "
      "num_reductions_");
}

}  // namespace tt::dist
