// ============================================================================================
// YOUR EXERCISE FILE for chapter 12_data_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch12
// Generated from solutions/12_data_parallel/zero_step.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
  TT_TODO("ch12.4",
          "ZeroAdamW::reduce_gradients: grad_shard_ (S elements) = this rank's slice of the "
          "flattened, zero-padded gradients averaged over the ranks (one reduce_scatter)");
}

void ZeroAdamW::update() {
  TT_CHECK(grad_shard_.defined(), "ZeroAdamW::update (", group_.where(),
           "): call reduce_gradients() first");
  const int64_t t = step_ + 1;
  TT_TODO("ch12.4",
          "ZeroAdamW::update: every parameter ends as after torch AdamW (step t) on the "
          "averaged gradient, identical on all ranks; this rank updates only segments() with "
          "\"adamw_step\" from grad_shard_ and its moment shards, and all_gathers the updated "
          "shards");
  grad_shard_ = Tensor();
  step_ = t;
}

}  // namespace tt::dist
