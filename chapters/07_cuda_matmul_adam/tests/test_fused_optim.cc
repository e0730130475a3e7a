// Exercises ch07.5 (AdamW element update) and ch07.6 (deterministic sum of squares), and the
// given fused multi-tensor kernels, all registered under chapter 05's optimizer kernel names.
//  * adamw_update on the host against the AdamW formula evaluated in double (no GPU needed);
//  * "adamw_step", "sgd_step", "scale_" on the GPU against chapter 05's CPU kernels on the same
//    tensors (1e-6: the device may contract a*b + c into one FMA where the host rounds twice),
//    over tensors of awkward sizes (1, 3, chunk - 1, chunk, chunk + 1, ...) and a misaligned one
//    (scalar path), for several steps;
//  * "sum_of_squares" against the CPU kernel (both in double: 1e-12 relative), bitwise-equal on
//    repeated runs;
//  * tt::optim::AdamW, SGD and clip_grad_norm_ on CUDA parameters against the same on the CPU.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "ch07_test_util.h"
#include "tt/dispatcher.h"
#include "tt/fused_optim.h"
#include "tt/optim.h"

namespace tt {
namespace {

using optim::AdamWStepArgs;
using optim::SgdStepArgs;
using test07::CudaMatmulTest;
using test07::random_tensor;
using test07::strided_view;

TEST(Ch07_AdamWCoefficients, BiasCorrectionsAndChecks) {
  AdamWStepArgs a{1e-3, 0.5, 0.75, 1e-8, 0.01, 2};
  const AdamWCoefficients k = adamw_coefficients(a);
  EXPECT_FLOAT_EQ(k.neg_step_size, static_cast<float>(-1e-3 / 0.75));  // 1 - 0.5^2
  EXPECT_FLOAT_EQ(k.bias_correction2_sqrt, std::sqrt(0.4375f));        // sqrt(1 - 0.75^2)
  EXPECT_FLOAT_EQ(k.decay, static_cast<float>(1 - 1e-5));
  a.step = 0;
  EXPECT_TT_ERROR(adamw_coefficients(a), "step", ">= 1");
  a.step = 1;
  a.beta2 = 1.0;
  EXPECT_TT_ERROR(adamw_coefficients(a), "betas");
}

#if TT_WITH_CUDA
/// AdamW arguments with PyTorch's default betas and eps.
AdamWStepArgs adamw_args(double lr, double weight_decay, int64_t step) {
  return {lr, 0.9, 0.999, 1e-8, weight_decay, step};
}

/// PyTorch's AdamW step for one element, in double.
struct RefState {
  double p, m = 0, v = 0;
};
void reference_adamw(RefState& s, double g, const AdamWStepArgs& a) {
  s.p *= 1 - a.lr * a.weight_decay;
  s.m = a.beta1 * s.m + (1 - a.beta1) * g;
  s.v = a.beta2 * s.v + (1 - a.beta2) * g * g;
  const double bc1 = 1 - std::pow(a.beta1, static_cast<double>(a.step));
  const double bc2 = 1 - std::pow(a.beta2, static_cast<double>(a.step));
  s.p -= a.lr / bc1 * s.m / (std::sqrt(s.v) / std::sqrt(bc2) + a.eps);
}

TEST(Ch07_5_AdamWUpdate, FirstStepMovesByLearningRate) {
  // With m = v = 0, the bias-corrected first step is lr * g / (|g| + eps) = lr * sign(g),
  // after the decay p *= 1 - lr * wd.
  const AdamWCoefficients k = adamw_coefficients(adamw_args(0.1, 0.5, 1));
  float p = 2.0f, m = 0.0f, v = 0.0f;
  adamw_update(p, -3.0f, m, v, k);
  EXPECT_NEAR(p, 2.0 * (1 - 0.05) + 0.1, 1e-6) << "p after one step with g = -3";
  EXPECT_NEAR(m, 0.1 * -3.0, 1e-6) << "m = (1 - beta1) g";
  EXPECT_NEAR(v, 0.001 * 9.0, 1e-7) << "v = (1 - beta2) g^2";
}

TEST(Ch07_5_AdamWUpdate, TenStepsMatchDoubleReference) {
  Generator gen(7);
  for (int e = 0; e < 20; ++e) {
    const float p0 = static_cast<float>(gen.next_normal());
    float p = p0, m = 0.0f, v = 0.0f;
    RefState ref{p0};
    for (int64_t step = 1; step <= 10; ++step) {
      // gradients of every scale, including 0 (pure decay) and tiny values (eps matters)
      const double g = step == 4 ? 0.0 : gen.next_normal() * std::pow(10.0, e % 5 - 3);
      const AdamWStepArgs a = adamw_args(3e-3, 0.1, step);
      adamw_update(p, static_cast<float>(g), m, v, adamw_coefficients(a));
      reference_adamw(ref, g, a);
      ASSERT_NEAR(p, ref.p, 1e-6 * (1 + std::abs(ref.p))) << "element " << e << " step " << step;
      ASSERT_NEAR(m, ref.m, 1e-6 * (1 + std::abs(ref.m))) << "element " << e << " step " << step;
      ASSERT_NEAR(v, ref.v, 1e-6 * (1 + std::abs(ref.v))) << "element " << e << " step " << step;
    }
  }
}

TEST(Ch07_6_SumOfSquares, ValidatesBeforeLaunching) {
  // Runs without a GPU: CPU tensors must be rejected with a clear message.
  EXPECT_TT_ERROR(cuda::sum_of_squares({ones({3})}), "sum_of_squares", "CUDA");
}

// ----- on the GPU ----------------------------------------------------------------------------

using Ch07_5_CudaAdamW = CudaMatmulTest;
using Ch07_6_CudaSumOfSquares = CudaMatmulTest;
using Ch07_CudaSgd = CudaMatmulTest;
using Ch07_CudaScale = CudaMatmulTest;
using Ch07_CudaOptimizers = CudaMatmulTest;

/// Tensor sizes around the chunk boundaries of the multi-tensor kernels.
std::vector<int64_t> awkward_sizes() {
  const int64_t c = cuda::kMultiTensorChunk;
  return {1, 3, 4, 5, c - 1, c, c + 1, 3 * c + 7, 1000};
}

/// One float32 CPU tensor per size (seeded, times `scale`), plus a misaligned view (offset 1
/// float) at the end.
std::vector<Tensor> make_tensors(uint64_t seed, double scale = 1.0) {
  std::vector<Tensor> ts;
  for (int64_t n : awkward_sizes()) {
    std::vector<double> v = random_tensor({n}, DType::kFloat64, seed++).to_vector<double>();
    for (double& x : v) x *= scale;
    ts.push_back(from_vector(v, {n}).to(DType::kFloat32));
  }
  const Tensor base = random_tensor({1 + 4099}, DType::kFloat32, seed);
  ts.push_back(strided_view(base, {4099}, {1}, 1));
  return ts;
}

/// The tensors of `ts` on `device`, keeping the misaligned view of the last one (a copy of its
/// base, viewed at the same offset).
std::vector<Tensor> on(Device device, const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (std::size_t i = 0; i + 1 < ts.size(); ++i) out.push_back(ts[i].to(device));
  const Tensor& last = ts.back();
  const Tensor base = strided_view(last, {last.numel() + 1}, {1}, -1).to(device);
  out.push_back(strided_view(base, last.shape(), {1}, 1));
  return out;
}

/// Zeroed tensors shaped like `ts`, on `device`.
std::vector<Tensor> zeros_like_all(const std::vector<Tensor>& ts, Device device) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(zeros(t.shape(), {t.dtype(), device}));
  return out;
}

/// Every tensor of `gpu` equals the one of `cpu` within atol = rtol = tol.
void expect_all_near(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu,
                     const char* what, double tol) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (std::size_t t = 0; t < gpu.size(); ++t) {
    SCOPED_TRACE(std::string(what) + " " + std::to_string(t) + " " + cpu[t].describe());
    EXPECT_TENSOR_NEAR(gpu[t].to(Device::cpu()), cpu[t], tol, tol);
  }
}

