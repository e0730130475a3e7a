// The Chrome trace as a StepObserver of the training library (tt/train_trace.h).
#include "tt/train_trace.h"

#include <cstdio>

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

std::unique_ptr<TraceStepObserver> trace_if_asked(const train::TrainConfig& config, Device device,
                                                  gpt2::ParallelStrategy& strategy,
                                                  train::TrainerParts& parts) {
  if (config.trace.empty()) return nullptr;
  auto tracer = std::make_unique<TraceStepObserver>(device, strategy, config.trace_steps);
  parts.observer = tracer.get();
  return tracer;
}

void write_trace(const TraceStepObserver* tracer, const std::string& path) {
  if (tracer == nullptr) return;
  tracer->write(path);
  std::printf("trace of %lld step(s) written to %s (open in ui.perfetto.dev)\n",
              static_cast<long long>(tracer->recorded()), path.c_str());
}

}  // namespace tt::trace
