// The theoretical bubble fraction of a pipeline (tt/pipeline_schedule.h): exercise ch14.4.
#include "tt/error.h"
#include "tt/pipeline_schedule.h"
#include "tt/todo.h"

namespace tt::pp {

double bubble_fraction(int stages, int micro_batches, int chunks) {
  TT_CHECK(stages >= 1 && micro_batches >= 1 && chunks >= 1, "bubble_fraction(stages=", stages,
           ", micro_batches=", micro_batches, ", chunks=", chunks, "): all must be >= 1");
#if TT_SOLUTION
  // Idle: (p - 1)(t_f + t_b) / v per rank (filling and draining through chunks of 1/v of the
  // layers); busy: m (t_f + t_b). The fraction of the step's time spent idle:
  const double p = stages, m = micro_batches, v = chunks;
  return (p - 1) / (v * m + p - 1);
#else
  TT_TODO("ch14.4",
          "bubble_fraction: the share of a rank's step time spent idle in the fill and drain "
          "of a pipeline of p stages, m micro-batches and v chunks per rank (Narayanan et al. "
          "2021); 0 for one stage");
#endif
}

}  // namespace tt::pp
