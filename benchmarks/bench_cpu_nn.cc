// Throughput of the chapter 04 NN kernels on the CPU, in GB/s of compulsory traffic: every
// input read once plus every output written once, divided by the time. These kernels do little
// arithmetic per byte, so GB/s against the machine's memory bandwidth says how close to the
// limit they are.
//
//   OMP_NUM_THREADS=2 build-cpu/bin/bench_cpu_nn
//
// Shapes: CPU "mini" GPT (B=8, T=256, C=384, 6 heads) and GPT-2 124M (B=8, T=1024, C=768,
// 12 heads). layernorm runs on (B*T, C) rows, gelu on the MLP hidden (B*T, 4C), softmax on the
// attention rows (B*nh*T, T).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "tt/ops_nn.h"

namespace {

using tt::Tensor;

/// A float32 tensor with deterministic values in [-2, 2) (cheaper than randn at 100M elements).
Tensor filled(const tt::Shape& shape, uint32_t seed) {
  Tensor t = tt::empty(shape);
  float* p = t.data<float>();
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<float>(s >> 8) * (4.0f / 16777216.0f) - 2.0f;
  }
  return t;
}

/// Reports bytes (per iteration) as a "GB/s" rate counter (10^9 bytes per second).
void report(benchmark::State& state, double bytes) {
  state.counters["GB/s"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

void BM_LayerNormForward(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1);
  Tensor x = filled({R, C}, 1), w = filled({C}, 2), b = filled({C}, 3);
  Tensor out = tt::empty({R, C}), mean = tt::empty({R}), rstd = tt::empty({R});
  for (auto _ : state) {
    tt::call_kernel<tt::LayerNormForwardKernel>("layernorm_forward", tt::Device::cpu(), out, mean,
                                                rstd, x, w, b, 1e-5);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  report(state, 4.0 * (2 * R * C + 2 * C + 2 * R));
}

void BM_LayerNormBackward(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1);
  Tensor x = filled({R, C}, 1), w = filled({C}, 2), b = filled({C}, 3), dy = filled({R, C}, 4);
  Tensor out = tt::empty({R, C}), mean = tt::empty({R}), rstd = tt::empty({R});
  tt::cpu::layernorm_forward(out, mean, rstd, x, w, b, 1e-5);
  Tensor dx = tt::empty({R, C}), dw = tt::empty({C}), db = tt::empty({C});
  for (auto _ : state) {
    tt::call_kernel<tt::LayerNormBackwardKernel>("layernorm_backward", tt::Device::cpu(), dx, dw,
                                                 db, dy, x, w, mean, rstd);
    benchmark::DoNotOptimize(dx.data_ptr());
  }
  report(state, 4.0 * (3 * R * C + 3 * C + 2 * R));
}

void BM_SoftmaxForward(benchmark::State& state) {
  const int64_t R = state.range(0), T = state.range(1);
  Tensor x = filled({R, T}, 5), y = tt::empty({R, T});
  for (auto _ : state) {
    tt::call_kernel<tt::SoftmaxForwardKernel>("softmax_forward", tt::Device::cpu(), y, x, 1);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  report(state, 4.0 * 2 * R * T);
}

void BM_SoftmaxBackward(benchmark::State& state) {
  const int64_t R = state.range(0), T = state.range(1);
  Tensor x = filled({R, T}, 5), y = tt::empty({R, T}), dy = filled({R, T}, 6);
  tt::cpu::softmax_forward(y, x, 1);
  Tensor dx = tt::empty({R, T});
  for (auto _ : state) {
    tt::call_kernel<tt::SoftmaxBackwardKernel>("softmax_backward", tt::Device::cpu(), dx, dy, y, 1);
    benchmark::DoNotOptimize(dx.data_ptr());
  }
  report(state, 4.0 * 3 * R * T);
}

void BM_GeluForward(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1);
  Tensor x = filled({R, C}, 7), y = tt::empty({R, C});
  for (auto _ : state) {
    tt::call_kernel<tt::UnaryForwardKernel>("gelu_forward", tt::Device::cpu(), y, x);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  report(state, 4.0 * 2 * R * C);
}

void BM_GeluBackward(benchmark::State& state) {
  const int64_t R = state.range(0), C = state.range(1);
  Tensor x = filled({R, C}, 7), dy = filled({R, C}, 8), dx = tt::empty({R, C});
  for (auto _ : state) {
    tt::call_kernel<tt::UnaryBackwardKernel>("gelu_backward", tt::Device::cpu(), dx, dy, x);
    benchmark::DoNotOptimize(dx.data_ptr());
  }
  report(state, 4.0 * 3 * R * C);
}

// {rows, cols}: mini (B*T = 8*256, C = 384) and GPT-2 (B*T = 8*1024, C = 768).
#define TT_ROWS_C \
  ->Args({8 * 256, 384})->Args({8 * 1024, 768})->Unit(benchmark::kMillisecond)->UseRealTime()
// GELU acts on the MLP hidden layer: (B*T, 4C).
#define TT_ROWS_4C                    \
  ->Args({8 * 256, 4 * 384})          \
      ->Args({8 * 1024, 4 * 768})     \
      ->Unit(benchmark::kMillisecond) \
      ->UseRealTime()
// Attention rows (B*nh*T, T): mini (8*6*256, 256) and GPT-2 (8*12*1024, 1024).
#define TT_ATTN                       \
  ->Args({8 * 6 * 256, 256})          \
      ->Args({8 * 12 * 1024, 1024})   \
      ->Unit(benchmark::kMillisecond) \
      ->UseRealTime()

BENCHMARK(BM_LayerNormForward) TT_ROWS_C;
BENCHMARK(BM_LayerNormBackward) TT_ROWS_C;
BENCHMARK(BM_SoftmaxForward) TT_ATTN;
BENCHMARK(BM_SoftmaxBackward) TT_ATTN;
BENCHMARK(BM_GeluForward) TT_ROWS_4C;
BENCHMARK(BM_GeluBackward) TT_ROWS_4C;

}  // namespace

BENCHMARK_MAIN();
