// Throughput of chapter 06's CUDA kernels at GPT-2 shapes (B=8, T=1024, C=768), in GB/s of
// compulsory traffic (every input read once, every output written once), next to the same op
// on the CPU and a device-to-device cudaMemcpy that moves as many bytes (the bandwidth a
// memory-bound kernel can hope for).
//
//   build/bin/bench_cuda_basics [--benchmark_filter=add]
//
// CUDA times come from CUDA events around each launch after 3 warm-up launches (manual time);
// CPU times from the wall clock (OMP_NUM_THREADS threads where the CPU kernel is parallel).
// Without a GPU the CUDA benchmarks skip themselves ("no CUDA device").
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tt/cuda_device.h"
#include "tt/cuda_probe.h"
#include "tt/ops.h"
#include "tt/ops_reduce.h"

namespace {

using tt::Device;
using tt::DType;
using tt::Tensor;

constexpr int64_t kB = 8, kT = 1024, kC = 768, kN = kB * kT * kC;
const std::string kShape = "8x1024x768";

/// A float32 tensor with deterministic values in [-2, 2) on `device`.
Tensor filled(const tt::Shape& shape, uint32_t seed, Device device) {
  Tensor t = tt::empty(shape);
  float* p = t.data<float>();
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<float>(s >> 8) * (4.0f / 16777216.0f) - 2.0f;
  }
  return t.to(device);
}

/// True when a CUDA device can be used.
bool have_gpu() {
  return tt::cuda_device_count() > 0;
}

/// Sets the "GB/s" counter from the bytes moved per iteration and the total measured seconds.
void report(benchmark::State& state, double bytes, double seconds) {
  if (seconds > 0) {
    state.counters["GB/s"] = bytes * static_cast<double>(state.iterations()) / seconds / 1e9;
  }
}

/// Times `launch` with CUDA events on device 0's stream (manual time), after 3 warm-ups.
void time_cuda(benchmark::State& state, double bytes, const std::function<void()>& launch) {
  if (!have_gpu()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const cudaStream_t stream = tt::cuda::stream(0);
  for (int i = 0; i < 3; ++i) launch();
  cudaEvent_t start, stop;
  TT_CUDA_CHECK(cudaEventCreate(&start));
  TT_CUDA_CHECK(cudaEventCreate(&stop));
  double total = 0;
  for (auto _ : state) {
    TT_CUDA_CHECK(cudaEventRecord(start, stream));
    launch();
    TT_CUDA_CHECK(cudaEventRecord(stop, stream));
    TT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    TT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms * 1e-3);
    total += ms * 1e-3;
  }
  TT_CUDA_CHECK(cudaEventDestroy(start));
  TT_CUDA_CHECK(cudaEventDestroy(stop));
  report(state, bytes, total);
}

/// Times `run` on the CPU with the wall clock (manual time, so both devices report alike).
void time_cpu(benchmark::State& state, double bytes, const std::function<void()>& run) {
  run();  // warm-up (page faults of the output)
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    total += s;
  }
  report(state, bytes, total);
}

// ----- binary ops --------------------------------------------------------------------------

enum class Operand { kContiguous, kBias, kTransposed };

