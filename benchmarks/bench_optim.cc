// The optimizer kernels on the parameters of GPT-2 124M (124.4M floats in 148 tensors, the tied
// embedding counted once): chapter 05's CPU kernels against chapter 07's fused multi-tensor CUDA
// kernels, called through the registry with the same tensors, and a device-to-device cudaMemcpy
// moving as many bytes (bench_common.h: names kernel/{cpu,cuda,memcpy}/124M).
//
//   OMP_NUM_THREADS=2 build/bin/bench_optim
//
//   adamw/{cpu,cuda,memcpy}/124M           GB/s; one AdamW step reads p, g, m, v and writes p, m,
//       v: 28 bytes per parameter. The CUDA time includes building and uploading the pointer
//       table of the multi-tensor launch (a real step does too).
//   sum_of_squares/{cpu,cuda,memcpy}/124M  GB/s; reads each gradient once: 4 bytes per parameter.
//       The CUDA time includes copying the result to the host, as gradient clipping does.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "bench_common.h"
#include "tt/dispatcher.h"
#include "tt/optim.h"

namespace {

using tt::Device;
using tt::DType;
using tt::Tensor;

/// GPT-2 small (124M): the shapes of its parameter tensors (tied embedding counted once).
std::vector<tt::Shape> gpt2_124m_shapes() {
  const int64_t C = 768, V = 50257, T = 1024, L = 12;
  std::vector<tt::Shape> s = {{V, C}, {T, C}};
  const std::vector<tt::Shape> block = {{C}, {C}, {C, 3 * C}, {3 * C}, {C, C},     {C},
                                        {C}, {C}, {C, 4 * C}, {4 * C}, {4 * C, C}, {C}};
  for (int64_t l = 0; l < L; ++l) s.insert(s.end(), block.begin(), block.end());
  s.push_back({C});
  s.push_back({C});
  return s;
}

/// One tensor per GPT-2 124M parameter on `device`, every element equal to `value`.
std::vector<Tensor> parameter_like(Device device, double value) {
  std::vector<Tensor> ts;
  for (const tt::Shape& s : gpt2_124m_shapes()) {
    ts.push_back(tt::full(s, value, {DType::kFloat32, device}));
  }
  return ts;
}

double num_parameters() {
  int64_t n = 0;
  for (const tt::Shape& s : gpt2_124m_shapes()) n += tt::shape_numel(s);
  return static_cast<double>(n);
}

void adamw(benchmark::State& state, Device d) {
  const std::vector<Tensor> p = parameter_like(d, 0.5), g = parameter_like(d, 1e-3),
                            m = parameter_like(d, 0.0), v = parameter_like(d, 0.0);
  tt::optim::AdamWStepArgs args{1e-3, 0.9, 0.999, 1e-8, 0.01, 0};
  tt::bench::measure(state, d, 28.0 * num_parameters(), [&] {
    ++args.step;
    tt::call_kernel<tt::optim::AdamWStepKernel>("adamw_step", d, p, g, m, v, args);
  });
}

void sum_of_squares(benchmark::State& state, Device d) {
  const std::vector<Tensor> g = parameter_like(d, 1e-3);
  double total = 0;
  tt::bench::measure(state, d, 4.0 * num_parameters(), [&] {
    total = tt::call_kernel<tt::optim::SumOfSquaresKernel>("sum_of_squares", d, g);
  });
  benchmark::DoNotOptimize(total);
}

}  // namespace

int main(int argc, char** argv) {
  tt::bench::register_pair("adamw", "124M", adamw);
  tt::bench::register_memcpy_reference("adamw", "124M", 28.0 * num_parameters());
  tt::bench::register_pair("sum_of_squares", "124M", sum_of_squares);
  tt::bench::register_memcpy_reference("sum_of_squares", "124M", 4.0 * num_parameters());
  return tt::bench::run_main(argc, argv, "bench_optim");
}
