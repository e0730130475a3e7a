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
#if TT_SOLUTION
  // Warm-up: enough forwards to fill the pipeline below this stage (p - rank - 1 of them, at
  // most m); the steady state then keeps that many micro-batches in flight; the cool-down
  // drains them.
  const int warmup = std::min(stages - rank - 1, micro_batches);
  std::vector<PipeOp> ops;
  int f = 0, b = 0;
  for (; f < warmup; ++f) ops.push_back({OpKind::kForward, f, 0});
  for (; f < micro_batches; ++f, ++b) {
    ops.push_back({OpKind::kForward, f, 0});
    ops.push_back({OpKind::kBackward, b, 0});
  }
  for (; b < micro_batches; ++b) ops.push_back({OpKind::kBackward, b, 0});
  return ops;
#else
  TT_TODO("ch14.1",
          "one_f_one_b_order: the F and B of micro-batches 0..m-1 (chunk 0) in 1F1B order: "
          "p - rank - 1 warm-up forwards (at most m), then one forward and one backward "
          "alternately, then the remaining backwards; each kind in micro-batch order");
#endif
}

}  // namespace tt::pp
