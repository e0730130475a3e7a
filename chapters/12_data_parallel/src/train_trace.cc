// The Chrome trace as a StepObserver of the training library (tt/train_trace.h).
#include "tt/train_trace.h"

#include "tt/error.h"

namespace tt::trace {

TraceStepObserver::TraceStepObserver(Device device, gpt2::ParallelStrategy& strategy, int64_t steps)
    : strategy_(strategy),
      writer_(device, strategy.name() == "single" ? nullptr : &dist::world()),
      steps_(steps) {
  TT_CHECK(steps >= 1, "TraceStepObserver: steps must be >= 1, got ", steps);
}

void TraceStepObserver::begin_step(int64_t step) {
  if (recorded_ < steps_) writer_.begin_step(step);
}

void TraceStepObserver::end_step(int64_t step) {
  (void)step;
  if (!writer_.in_step()) return;
  writer_.end_step(dist::strategy_reducer(strategy_));
  ++recorded_;
}

}  // namespace tt::trace
