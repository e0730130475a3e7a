// Chapter 10's fused ops against their compositions, forward + backward through autograd, at
// GPT-2 124M shapes (B*T = 8192 rows, C = 768), TF32 on (the fast path's setting):
//
//   linear/{composition,lt}/8192x768x2304        the QKV projection: matmul + bias add, and the
//                                                bias gradient as a separate `sum`, vs cuBLASLt
//                                                BIAS / BGRADB epilogues
//   linear_gelu/{composition,lt}/8192x768x3072   the MLP's first half: + gelu forward/backward,
//                                                vs the GELU_AUX_BIAS epilogue
//   residual_layernorm/{composition,fused}/8192x768   add + layernorm vs the fused kernels
//   linear{,_gelu}/bf16/...                      chapter 11's linear_bf16 / linear_gelu_bf16
//                                                (float32 master weights cast on use, bfloat16
//                                                GEMMs, float32 dW and db), same shapes
//   gemm/{tf32,bf16}/MxKxN                       the forward GEMM alone ("matmul_lt_forward",
//                                                bias epilogue) at GPT-2's four projection
//                                                shapes: float32 operands with TF32 vs bfloat16
//                                                operands and output, float32 accumulation;
//                                                GFLOP/s = 2MNK / time
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
#include <utility>

#include "bench_common.h"
#include "tt/autograd.h"
#include "tt/cuda_matmul.h"
#include "tt/functional.h"
#include "tt/fused_ops.h"
#include "tt/layers.h"
#include "tt/linear_bf16.h"
#include "tt/module.h"

namespace {

using tt::Device;
using tt::Tensor;

constexpr int64_t kRows = 8 * 1024, kC = 768;

enum class LinearVariant { kComposition, kLt, kBf16 };

void linear_bench(benchmark::State& state, Device device, int64_t out, bool gelu,
                  LinearVariant variant, bool backward) {
  tt::cuda::AllowTf32Guard tf32(true);
  tt::nn::Linear layer(kC, out, true);
  layer.to(device);
  // bf16: the input and the output gradient in bfloat16, as between two bfloat16 ops.
  const tt::DType act =
      variant == LinearVariant::kBf16 ? tt::DType::kBFloat16 : tt::DType::kFloat32;
  const Tensor x = tt::bench::filled({kRows, kC}, 1, device).to(act).set_requires_grad();
  const Tensor dy = tt::bench::filled({kRows, out}, 2, device).to(act);
  const double flops = (backward ? 6.0 : 2.0) * kRows * kC * static_cast<double>(out);
  const double seconds = tt::bench::time_on(state, device, [&] {
    const std::optional<tt::autograd::NoGradGuard> no_grad =
        backward ? std::nullopt : std::make_optional<tt::autograd::NoGradGuard>();
    Tensor y;
    if (variant == LinearVariant::kBf16) {
      y = gelu ? tt::linear_gelu_bf16(x, layer) : tt::linear_bf16(x, layer);
    } else if (variant == LinearVariant::kLt) {
      y = gelu ? tt::linear_gelu_lt(x, layer) : tt::linear_lt(x, layer);
    } else {
      y = gelu ? tt::gelu(layer.forward(x)) : layer.forward(x);
    }
    if (backward) {
      // x.grad is reset, not accumulated: there is no bfloat16 add (and none is timed).
      tt::nn::zero_grad_({x});
      tt::autograd::backward(y, dy);
    }
  });
  tt::bench::set_rates(state, seconds, 0, flops);
}

// y [M, N] = x [M, K] W^T + b through "matmul_lt_forward" alone, in `dtype` (float32: TF32).
void gemm_bench(benchmark::State& state, Device device, int64_t M, int64_t K, int64_t N,
                tt::DType dtype) {
  tt::cuda::AllowTf32Guard tf32(true);
  const Tensor x = tt::bench::filled({M, K}, 1, device).to(dtype);
  const Tensor w = tt::bench::filled({N, K}, 2, device).to(dtype);
  const Tensor b = tt::bench::filled({N}, 3, device).to(dtype);
  const Tensor y = tt::empty({M, N}, {dtype, device});
  const double seconds = tt::bench::time_on(state, device, [&] {
    TT_CHECK(tt::call_kernel<tt::MatmulLtForwardKernel>("matmul_lt_forward", device, y, x, w, b,
                                                        Tensor()),
             "bench_fused_ops: no cuBLASLt algorithm for ", x.describe(), " x ", w.describe());
  });
  tt::bench::set_rates(state, seconds, 0, 2.0 * M * K * static_cast<double>(N));
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
    for (LinearVariant variant :
         {LinearVariant::kComposition, LinearVariant::kLt, LinearVariant::kBf16}) {
      const std::string v = variant == LinearVariant::kBf16 ? "bf16"
                            : variant == LinearVariant::kLt ? "lt"
                                                            : "composition";
      tt::bench::register_on("linear" + fwd + "/" + v + "/8192x768x2304", gpu,
                             [=](benchmark::State& s, Device d) {
                               linear_bench(s, d, 3 * kC, false, variant, backward);
                             });
      tt::bench::register_on("linear_gelu" + fwd + "/" + v + "/8192x768x3072", gpu,
                             [=](benchmark::State& s, Device d) {
                               linear_bench(s, d, 4 * kC, true, variant, backward);
                             });
    }
    for (bool fused : {false, true}) {
      tt::bench::register_on(
          "residual_layernorm" + fwd + "/" + std::string(fused ? "fused" : "composition") +
              "/8192x768",
          gpu, [=](benchmark::State& s, Device d) { residual_ln_bench(s, d, fused, backward); });
    }
  }
  // GPT-2 124M's projections at B*T = 8192: qkv, attention output, MLP up, MLP down.
  for (const auto& [K, N] :
       {std::pair<int64_t, int64_t>{kC, 3 * kC}, {kC, kC}, {kC, 4 * kC}, {4 * kC, kC}}) {
    for (tt::DType dtype : {tt::DType::kFloat32, tt::DType::kBFloat16}) {
      tt::bench::register_on(
          std::string("gemm/") + (dtype == tt::DType::kFloat32 ? "tf32" : "bf16") + "/" +
              std::to_string(kRows) + "x" + std::to_string(K) + "x" + std::to_string(N),
          gpu, [=, K = K, N = N](benchmark::State& s, Device d) {
            gemm_bench(s, d, kRows, K, N, dtype);
          });
    }
  }
  return tt::bench::run_main(argc, argv, "bench_fused_ops");
}
