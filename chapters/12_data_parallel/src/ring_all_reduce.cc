// ============================================================================================
// YOUR EXERCISE FILE for chapter 12_data_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch12
// Generated from solutions/12_data_parallel/ring_all_reduce.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 12 exercise ch12.1: all-reduce as a ring of send_recv calls (reduce-scatter, then
// all-gather).
#include "tt/ring_all_reduce.h"

#include "tt/ops_elementwise.h"
#include "tt/todo.h"

namespace tt::dist {

void ring_all_reduce(ProcessGroup& group, const Tensor& t, ReduceOp op) {
  TT_CHECK(t.defined() && t.is_contiguous() && is_floating(t.dtype()) && t.device().is_cpu(),
           "ring_all_reduce: expected a contiguous float CPU tensor, got ",
           t.defined() ? t.describe() : std::string("an undefined tensor"));
  const int64_t N = group.world_size();
  const int64_t r = group.rank();
  const int64_t n = t.numel();
  const Tensor flat = t.view({n});
  (void)N, (void)r, (void)flat;
  TT_TODO("ch12.1",
          "ring_all_reduce: t (any n, also n < N or n % N != 0) becomes the sum (avg: sum / N) "
          "over the N ranks, bit-identical on every rank, through group.send_recv with the ring "
          "neighbours only: 2(N-1) steps, each sending one chunk [chunk_begin(c), "
          "chunk_begin(c+1))");
}

}  // namespace tt::dist
