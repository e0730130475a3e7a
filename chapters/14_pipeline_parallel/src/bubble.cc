// ============================================================================================
// YOUR EXERCISE FILE for chapter 14_pipeline_parallel. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch14
// Generated from solutions/14_pipeline_parallel/bubble.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// The theoretical bubble fraction of a pipeline (tt/pipeline_schedule.h): exercise ch14.4.
#include "tt/error.h"
#include "tt/pipeline_schedule.h"
#include "tt/todo.h"

namespace tt::pp {

double bubble_fraction(int stages, int micro_batches, int chunks) {
  TT_CHECK(stages >= 1 && micro_batches >= 1 && chunks >= 1, "bubble_fraction(stages=", stages,
           ", micro_batches=", micro_batches, ", chunks=", chunks, "): all must be >= 1");
  TT_TODO("ch14.4",
          "bubble_fraction: the share of a rank's step time spent idle in the fill and drain "
          "of a pipeline of p stages, m micro-batches and v chunks per rank (Narayanan et al. "
          "2021); 0 for one stage");
}

}  // namespace tt::pp
