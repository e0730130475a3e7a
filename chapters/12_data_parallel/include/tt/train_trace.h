/// @file train_trace.h
/// @brief The Chrome trace of tt/trace.h inside the training library's loop (tt/trainer.h):
/// `train_gpt2 --trace FILE --trace-steps N` records the run's first N steps, with DDP's bucket
/// all-reduces, in one file for every rank.
///
/// The training library (chapter 09) cannot name chapter 12's TraceWriter; it calls a
/// train::StepObserver around each step, and this observer forwards the first steps to a
/// TraceWriter:
/// @code
///   auto tracer = tt::trace::trace_if_asked(config, device, *strategy, parts);  // every rank
///   tt::train::Trainer trainer(config, dir, std::move(parts));
///   trainer.run();
///   tt::trace::write_trace(tracer.get(), config.trace);                      // every rank
/// @endcode
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tt/ddp.h"
#include "tt/trace.h"
#include "tt/train_config.h"
#include "tt/train_parallel.h"
#include "tt/trainer.h"

namespace tt::dist {

/// The DDP reducer of `strategy` when it is chapter 12's "ddp" strategy and its optimizer is made
/// (its bucket all-reduces go into the trace); nullptr for any other strategy.
const Reducer* strategy_reducer(const gpt2::ParallelStrategy& strategy);

}  // namespace tt::dist

namespace tt::trace {

/// A train::StepObserver that records the first `steps` steps it sees in a TraceWriter.
class TraceStepObserver final : public train::StepObserver {
 public:
  /// A tracer of kernels on `device` for the ranks of `strategy` (a one-process "single"
  /// strategy: no process group; otherwise dist::world(), whose ranks all construct it together).
  /// Throws tt::Error when `steps` < 1.
  TraceStepObserver(Device device, gpt2::ParallelStrategy& strategy, int64_t steps);

  /// Starts the trace of `step` while fewer than `steps` steps were recorded.
  void begin_step(int64_t step) override;
  /// Ends a recorded step, with the DDP strategy's bucket all-reduces (strategy_reducer).
  void end_step(int64_t step) override;
  /// Steps recorded so far.
  int64_t recorded() const { return recorded_; }
  /// The writer (its events).
  const TraceWriter& writer() const { return writer_; }
  /// Writes the trace to `path` (TraceWriter::write: every rank calls it).
  void write(const std::string& path) const { writer_.write(path); }

 private:
  gpt2::ParallelStrategy& strategy_;
  TraceWriter writer_;
  int64_t steps_;
  int64_t recorded_ = 0;
};

/// The tracer of `config`'s --trace: a TraceStepObserver of config.trace_steps steps, set as
/// `parts.observer`; nullptr (and `parts` untouched) when config.trace is empty. Every rank
/// calls it (the observer's construction is a collective of the strategy's ranks).
std::unique_ptr<TraceStepObserver> trace_if_asked(const train::TrainConfig& config, Device device,
                                                  gpt2::ParallelStrategy& strategy,
                                                  train::TrainerParts& parts);

/// Writes `tracer`'s trace to `path` (every rank; rank 0 merges) and says so on stdout;
/// nothing for a null tracer.
void write_trace(const TraceStepObserver* tracer, const std::string& path);

}  // namespace tt::trace