TEST_F(Ch07_5_CudaAdamW, MatchesCpuKernelOverSteps) {
  const std::vector<Tensor> init = make_tensors(100);
  const Device gpu = Device::cuda(), host = Device::cpu();
  std::vector<Tensor> p_gpu = on(gpu, init), p_cpu = on(host, init);
  std::vector<Tensor> m_gpu = zeros_like_all(init, gpu), v_gpu = zeros_like_all(init, gpu);
  std::vector<Tensor> m_cpu = zeros_like_all(init, host), v_cpu = zeros_like_all(init, host);
  for (int64_t step = 1; step <= 3; ++step) {
    const std::vector<Tensor> grads = make_tensors(200 + 50 * static_cast<uint64_t>(step), 0.1);
    const AdamWStepArgs a = adamw_args(1e-2, 0.1, step);
    call_kernel<optim::AdamWStepKernel>("adamw_step", gpu, p_gpu, on(gpu, grads), m_gpu, v_gpu, a);
    call_kernel<optim::AdamWStepKernel>("adamw_step", host, p_cpu, grads, m_cpu, v_cpu, a);
  }
  expect_all_near(p_gpu, p_cpu, "param", 1e-6);
  expect_all_near(m_gpu, m_cpu, "exp_avg", 1e-6);
  expect_all_near(v_gpu, v_cpu, "exp_avg_sq", 1e-6);
}

