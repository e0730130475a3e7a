// Chapter 07 benchmarks (CUDA): the hand-written SGEMM progression against cuBLAS, and the fused
// AdamW / grad-norm kernels against a device-to-device copy moving the same number of bytes.
//
//   build/bin/bench_cuda_matmul                               (about a minute on an H100)
//   build/bin/bench_cuda_matmul --benchmark_filter=sgemm/.*/4096
//
// Names are family/variant/size, so benchmarks/report.py compares each variant with "naive"
// (speed-up) and with "cublas" / "memcpy" (percentage of the reference):
//   sgemm/{naive,tiled,regblock,vec4,cublas,cublas_tf32}/{1024,2048,4096}   TFLOP/s, fp32,
//       square M = N = K, TF32 off except cublas_tf32 (shown for scale; not an fp32 result);
//   adamw/{fused,memcpy}/124M      GB/s; AdamW reads p, g, m, v and writes p, m, v: 28 bytes per
//       parameter. "memcpy" copies 14 bytes per parameter (read + write = the same 28 bytes).
//       The fused time includes building and uploading the pointer table (a real step does too);
//   grad_norm/{fused,memcpy}/124M  GB/s; reads 4 bytes per parameter (memcpy: 2 read + 2 written).
// Timing: CUDA events around each call after two warm-up calls (UseManualTime), so host
// overhead outside the call and the final synchronization are not counted.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tt/cuda_device.h"
#include "tt/cuda_matmul.h"
#include "tt/cuda_probe.h"
#include "tt/dispatcher.h"
#include "tt/fused_optim.h"
#include "tt/ops_matmul.h"

namespace {

using tt::Device;
using tt::DType;
using tt::Tensor;

/// Times `fn` with CUDA events: two warm-up calls, then one event pair per iteration.
/// Returns the total seconds measured.
double time_cuda(benchmark::State& state, const std::function<void()>& fn) {
  fn();
  fn();
  TT_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  TT_CUDA_CHECK(cudaEventCreate(&start));
  TT_CUDA_CHECK(cudaEventCreate(&stop));
  double total = 0;
  for (auto _ : state) {
    TT_CUDA_CHECK(cudaEventRecord(start, tt::cuda::stream(0)));
    fn();
    TT_CUDA_CHECK(cudaEventRecord(stop, tt::cuda::stream(0)));
    TT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    TT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms / 1e3);
    total += ms / 1e3;
  }
  TT_CUDA_CHECK(cudaEventDestroy(start));
  TT_CUDA_CHECK(cudaEventDestroy(stop));
  return total;
}

bool skip_without_gpu(benchmark::State& state) {
  if (tt::cuda_device_count() > 0) return false;
  state.SkipWithError("no CUDA device");
  for (auto _ : state) {
  }
  return true;
}

Tensor gpu_randn(const tt::Shape& shape, uint64_t seed) {
  tt::Generator gen(seed);
  return tt::randn(shape, gen).to(Device::cuda());
}

void bench_sgemm(benchmark::State& state, std::string kernel, bool tf32, int64_t n) {
  if (skip_without_gpu(state)) return;
  const Tensor a = gpu_randn({n, n}, 1), b = gpu_randn({n, n}, 2);
  const Tensor c = tt::empty({n, n}, {DType::kFloat32, Device::cuda()});
  tt::cuda::AllowTf32Guard guard(tf32);
  const double seconds =
      time_cuda(state, [&] { tt::call_kernel<tt::MatmulKernel>(kernel, Device::cuda(), c, a, b); });
  const double flops =
      2.0 * static_cast<double>(n) * n * n * static_cast<double>(state.iterations());
  state.counters["TFLOP/s"] = flops / seconds / 1e12;
}

/// GPT-2 small (124M): the shapes of its parameter tensors (tied embedding counted once).
std::vector<tt::Shape> gpt2_124m_shapes() {
  const int64_t C = 768, V = 50257, T = 1024, L = 12;
  std::vector<tt::Shape> s = {{V, C}, {T, C}};
  for (int64_t l = 0; l < L; ++l) {
    for (const tt::Shape& x : std::vector<tt::Shape>{{C},
                                                     {C},
                                                     {C, 3 * C},
                                                     {3 * C},
                                                     {C, C},
                                                     {C},
                                                     {C},
                                                     {C},
                                                     {C, 4 * C},
                                                     {4 * C},
                                                     {4 * C, C},
                                                     {C}}) {
      s.push_back(x);
    }
  }
  s.push_back({C});
  s.push_back({C});
  return s;
}