/// out = a (op) b over [B*T, C]: b contiguous, a [C] bias broadcast over rows, or a transposed
/// [C, B*T] tensor. Traffic: out and a written/read in full, b as stored.
void binary(benchmark::State& state, const char* op, Operand kind, Device device) {
  if (device.is_cuda() && !have_gpu()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const int64_t rows = kB * kT;
  const Tensor a = filled({rows, kC}, 1, device);
  Tensor b;
  double b_bytes = 4.0 * kN;
  switch (kind) {
    case Operand::kContiguous:
      b = filled({rows, kC}, 2, device);
      break;
    case Operand::kBias:
      b = filled({kC}, 2, device).expand({rows, kC});
      b_bytes = 4.0 * kC;
      break;
    case Operand::kTransposed:
      b = filled({kC, rows}, 2, device).transpose(0, 1);
      break;
  }
  const Tensor out = tt::empty({rows, kC}, {DType::kFloat32, device});
  const double bytes = 4.0 * kN * 2 + b_bytes;
  const auto run = [&] { tt::call_kernel<tt::BinaryKernel>(op, device, out, a, b); };
  if (device.is_cuda()) {
    time_cuda(state, bytes, run);
  } else {
    time_cpu(state, bytes, run);
  }
}

// ----- reductions --------------------------------------------------------------------------

/// sum of all kN elements (out [1]) or of each row of [B*T, C] (out [B*T, 1]).
void reduce(benchmark::State& state, bool rows, Device device) {
  if (device.is_cuda() && !have_gpu()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const Tensor x = filled(rows ? tt::Shape{kB * kT, kC} : tt::Shape{kN}, 3, device);
  const Tensor out =
      tt::empty(rows ? tt::Shape{kB * kT, 1} : tt::Shape{1}, {DType::kFloat32, device});
  const double bytes = 4.0 * (kN + out.numel());
  const auto run = [&] { tt::call_kernel<tt::ReduceKernel>("sum", device, out, x); };
  if (device.is_cuda()) {
    time_cuda(state, bytes, run);
  } else {
    time_cpu(state, bytes, run);
  }
}

// ----- baseline: device-to-device memcpy of the same traffic -------------------------------

/// cudaMemcpyAsync of bytes/2 (each byte is read once and written once).
void memcpy_baseline(benchmark::State& state, double bytes) {
  if (!have_gpu()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  const auto n = static_cast<int64_t>(bytes / 2 / 4);
  const Tensor src = filled({n}, 4, Device::cuda());
  const Tensor dst = tt::empty({n}, {DType::kFloat32, Device::cuda()});
  time_cuda(state, bytes, [&] {
    TT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), static_cast<std::size_t>(n) * 4,
                                  cudaMemcpyDeviceToDevice, tt::cuda::stream(0)));
  });
}

void register_all() {
  const auto reg = [](const std::string& name, std::function<void(benchmark::State&)> fn) {
    benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& s) { fn(s); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  };
  for (const char* op : tt::kBinaryOps) {
    const std::string family = op;
    reg(family + "/cuda/" + kShape,
        [op](auto& s) { binary(s, op, Operand::kContiguous, Device::cuda()); });
    reg(family + "/cpu/" + kShape,
        [op](auto& s) { binary(s, op, Operand::kContiguous, Device::cpu()); });
    reg(family + "/memcpy/" + kShape, [](auto& s) { memcpy_baseline(s, 3 * 4.0 * kN); });
  }
  reg("add_bias/cuda/" + kShape, [](auto& s) { binary(s, "add", Operand::kBias, Device::cuda()); });
  reg("add_bias/cpu/" + kShape, [](auto& s) { binary(s, "add", Operand::kBias, Device::cpu()); });
  reg("add_bias/memcpy/" + kShape, [](auto& s) { memcpy_baseline(s, 2 * 4.0 * kN); });
  reg("add_transposed/cuda/" + kShape,
      [](auto& s) { binary(s, "add", Operand::kTransposed, Device::cuda()); });
  reg("add_transposed/cpu/" + kShape,
      [](auto& s) { binary(s, "add", Operand::kTransposed, Device::cpu()); });
  reg("add_transposed/memcpy/" + kShape, [](auto& s) { memcpy_baseline(s, 3 * 4.0 * kN); });
  reg("sum_all/cuda/" + std::to_string(kN), [](auto& s) { reduce(s, false, Device::cuda()); });
  reg("sum_all/cpu/" + std::to_string(kN), [](auto& s) { reduce(s, false, Device::cpu()); });
  reg("sum_all/memcpy/" + std::to_string(kN), [](auto& s) { memcpy_baseline(s, 4.0 * kN); });
  reg("sum_rows/cuda/8192x768", [](auto& s) { reduce(s, true, Device::cuda()); });
  reg("sum_rows/cpu/8192x768", [](auto& s) { reduce(s, true, Device::cpu()); });
  reg("sum_rows/memcpy/8192x768", [](auto& s) { memcpy_baseline(s, 4.0 * kN); });
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!have_gpu()) {
    std::printf("bench_cuda_basics: %s; the CUDA benchmarks skip themselves\n",
                tt::built_with_cuda() ? "no CUDA device" : "built without CUDA");
  }
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
