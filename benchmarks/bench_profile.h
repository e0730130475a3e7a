// Profiling one step for the --profile flag of the chapter 10 benchmarks (bench_gpt2_step,
// bench_classifier): the per-op profiler of tt/profiler.h around a step. Include only from
// benchmarks linked with chapter 10.
#pragma once

#include "tt/profiler.h"

namespace tt::bench {

/// Runs `step` under `profiler` twice (the first run fills the profiler's CUDA event pool) and
/// returns the peaks to read the second run's profile against (prof::default_peaks: the H100's
/// for the current precision on CUDA, bf16's when `bf16`, none on the CPU).
template <typename Step>
prof::Peaks profile_step(prof::Profiler& profiler, Device device, const Step& step,
                         bool bf16 = false) {
  for (int i = 0; i < 2; ++i) {
    profiler.start();
    step();
    profiler.stop();
  }
  return prof::default_peaks(device, bf16);
}

}  // namespace tt::bench
