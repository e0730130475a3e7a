/// @file trace.h
/// @brief A step timeline as Chrome trace-event JSON (the "traceEvents" format that Perfetto,
/// ui.perfetto.dev, and chrome://tracing open): ops, steps, host phases and collectives, one
/// process per rank (the tools lab of chapter 12; exercise ch12.5 writes one event).
///
/// Use, around the steps to trace (any model, one process or N under mpirun):
/// @code
/// trace::TraceWriter trace(device, &dist::world());  // or nullptr: one process, no collectives
/// for (int64_t step = 0; step < steps; ++step) {
///   trace.begin_step(step);                           // starts chapter 10's Profiler
///   { trace::TraceWriter::Span s(trace, "backward"); autograd::backward(loss); }
///   ddp.sync_gradients();
///   trace.end_step(&ddp.reducer());                   // ops, step, and the buckets' all-reduces
/// }
/// trace.write("step.json");                           // every rank's events in one file
/// @endcode
///
/// Threads of a rank's process (tid):
/// - 0 "host": the steps and the Span phases (host wall clock);
/// - 1 "kernels": every dispatched kernel (tt/profiler.h): on CUDA its CUDA-event times on the
///   device's compute stream, placed from the step's start; on the CPU the wall clock;
/// - 2 "collectives": DDP's bucket all-reduces: on CUDA their CUDA-event times on the NCCL
///   stream (the same device timeline as tid 1); on the CPU, host time from the start of
///   MPI_Iallreduce to when a poll first saw it complete;
/// - 3 "cpu kernels": kernels that ran on the CPU during a CUDA trace;
/// - 4, 5, ... "collectives (overlapping)": an all-reduce that started while others were still
///   in flight (MPI progresses several at once; NCCL's stream runs them one after the other), so
///   that the events of every thread nest, as the viewers draw them.
///
/// Clocks: every rank counts microseconds from its TraceWriter's construction, which a barrier
/// of the group lines up across ranks (to the barrier's skew, some microseconds on one machine).
/// On CUDA a step's device events are placed at the step's host start plus their GPU time since
/// the step's first event: the device timeline of one step is exact, its position against the
/// host's events is the host's.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tt/ddp.h"
#include "tt/dist.h"
#include "tt/profiler.h"

namespace tt::trace {

/// One event of the Chrome trace-event format.
struct TraceEvent {
  std::string name;      ///< what the timeline shows ("matmul", "step 3", "all_reduce bucket 0")
  std::string category;  ///< "cat": a comma-free tag to filter by ("op", "step", "comm", ...)
  /// "ph": 'X' a complete event (ts and dur), 'i' an instant (ts only, thread-scoped).
  char phase = 'X';
  double ts_us = 0;   ///< start, microseconds
  double dur_us = 0;  ///< duration, microseconds ('X' only)
  int pid = 0;        ///< process: the rank
  int tid = 0;        ///< thread: 0 host, 1 kernels, 2 collectives, 3 cpu kernels, 4+ (above)
  std::vector<std::pair<std::string, std::string>> args;  ///< "args": shown when selected
};

/// The JSON object of one event (exercise ch12.5), e.g. `{"name":"matmul","cat":"op","ph":"X",`
/// `"ts":12.5,"dur":3.25,"pid":0,"tid":1,"args":{"shapes":"[2, 3]"}}`: name, cat, ph (one
/// character), ts, pid, tid, args (an object of the string pairs, {} when none); "dur" for 'X'
/// only; "s":"t" (thread scope) for 'i' only. Throws tt::Error naming the event for another
/// phase, or a negative or non-finite ts or dur.
std::string trace_event_json(const TraceEvent& event);

/// The tid names above, by tid ("host", "kernels", "collectives", "cpu kernels",
/// "collectives (overlapping)").
const char* thread_name(int tid);

/// Records steps of one rank (see the file comment) and writes them as one trace file.
class TraceWriter {
 public:
  /// A writer of kernels on `device` (CUDA events on its stream, or the wall clock for the CPU)
  /// for this process; with a `group` (kept by reference), pid is its rank, the construction
  /// waits on a barrier (all ranks construct together) and write() gathers every rank's events.
  explicit TraceWriter(Device device, dist::ProcessGroup* group = nullptr);
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// Starts step `step`: an NVTX range "step N" (tt/nvtx.h), and chapter 10's Profiler (which
  /// replaces the installed KernelObserver until end_step). Throws if a step is open.
  void begin_step(int64_t step);
  /// Ends the step: stops the profiler (one device synchronization), adds the step, its kernels
  /// and, given the DDP `reducer` of the step (after sync_gradients), each bucket's all-reduce
  /// and the instant its gradients were ready. Throws if no step is open.
  void end_step(const dist::Reducer* reducer = nullptr);
  /// True between begin_step and end_step.
  bool in_step() const { return in_step_; }

  /// A host phase ("forward", "backward", "optimizer") on tid 0, from construction to
  /// destruction (also an NVTX range).
  class Span {
   public:
    /// Opens `name` on `writer`'s host thread.
    Span(TraceWriter& writer, std::string name);
    /// Closes it.
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    TraceWriter& writer_;
    std::string name_;
    std::chrono::steady_clock::time_point begin_;
  };

  /// Adds an event of this rank (pid is set to the rank).
  void add(TraceEvent event);
  /// The events so far, in the order added.
  const std::vector<TraceEvent>& events() const { return events_; }
  /// Microseconds from construction to `t` on the host clock.
  double us_since_origin(std::chrono::steady_clock::time_point t) const;
  /// This rank (0 without a group).
  int rank() const { return rank_; }

  /// The trace of this rank as a JSON document: {"traceEvents": [process and thread names,
  /// then the events sorted by (tid, ts, longer first)], "displayTimeUnit": "ms"}.
  std::string json() const;
  /// Writes the trace to `path`. With a group of N > 1 ranks, every rank calls it: each writes
  /// `path` + ".rank" + its rank, rank 0 then merges them into `path` and removes them (the
  /// ranks must share a file system, as on one machine). Throws tt::Error naming the file when
  /// it cannot write.
  void write(const std::string& path) const;

 private:
  Device device_;
  dist::ProcessGroup* group_;
  int rank_ = 0;
  std::chrono::steady_clock::time_point origin_;
  prof::Profiler profiler_;
  std::shared_ptr<dist::DeviceMark> step_mark_;  // CUDA + group: the step's start on the GPU
  Tensor anchor_;                                // CUDA + group: a tensor to place marks with
  int64_t step_ = 0;
  bool in_step_ = false;
  std::vector<TraceEvent> events_;
};

}  // namespace tt::trace