TEST_F(Ch07_5_CudaAdamW, RejectsMismatchedLists) {
  const Tensor p = zeros({4}, {DType::kFloat32, Device::cuda()});
  const Tensor q = zeros({5}, {DType::kFloat32, Device::cuda()});
  const AdamWStepArgs a = adamw_args(1e-3, 0.0, 1);
  EXPECT_TT_ERROR(cuda::adamw_step({p}, {p, p}, {p}, {p}, a), "adamw_step", "grads", "2 tensors");
  EXPECT_TT_ERROR(cuda::adamw_step({p}, {q}, {p}, {p}, a), "adamw_step", "grads[0]");
  EXPECT_TT_ERROR(cuda::adamw_step({p}, {p}, {zeros({4})}, {p}, a), "exp_avgs[0]", "CUDA");
  const Tensor wide = zeros({4, 2}, {DType::kFloat32, Device::cuda()});
  EXPECT_TT_ERROR(cuda::adamw_step({wide.transpose(0, 1)}, {wide}, {wide}, {wide}, a), "params[0]",
                  "contiguous");
  const Tensor d = zeros({4}, {DType::kFloat64, Device::cuda()});
  EXPECT_TT_ERROR(cuda::adamw_step({d}, {d}, {d}, {d}, a), "params[0]", "float32");
}

TEST_F(Ch07_6_CudaSumOfSquares, MatchesCpuAndIsDeterministic) {
  const std::vector<Tensor> xs = make_tensors(300);
  const std::vector<Tensor> xs_gpu = on(Device::cuda(), xs);
  const double cpu = call_kernel<optim::SumOfSquaresKernel>("sum_of_squares", Device::cpu(), xs);
  const double gpu =
      call_kernel<optim::SumOfSquaresKernel>("sum_of_squares", Device::cuda(), xs_gpu);
  const double again =
      call_kernel<optim::SumOfSquaresKernel>("sum_of_squares", Device::cuda(), xs_gpu);
  // Both accumulate exact float products in double, in different orders: ~1e-16 relative each.
  EXPECT_NEAR(gpu, cpu, 1e-12 * cpu);
  EXPECT_EQ(gpu, again) << "two runs differ: the reduction is not deterministic";
}

TEST_F(Ch07_6_CudaSumOfSquares, EmptyAndZeroSized) {
  EXPECT_EQ(cuda::sum_of_squares({}), 0.0);
  EXPECT_EQ(cuda::sum_of_squares({zeros({0}, {DType::kFloat32, Device::cuda()})}), 0.0);
  const Tensor g = full({3}, 2.0, {DType::kFloat32, Device::cuda()});
  EXPECT_EQ(cuda::sum_of_squares({g, g}), 24.0);
}

TEST_F(Ch07_CudaScale, MatchesCpuKernelExactly) {
  const std::vector<Tensor> xs = make_tensors(400);
  const std::vector<Tensor> cpu = on(Device::cpu(), xs), gpu = on(Device::cuda(), xs);
  call_kernel<optim::ScaleInplaceKernel>("scale_", Device::cpu(), cpu, 0.3);
  call_kernel<optim::ScaleInplaceKernel>("scale_", Device::cuda(), gpu, 0.3);
  expect_all_near(gpu, cpu, "tensor", 0.0);
}

