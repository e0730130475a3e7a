// ============================================================================================
// YOUR EXERCISE FILE for chapter 14_pipeline_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch14
// Generated from solutions/14_pipeline_parallel/one_f_one_b.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// The 1F1B compute order of one rank (tt/pipeline_schedule.h): exercise ch14.1.
#include <algorithm>
#include <vector>

#include "tt/error.h"
#include "tt/pipeline_schedule.h"
#include "tt/todo.h"

namespace tt::pp {

std::vector<PipeOp> one_f_one_b_order(int stages, int micro_batches, int rank) {
  TT_CHECK(stages >= 1 && micro_batches >= 1 && rank >= 0 && rank < stages,
           "one_f_one_b_order(stages=", stages, ", micro_batches=", micro_batches, ", rank=", rank,
           "): needs p >= 1, m >= 1 and a rank in 0..p-1");
  TT_TODO("ch14.1",
          "one_f_one_b_order: the F and B of micro-batches 0..m-1 (chunk 0) in 1F1B order: "
          "p - rank - 1 warm-up forwards (at most m), then one forward and one backward "
          "alternately, then the remaining backwards; each kind in micro-batch order");
}

}  // namespace tt::pp
