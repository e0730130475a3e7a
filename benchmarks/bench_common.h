// What the CPU-vs-CUDA benchmarks share: deterministic inputs, one timer for both devices,
// rate counters, and register_pair(), which registers one benchmark per device under names that
// differ only in the device part:
//
//   family/cpu/args    family/cuda/args        e.g.  layernorm_fwd/cpu/8192x768
//
// so that benchmarks/report.py pairs them (CPU vs CUDA table, speed-up plot). The arguments, and
// hence the work, are the same for both; only the iteration count differs (the CPU variant
// stops after kCpuMinTime seconds, a single iteration for the large GPT-2 shapes).
//
// Timing (both devices use manual time, so the JSON means the same thing for both):
//   * CPU: wall clock around each call, after one warm-up call (first-touch page faults);
//   * CUDA: a pair of CUDA events recorded on the device's stream around each call, after three
//     warm-up calls; the time is the GPU timeline between the events.
// Rates: "GB/s" = compulsory bytes per call (each input read once, each output written once,
// counted by each benchmark and stated in its comment) / time; "GFLOP/s" / "TFLOP/s" where a
// benchmark counts floating-point operations; "tok/s" for training steps.
//
// The CUDA variant is registered in every build. It skips itself, with the reason as its error
// message, when it cannot run: "built without CUDA" (TT_ENABLE_CUDA=OFF or no nvcc) or "no GPU"
// (a CUDA build on a machine without a usable device); report.py lists these as skipped.
//
// Include only from benchmarks linked with chapter 06 or later (tt/cuda_device.h in CUDA builds).
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench_main.h"
#include "tt/cuda_probe.h"
#include "tt/tensor.h"

#if TT_WITH_CUDA
#include <cuda_runtime_api.h>

#include "tt/cuda_device.h"
#endif

namespace tt::bench {

/// Minimum measured time of a CPU variant (seconds): at least one iteration, a few for the
/// small shapes, so that a CPU run of all benchmarks stays within minutes on 2 cores.
inline constexpr double kCpuMinTime = 0.3;

/// The device part of a benchmark name: "cpu" or "cuda".
inline const char* device_name(Device device) {
  return device.is_cuda() ? "cuda" : "cpu";
}

/// Why CUDA benchmarks cannot run here ("built without CUDA", "no GPU"), or nullptr if they can.
inline const char* cuda_unavailable() {
  if (!built_with_cuda()) return "built without CUDA";
  if (cuda_device_count() == 0) return "no GPU";
  return nullptr;
}

/// Skips `state` with the reason when `device` is CUDA and CUDA cannot run; true if skipped.
inline bool skip_unavailable(benchmark::State& state, Device device) {
  const char* why = device.is_cuda() ? cuda_unavailable() : nullptr;
  if (why != nullptr) state.SkipWithError(why);
  return why != nullptr;
}

/// A float32 tensor on `device` with deterministic values in [-2, 2) (an LCG: cheaper than randn
/// at 400M elements).
inline Tensor filled(const Shape& shape, uint32_t seed, Device device = Device::cpu()) {
  Tensor t = empty(shape);
  float* p = t.data<float>();
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<float>(s >> 8) * (4.0f / 16777216.0f) - 2.0f;
  }
  return t.to(device);
}

/// An int64 tensor on `device` with deterministic values in [0, n).
inline Tensor indices(const Shape& shape, int64_t n, uint32_t seed, Device device = Device::cpu()) {
  Tensor t = empty(shape, {DType::kInt64});
  int64_t* p = t.data<int64_t>();
  uint64_t s = seed * 6364136223846793005ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(n));
  }
  return t.to(device);
}

/// Timestamps on one device's timeline: the wall clock on the CPU, CUDA events recorded on the
/// device's stream on CUDA. mark(i) records timestamp i; seconds(i, j) is the time from mark i
/// to mark j (waiting for the GPU to reach mark j).
class DeviceClock {
 public:
  DeviceClock(Device device, int marks) : device_(device), host_(static_cast<std::size_t>(marks)) {
#if TT_WITH_CUDA
    if (device_.is_cuda()) {
      events_.resize(host_.size());
      for (cudaEvent_t& e : events_) TT_CUDA_CHECK(cudaEventCreate(&e));
    }
#endif
  }
  ~DeviceClock() {
#if TT_WITH_CUDA
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
#endif
  }
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;

  void mark(int i) {
#if TT_WITH_CUDA
    if (device_.is_cuda()) {
      TT_CUDA_CHECK(
          cudaEventRecord(events_[static_cast<std::size_t>(i)], cuda::stream(device_.index)));
      return;
    }
#endif
    host_[static_cast<std::size_t>(i)] = std::chrono::steady_clock::now();
  }

  double seconds(int from, int to) const {
#if TT_WITH_CUDA
    if (device_.is_cuda()) {
      const cudaEvent_t a = events_[static_cast<std::size_t>(from)];
      const cudaEvent_t b = events_[static_cast<std::size_t>(to)];
      TT_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      TT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      return ms * 1e-3;
    }
#endif
    return std::chrono::duration<double>(host_[static_cast<std::size_t>(to)] -
                                         host_[static_cast<std::size_t>(from)])
        .count();
  }

