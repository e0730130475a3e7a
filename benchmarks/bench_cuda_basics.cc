// Chapter 06's element-wise and reduction kernels at GPT-2 shapes (B=8, T=1024, C=768), CUDA
// against the same kernel on the CPU and a device-to-device cudaMemcpy that moves as many bytes
// (the bandwidth a memory-bound kernel can hope for). Names family/{cpu,cuda,memcpy}/shape; the
// timing and the skipping without a GPU are bench_common.h's.
//
//   build/bin/bench_cuda_basics [--benchmark_filter=add]
//
// GB/s of compulsory traffic (every input read once, every output written once, 4 bytes each):
//   add, sub, mul, div/8x1024x768   out = a (op) b, all [B*T, C]: 3N
//   add_bias/8x1024x768             out = x + bias, bias [C] broadcast over the rows: 2N + C
//   add_transposed/8x1024x768       out = a + b, b a transposed view of [C, B*T]: 3N
//   sum_all/6291456                 the sum of all N elements: N + 1
//   sum_rows/8192x768               the sum of each row [B*T, C] -> [B*T, 1]: N + B*T
//   sum_cols/8192x768               the sum over the rows [B*T, C] -> [1, C] (bias gradient): N + C
// Built in every configuration; without CUDA (or without a GPU) only the CPU variants run.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "bench_common.h"
#include "tt/ops.h"
#include "tt/ops_reduce.h"

namespace {

using tt::Device;
using tt::DType;
using tt::Tensor;
using tt::bench::filled;

constexpr int64_t kB = 8, kT = 1024, kC = 768, kRows = kB * kT, kN = kRows * kC;

// ----- binary ops --------------------------------------------------------------------------

enum class Operand { kContiguous, kBias, kTransposed };

/// out = a (op) b over [B*T, C]: b contiguous, a [C] bias broadcast over rows, or a transposed
/// [C, B*T] tensor.
void binary(benchmark::State& state, Device device, const char* op, Operand kind) {
  const Tensor a = filled({kRows, kC}, 1, device);
  Tensor b;
  double b_elements = kN;
  switch (kind) {
    case Operand::kContiguous:
      b = filled({kRows, kC}, 2, device);
      break;
    case Operand::kBias:
      b = filled({kC}, 2, device).expand({kRows, kC});
      b_elements = kC;
      break;
    case Operand::kTransposed:
      b = filled({kC, kRows}, 2, device).transpose(0, 1);
      break;
  }
  const Tensor out = tt::empty({kRows, kC}, {DType::kFloat32, device});
  tt::bench::measure(state, device, 4.0 * (2.0 * kN + b_elements),
                     [&] { tt::call_kernel<tt::BinaryKernel>(op, device, out, a, b); });
}

// ----- reductions --------------------------------------------------------------------------

/// "sum" of x [B*T, C] into out of shape `out_shape` ({1}: all elements of a flat x).
void reduce(benchmark::State& state, Device device, const tt::Shape& out_shape) {
  const Tensor x = filled(out_shape.size() == 1 ? tt::Shape{kN} : tt::Shape{kRows, kC}, 3, device);
  const Tensor out = tt::empty(out_shape, {DType::kFloat32, device});
  tt::bench::measure(state, device, 4.0 * static_cast<double>(kN + out.numel()),
                     [&] { tt::call_kernel<tt::ReduceKernel>("sum", device, out, x); });
}

/// The benchmark of `op` with a second operand of `kind`.
tt::bench::DeviceBenchmark binary_bench(const char* op, Operand kind) {
  return [op, kind](benchmark::State& s, Device d) { binary(s, d, op, kind); };
}

/// The benchmark of "sum" into `out_shape`.
tt::bench::DeviceBenchmark sum_bench(const tt::Shape& out_shape) {
  return [out_shape](benchmark::State& s, Device d) { reduce(s, d, out_shape); };
}

/// Registers family/{cpu,cuda}/args running fn, and family/memcpy/args moving `bytes`.
void register_with_memcpy(const std::string& family, const std::string& args,
                          const tt::bench::DeviceBenchmark& fn, double bytes) {
  tt::bench::register_pair(family, args, fn);
  tt::bench::register_memcpy_reference(family, args, bytes);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string shape = "8x1024x768", rows = "8192x768";
  for (const char* op : tt::kBinaryOps) {
    register_with_memcpy(op, shape, binary_bench(op, Operand::kContiguous), 3 * 4.0 * kN);
  }
  register_with_memcpy("add_bias", shape, binary_bench("add", Operand::kBias), 2 * 4.0 * kN);
  register_with_memcpy("add_transposed", shape, binary_bench("add", Operand::kTransposed),
                       3 * 4.0 * kN);
  register_with_memcpy("sum_all", std::to_string(kN), sum_bench({1}), 4.0 * kN);
  register_with_memcpy("sum_rows", rows, sum_bench({kRows, 1}), 4.0 * kN);
  register_with_memcpy("sum_cols", rows, sum_bench({1, kC}), 4.0 * kN);
  return tt::bench::run_main(argc, argv, "bench_cuda_basics");
}
