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
#if TT_SOLUTION
  dist::ProcessGroup& group = *ctx.group;
  const int world = group.world_size(), rank = group.rank();
  // Start passing the block on (not after the last step): it travels while we compute with it.
  KVBlock next;
  std::unique_ptr<dist::Work> transfer;
  if (step + 1 < world) {
    next = {empty(kv.k.shape(), {kv.k.dtype(), kv.k.device()}),
            empty(kv.v.shape(), {kv.v.dtype(), kv.v.device()})};
    using dist::P2POp;
    transfer = group.batch_send_recv_async({{P2POp::Kind::kSend, kv.k, ctx.next(), 0},
                                            {P2POp::Kind::kSend, kv.v, ctx.next(), 1},
                                            {P2POp::Kind::kRecv, next.k, ctx.prev(), 0},
                                            {P2POp::Kind::kRecv, next.v, ctx.prev(), 1}});
  }
  const int src = (rank - step + world) % world;
  const BlockPlan plan = plan_block(ctx.layout, ctx.causal, rank, src, world, q.size(2));
  if (plan.kind != BlockPlan::Kind::kNone) {
    const AttentionPart part = attention_block_forward(
        q.slice(2, plan.q_begin, plan.q_end), kv.k.slice(2, plan.k_begin, plan.k_end),
        kv.v.slice(2, plan.k_begin, plan.k_end), plan.kind == BlockPlan::Kind::kCausal);
    if (!acc.out.defined()) {
      acc = part;  // step 0: the rank's own block covers every row
    } else {
      merge_attention_rows(acc, plan.q_begin, part);  // the rows that saw the block, in place
    }
  }
  if (transfer) transfer->wait();
  return next;
#else
  (void)q, (void)kv, (void)acc;
  TT_TODO("ch16.3",
          "ring_forward_step: start sending kv to next() and receiving the next block from "
          "prev() (not at the last step), attend q to the block of rank (rank - step) mod N as "
          "plan_block says, merge it into acc's rows with merge_attention_rows (step 0: acc = "
          "the block's result), wait, return the received block");
#endif
}

}  // namespace tt::cp
