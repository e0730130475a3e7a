// Chapter 07 benchmarks (CUDA): the hand-written SGEMM progression against cuBLAS. (The fused
// AdamW / sum-of-squares kernels are in bench_optim, next to the CPU ones.)
//
//   build/bin/bench_cuda_matmul                               (about a minute on an H100)
//   build/bin/bench_cuda_matmul --benchmark_filter=sgemm/.*/4096
//
// Names are family/variant/size, so benchmarks/report.py compares each variant with "naive"
// (speed-up) and with "cublas" (percentage of the reference):
//   sgemm/{naive,tiled,regblock,vec4,warptile,cublas,cublas_tf32}/{1024,2048,4096}   TFLOP/s,
//       fp32, square M = N = K, TF32 off except cublas_tf32 (shown for scale; not an fp32
//       result). warptile takes its warp-tiled path at all three sizes (multiples of 128).
// Timing: CUDA events around each call after three warm-up calls (bench_common.h, manual time),
// so host overhead outside the call and the final synchronization are not counted.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "bench_common.h"
#include "tt/cuda_matmul.h"
#include "tt/dispatcher.h"
#include "tt/ops_matmul.h"

namespace {

using tt::Device;
using tt::DType;
using tt::Tensor;

Tensor gpu_randn(const tt::Shape& shape, uint64_t seed) {
  tt::Generator gen(seed);
  return tt::randn(shape, gen).to(Device::cuda());
}

void bench_sgemm(benchmark::State& state, const std::string& kernel, bool tf32, int64_t n) {
  const Tensor a = gpu_randn({n, n}, 1), b = gpu_randn({n, n}, 2);
  const Tensor c = tt::empty({n, n}, {DType::kFloat32, Device::cuda()});
  tt::cuda::AllowTf32Guard guard(tf32);
  const double seconds = tt::bench::time_on(state, Device::cuda(), [&] {
    tt::call_kernel<tt::MatmulKernel>(kernel, Device::cuda(), c, a, b);
  });
  const double flops =
      2.0 * static_cast<double>(n) * n * n * static_cast<double>(state.iterations());
  state.counters["TFLOP/s"] = flops / seconds / 1e12;
}

}  // namespace

int main(int argc, char** argv) {
  const std::pair<const char*, const char*> sgemms[] = {
      {"naive", "matmul_cuda_naive"},       {"tiled", "matmul_cuda_tiled"},
      {"regblock", "matmul_cuda_regblock"}, {"vec4", "matmul_cuda_vec4"},
      {"warptile", "matmul_cuda_warptile"}, {"cublas", "matmul_cublas"},
      {"cublas_tf32", "matmul_cublas"}};
  for (int64_t n : {1024, 2048, 4096}) {
    for (const auto& [variant, kernel] : sgemms) {
      const bool tf32 = std::string(variant) == "cublas_tf32";
      const std::string k = kernel;
      tt::bench::register_on(
          "sgemm/" + std::string(variant) + "/" + std::to_string(n), Device::cuda(),
          [k, tf32, n](benchmark::State& s, Device) { bench_sgemm(s, k, tf32, n); });
    }
  }
  return tt::bench::run_main(argc, argv, "bench_cuda_matmul");
}
