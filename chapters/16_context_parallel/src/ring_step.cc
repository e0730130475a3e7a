// ============================================================================================
// YOUR EXERCISE FILE for chapter 16_context_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch16
// Generated from solutions/16_context_parallel/ring_step.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Exercise ch16.3: one step of the ring forward (tt/ring_attention.h): pass the K/V block on
// while computing with it, merge the block's attention into the running result.
#include <memory>
#include <vector>

#include "tt/dist.h"
#include "tt/error.h"
#include "tt/ring_attention.h"
#include "tt/todo.h"

namespace tt::cp {

KVBlock ring_forward_step(const RingContext& ctx, int step, const Tensor& q, const KVBlock& kv,
                          AttentionPart& acc) {
  TT_CHECK(ctx.group != nullptr && step >= 0 && step < ctx.group->world_size(),
           "cp::ring_forward_step: step ", step, " must be in [0, N) of a group of N ranks");
  TT_CHECK(step == 0 || acc.out.defined(), "cp::ring_forward_step: step ", step,
           " needs the result of the steps before it in acc");
  (void)q, (void)kv, (void)acc;
  TT_TODO("ch16.3",
          "ring_forward_step: start sending kv to next() and receiving the next block from "
          "prev() (not at the last step), attend q to the block of rank (rank - step) mod N as "
          "plan_block says, merge it into acc's rows with merge_attention_rows (step 0: acc = "
          "the block's result), wait, return the received block");
}

}  // namespace tt::cp
