// Chapter 10's fused ops against their compositions, forward + backward through autograd, at
// GPT-2 124M shapes (B*T = 8192 rows, C = 768), TF32 on (the fast path's setting):
//
//   linear/{composition,lt}/8192x768x2304        the QKV projection: matmul + bias add, and the
//                                                bias gradient as a separate `sum`, vs cuBLASLt
//                                                BIAS / BGRADB epilogues
//   linear_gelu/{composition,lt}/8192x768x3072   the MLP's first half: + gelu forward/backward,
//                                                vs the GELU_AUX_BIAS epilogue
//   residual_layernorm/{composition,fused}/8192x768   add + layernorm vs the fused kernels
//
//   build/bin/bench_fused_ops [--benchmark_filter=linear]
//
// Each also as <family>_fwd: the forward alone (no graph recorded). The forward + backward of
// residual_layernorm includes its loss, sum(r * gr) + sum(y * gy), the same on both sides.
// Time per call; GB/s is not reported (the compositions move more bytes by design: that is the
// point). CUDA only: without a GPU every benchmark skips itself.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "bench_common.h"
#include "tt/autograd.h"
#include "tt/cuda_matmul.h"
#include "tt/functional.h"
#include "tt/fused_ops.h"
#include "tt/layers.h"

namespace {

using tt::Device;
using tt::Tensor;

constexpr int64_t kRows = 8 * 1024, kC = 768;

void linear_bench(benchmark::State& state, Device device, int64_t out, bool gelu, bool fused,
                  bool backward) {
  tt::cuda::AllowTf32Guard tf32(true);
  tt::nn::Linear layer(kC, out, true);
  layer.to(device);
  const Tensor x = tt::bench::filled({kRows, kC}, 1, device).set_requires_grad();
  const Tensor dy = tt::bench::filled({kRows, out}, 2, device);
  tt::bench::measure(state, device, 0, [&] {
    const std::optional<tt::autograd::NoGradGuard> no_grad =
        backward ? std::nullopt : std::make_optional<tt::autograd::NoGradGuard>();
    Tensor y;
    if (fused) {
      y = gelu ? tt::linear_gelu_lt(x, layer) : tt::linear_lt(x, layer);
    } else {
      y = gelu ? tt::gelu(layer.forward(x)) : layer.forward(x);
    }
    if (backward) tt::autograd::backward(y, dy);
  });
}

void residual_ln_bench(benchmark::State& state, Device device, bool fused, bool backward) {
  tt::nn::LayerNorm ln(kC);
  ln.to(device);
  const Tensor a = tt::bench::filled({kRows, kC}, 1, device).set_requires_grad();
  const Tensor d = tt::bench::filled({kRows, kC}, 2, device).set_requires_grad();
  const Tensor gr = tt::bench::filled({kRows, kC}, 3, device);
  const Tensor gy = tt::bench::filled({kRows, kC}, 4, device);
  tt::bench::measure(state, device, 0, [&] {
    const std::optional<tt::autograd::NoGradGuard> no_grad =
        backward ? std::nullopt : std::make_optional<tt::autograd::NoGradGuard>();
    Tensor r, y;
    if (fused) {
      std::tie(r, y) = tt::residual_layernorm(a, d, ln);
    } else {
      r = tt::add(a, d);
      y = ln.forward(r);
    }
    if (backward) {
      tt::autograd::backward(tt::add(tt::sum(tt::mul(r, gr)), tt::sum(tt::mul(y, gy))));
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  const Device gpu = Device::cuda();
  for (bool backward : {false, true}) {
    const std::string fwd = backward ? "" : "_fwd";
    for (bool fused : {false, true}) {
      const std::string v = fused ? "lt" : "composition";
      tt::bench::register_on("linear" + fwd + "/" + v + "/8192x768x2304", gpu,
                             [=](benchmark::State& s, Device d) {
                               linear_bench(s, d, 3 * kC, false, fused, backward);
                             });
      tt::bench::register_on("linear_gelu" + fwd + "/" + v + "/8192x768x3072", gpu,
                             [=](benchmark::State& s, Device d) {
                               linear_bench(s, d, 4 * kC, true, fused, backward);
                             });
      tt::bench::register_on(
          "residual_layernorm" + fwd + "/" + std::string(fused ? "fused" : "composition") +
              "/8192x768",
          gpu, [=](benchmark::State& s, Device d) { residual_ln_bench(s, d, fused, backward); });
    }
  }
  return tt::bench::run_main(argc, argv, "bench_fused_ops");
}