 private:
  Device device_;
  std::vector<std::chrono::steady_clock::time_point> host_;
#if TT_WITH_CUDA
  std::vector<cudaEvent_t> events_;
#endif
};

/// Times `run` on `device` (manual time; see the file comment for the warm-up) and returns the
/// total measured seconds.
inline double time_on(benchmark::State& state, Device device, const std::function<void()>& run) {
  const int warmups = device.is_cuda() ? 3 : 1;
  for (int i = 0; i < warmups; ++i) run();
  DeviceClock clock(device, 2);
  double total = 0;
  for (auto _ : state) {
    clock.mark(0);
    run();
    clock.mark(1);
    const double s = clock.seconds(0, 1);
    state.SetIterationTime(s);
    total += s;
  }
  return total;
}

/// Sets "GB/s" (and "GFLOP/s" when flops > 0) from the bytes and flops of one call and the total
/// measured seconds.
inline void set_rates(benchmark::State& state, double seconds, double bytes, double flops = 0) {
  if (seconds <= 0) return;
  const double calls = static_cast<double>(state.iterations());
  if (bytes > 0) state.counters["GB/s"] = bytes * calls / seconds / 1e9;
  if (flops > 0) state.counters["GFLOP/s"] = flops * calls / seconds / 1e9;
}

/// Times `run` on `device` and sets "GB/s" from the `bytes` of one call.
inline void measure(benchmark::State& state, Device device, double bytes,
                    const std::function<void()>& run) {
  set_rates(state, time_on(state, device, run), bytes);
}

/// A benchmark body that runs on the device it is given.
using DeviceBenchmark = std::function<void(benchmark::State&, Device)>;

/// Registers the benchmark `name` running `fn` on `device` (manual time, milliseconds; on CUDA it
/// skips itself when CUDA cannot run). Iterations: 0 lets Google Benchmark choose (on the CPU with
/// a minimum time of kCpuMinTime), n > 0 fixes the count.
inline void register_on(const std::string& name, Device device, const DeviceBenchmark& fn,
                        int64_t iterations = 0) {
  benchmark::internal::Benchmark* b =
      benchmark::RegisterBenchmark(name.c_str(), [fn, device](benchmark::State& state) {
        if (!skip_unavailable(state, device)) fn(state, device);
      });
  b->UseManualTime()->Unit(benchmark::kMillisecond);
  if (iterations > 0) {
    b->Iterations(iterations);
  } else if (device.is_cpu()) {
    b->MinTime(kCpuMinTime);
  }
}

/// Registers the pair `family/cpu/args` and `family/cuda/args` (see register_on).
inline void register_pair(const std::string& family, const std::string& args,
                          const DeviceBenchmark& fn, int64_t cpu_iterations = 0,
                          int64_t cuda_iterations = 0) {
  for (const Device device : {Device::cpu(), Device::cuda()}) {
    register_on(family + "/" + device_name(device) + "/" + args, device, fn,
                device.is_cuda() ? cuda_iterations : cpu_iterations);
  }
}

/// Registers `family/memcpy/args`: a device-to-device cudaMemcpy moving `bytes` (bytes / 2 read,
/// bytes / 2 written), the bandwidth a memory-bound CUDA kernel with that traffic can hope for.
inline void register_memcpy_reference(const std::string& family, const std::string& args,
                                      double bytes) {
  register_on(family + "/memcpy/" + args, Device::cuda(), [bytes](benchmark::State& state, Device) {
#if TT_WITH_CUDA
    const auto n = static_cast<int64_t>(bytes / 2 / 4);
    const Tensor src = zeros({n}, {DType::kFloat32, Device::cuda()});
    const Tensor dst = empty({n}, {DType::kFloat32, Device::cuda()});
    measure(state, Device::cuda(), 8.0 * static_cast<double>(n), [&] {
      TT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), static_cast<std::size_t>(n) * 4,
                                    cudaMemcpyDeviceToDevice, cuda::stream(0)));
    });
#else
    (void)state;
    (void)bytes;
#endif
  });
}

/// The main() of a benchmark program: prints (and records in the JSON context) the GPU or why
/// the CUDA variants skip, then runs the registered benchmarks. `program` names the binary.
inline int run_main(int argc, char** argv, const char* program) {
  if (const char* why = cuda_unavailable()) {
    std::printf("%s: %s: the CUDA benchmarks skip themselves\n", program, why);
    benchmark::AddCustomContext("cuda", std::string("skipped: ") + why);
  } else {
#if TT_WITH_CUDA
    cudaDeviceProp prop{};
    TT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("%s: %s, %d SMs\n", program, prop.name, prop.multiProcessorCount);
    benchmark::AddCustomContext("gpu", prop.name);
#endif
  }
  return run_registered(argc, argv);
}

}  // namespace tt::bench
