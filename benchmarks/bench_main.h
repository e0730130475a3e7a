// The end of every bench_* program's main(), with no dependency beyond Google Benchmark (so the
// CPU-only chapter 04 benchmark can use it; bench_common.h's run_main adds the CUDA context).
#pragma once

#include <benchmark/benchmark.h>

namespace tt::bench {

/// Google Benchmark's main: parses its flags (1 on an unknown one), runs the registered
/// benchmarks.
inline int run_registered(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace tt::bench