std::vector<Tensor> gpu_tensors(const std::vector<tt::Shape>& shapes, double value) {
  std::vector<Tensor> ts;
  for (const tt::Shape& s : shapes)
    ts.push_back(tt::full(s, value, {DType::kFloat32, Device::cuda()}));
  return ts;
}

int64_t total_numel(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.numel();
  return n;
}

void set_gbps(benchmark::State& state, double bytes_per_call, double seconds) {
  state.counters["GB/s"] = bytes_per_call * static_cast<double>(state.iterations()) / seconds / 1e9;
}

void bench_adamw_fused(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const auto shapes = gpt2_124m_shapes();
  const std::vector<Tensor> p = gpu_tensors(shapes, 0.5), g = gpu_tensors(shapes, 1e-3),
                            m = gpu_tensors(shapes, 0.0), v = gpu_tensors(shapes, 0.0);
  const tt::AdamWConfig config;
  int64_t step = 0;
  const double seconds = time_cuda(state, [&] {
    tt::call_kernel<tt::AdamWKernel>("adamw_step", Device::cuda(), p, g, m, v, config, ++step);
  });
  set_gbps(state, 28.0 * static_cast<double>(total_numel(p)), seconds);
}

void bench_grad_norm_fused(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::vector<Tensor> g = gpu_tensors(gpt2_124m_shapes(), 1e-3);
  const Tensor out = tt::empty({}, {DType::kFloat32, Device::cuda()});
  const double seconds = time_cuda(
      state, [&] { tt::call_kernel<tt::GradNormKernel>("grad_norm", Device::cuda(), out, g); });
  set_gbps(state, 4.0 * static_cast<double>(total_numel(g)), seconds);
}

/// A device-to-device copy of bytes_per_param / 2 bytes per parameter of GPT-2 124M: the same
/// traffic (read + write) as the fused kernel it is the reference of.
void bench_memcpy(benchmark::State& state, double bytes_per_param) {
  if (skip_without_gpu(state)) return;
  int64_t n = 0;
  for (const tt::Shape& s : gpt2_124m_shapes()) n += tt::shape_numel(s);
  const int64_t bytes = static_cast<int64_t>(bytes_per_param / 2 * static_cast<double>(n));
  const Tensor src = tt::zeros({bytes / 4}, {DType::kFloat32, Device::cuda()});
  const Tensor dst = tt::empty({bytes / 4}, {DType::kFloat32, Device::cuda()});
  const std::size_t nbytes = static_cast<std::size_t>(bytes / 4 * 4);
  const double seconds = time_cuda(state, [&] {
    TT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), nbytes, cudaMemcpyDeviceToDevice,
                                  tt::cuda::stream(0)));
  });
  set_gbps(state, 2.0 * static_cast<double>(nbytes), seconds);
}

}  // namespace

int main(int argc, char** argv) {
  const std::pair<const char*, const char*> sgemms[] = {
      {"naive", "matmul_cuda_naive"},       {"tiled", "matmul_cuda_tiled"},
      {"regblock", "matmul_cuda_regblock"}, {"vec4", "matmul_cuda_vec4"},
      {"cublas", "matmul_cublas"},          {"cublas_tf32", "matmul_cublas"}};
  for (int64_t n : {1024, 2048, 4096}) {
    for (const auto& [variant, kernel] : sgemms) {
      const bool tf32 = std::string(variant) == "cublas_tf32";
      benchmark::RegisterBenchmark(
          ("sgemm/" + std::string(variant) + "/" + std::to_string(n)).c_str(), bench_sgemm,
          std::string(kernel), tf32, n)
          ->Unit(benchmark::kMillisecond)
          ->UseManualTime();
    }
  }
  benchmark::RegisterBenchmark("adamw/fused/124M", bench_adamw_fused)
      ->Unit(benchmark::kMillisecond)
      ->UseManualTime();
  benchmark::RegisterBenchmark("adamw/memcpy/124M", bench_memcpy, 28.0)
      ->Unit(benchmark::kMillisecond)
      ->UseManualTime();
  benchmark::RegisterBenchmark("grad_norm/fused/124M", bench_grad_norm_fused)
      ->Unit(benchmark::kMillisecond)
      ->UseManualTime();
  benchmark::RegisterBenchmark("grad_norm/memcpy/124M", bench_memcpy, 4.0)
      ->Unit(benchmark::kMillisecond)
      ->UseManualTime();
  if (tt::cuda_device_count() == 0) {
    std::printf("bench_cuda_matmul: no CUDA device: every benchmark is skipped\n");
  } else {
    cudaDeviceProp prop{};
    TT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("bench_cuda_matmul: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    benchmark::AddCustomContext("gpu", prop.name);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