TEST_F(Ch07_CudaSgd, MatchesCpuKernelOverSteps) {
  struct Case {
    const char* name;
    double momentum, dampening, weight_decay;
    bool nesterov;
  };
  for (const Case& c : {Case{"plain", 0, 0, 0, false}, Case{"momentum", 0.9, 0.1, 0.01, false},
                        Case{"nesterov", 0.9, 0, 0.01, true}}) {
    SCOPED_TRACE(c.name);
    const std::vector<Tensor> init = make_tensors(500);
    const Device gpu = Device::cuda(), host = Device::cpu();
    std::vector<Tensor> p_gpu = on(gpu, init), p_cpu = on(host, init);
    std::vector<Tensor> b_gpu, b_cpu;
    if (c.momentum != 0) {
      b_gpu = zeros_like_all(init, gpu);
      b_cpu = zeros_like_all(init, host);
    }
    for (int64_t step = 1; step <= 3; ++step) {
      const std::vector<Tensor> grads = make_tensors(600 + static_cast<uint64_t>(step), 0.1);
      const SgdStepArgs a{0.05, c.momentum, c.dampening, c.weight_decay, c.nesterov, step == 1};
      call_kernel<optim::SgdStepKernel>("sgd_step", gpu, p_gpu, on(gpu, grads), b_gpu, a);
      call_kernel<optim::SgdStepKernel>("sgd_step", host, p_cpu, grads, b_cpu, a);
    }
    expect_all_near(p_gpu, p_cpu, "param", 1e-6);
    expect_all_near(b_gpu, b_cpu, "momentum buffer", 1e-6);
  }
}

// tt::optim on CUDA parameters: the same front-end code, the CUDA kernels through the registry.
TEST_F(Ch07_CudaOptimizers, AdamWSgdAndClippingMatchCpu) {
  const std::vector<Tensor> init = make_tensors(700);
  for (const char* name : {"AdamW", "SGD"}) {
    SCOPED_TRACE(name);
    std::vector<std::vector<Tensor>> params(2);  // [0] on the GPU, [1] on the CPU
    std::vector<std::unique_ptr<optim::Optimizer>> opts;
    for (int k = 0; k < 2; ++k) {
      const Device d = k == 0 ? Device::cuda() : Device::cpu();
      for (std::size_t i = 0; i + 1 < init.size(); ++i) {  // contiguous parameters only
        params[k].push_back(init[i].to(d).clone().set_requires_grad(true));
      }
      if (std::string(name) == "AdamW") {
        opts.push_back(std::make_unique<optim::AdamW>(params[k], optim::AdamWOptions{}));
      } else {
        opts.push_back(
            std::make_unique<optim::SGD>(params[k], optim::SgdOptions{0.05, 0.9, 0, 0.01, true}));
      }
    }
    for (int step = 0; step < 3; ++step) {
      const std::vector<Tensor> grads = make_tensors(800 + static_cast<uint64_t>(step), 10.0);
      double norms[2];
      for (int k = 0; k < 2; ++k) {
        const Device d = k == 0 ? Device::cuda() : Device::cpu();
        for (std::size_t i = 0; i < params[k].size(); ++i) params[k][i].set_grad(grads[i].to(d));
        norms[k] = optim::clip_grad_norm_(params[k], 1.0);  // the norm is ~1e3: clipping scales
        opts[static_cast<std::size_t>(k)]->step();
      }
      EXPECT_NEAR(norms[0], norms[1], 1e-12 * norms[1]) << "step " << step;
    }
    expect_all_near(params[0], params[1], "param", 1e-6);
  }
}

#else
// adamw_update, sum_of_squares and the fused kernels are defined in CUDA sources only (the
// name says "Cuda" so that CTest labels this skip cuda, like every test that needs CUDA).
TEST(Ch07_5_AdamWUpdate, NeedsTheCudaBuild) {
  GTEST_SKIP() << "built without CUDA";
}
#endif

}  // namespace
}  // namespace tt
