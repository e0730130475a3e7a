// ============================================================================================
// YOUR EXERCISE FILE for chapter 12_data_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch12
// Generated from solutions/12_data_parallel/zero_step.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 12 exercise ch12.4: one ZeRO-1 step (reduce-scatter, shard update, all-gather).
#include <map>

#include "tt/dispatcher.h"
#include "tt/todo.h"
#include "tt/zero.h"

namespace tt::dist {

void ZeroAdamW::step() {
  const int64_t n = group_.world_size();
  const int64_t t = step_ + 1;
  // The flattened, zero-padded vectors of N*S elements (temporaries: only the moments persist).
  Tensor flat = zeros({n * shard_});
  (void)n, (void)flat;
  TT_TODO("ch12.4",
          "ZeroAdamW::step: every parameter ends as after torch AdamW (step t) on the "
          "gradient averaged over the ranks, identical on all ranks; this rank reads its S "
          "averaged gradient elements with reduce_scatter, updates only segments() with "
          "\"adamw_step\" and its moment shards, and all_gathers the updated shards");
  step_ = t;
}

}  // namespace tt::dist
