// Exercises ch07.5 (AdamW element update) and ch07.6 (global grad norm), and the given fused
// multi-tensor AdamW and clipping kernels.
//  * adamw_update on the host against the AdamW formula evaluated in double (no GPU needed);
//  * "adamw_step" on the GPU against the same element update run on the host, element by
//    element (1e-6), over tensors of awkward sizes (1, 3, chunk - 1, chunk, chunk + 1, ...) and
//    a misaligned one (scalar path), for several steps;
//  * "grad_norm" against a float64 CPU sum, bitwise-equal on repeated runs; "clip_grads".
#include <cmath>
#include <string>
#include <vector>

#include "cuda_matmul_test_util.h"
#include "tt/dispatcher.h"
#include "tt/fused_optim.h"

namespace tt {
namespace {

using test07::CudaMatmulTest;
using test07::random_tensor;
using test07::strided_view;

TEST(Ch07_AdamWCoefficients, BiasCorrectionsAndChecks) {
  AdamWConfig c;
  c.beta1 = 0.5;
  c.beta2 = 0.75;
  const AdamWCoefficients k = adamw_coefficients(c, 2);
  EXPECT_FLOAT_EQ(k.bias_correction1, 0.75f);                    // 1 - 0.5^2
  EXPECT_FLOAT_EQ(k.bias_correction2_sqrt, std::sqrt(0.4375f));  // sqrt(1 - 0.75^2)
  EXPECT_FLOAT_EQ(k.lr, 1e-3f);
  EXPECT_TT_ERROR(adamw_coefficients(c, 0), "step", ">= 1");
  c.beta2 = 1.0;
  EXPECT_TT_ERROR(adamw_coefficients(c, 1), "betas");
}

#if TT_WITH_CUDA
/// PyTorch's AdamW step for one element, in double.
struct RefState {
  double p, m = 0, v = 0;
};
void reference_adamw(RefState& s, double g, const AdamWConfig& c, int64_t step) {
  s.p *= 1 - c.lr * c.weight_decay;
  s.m = c.beta1 * s.m + (1 - c.beta1) * g;
  s.v = c.beta2 * s.v + (1 - c.beta2) * g * g;
  const double bc1 = 1 - std::pow(c.beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(c.beta2, static_cast<double>(step));
  s.p -= c.lr / bc1 * s.m / (std::sqrt(s.v) / std::sqrt(bc2) + c.eps);
}

TEST(Ch07_5_AdamWUpdate, FirstStepMovesByLearningRate) {
  // With m = v = 0, the bias-corrected first step is lr * g / (|g| + eps) = lr * sign(g),
  // after the decay p *= 1 - lr * wd.
  AdamWConfig c;
  c.lr = 0.1;
  c.weight_decay = 0.5;
  const AdamWCoefficients k = adamw_coefficients(c, 1);
  float p = 2.0f, m = 0.0f, v = 0.0f;
  adamw_update(p, -3.0f, m, v, k);
  EXPECT_NEAR(p, 2.0 * (1 - 0.05) + 0.1, 1e-6) << "p after one step with g = -3";
  EXPECT_NEAR(m, 0.1 * -3.0, 1e-6) << "m = (1 - beta1) g";
  EXPECT_NEAR(v, 0.001 * 9.0, 1e-7) << "v = (1 - beta2) g^2";
}

TEST(Ch07_5_AdamWUpdate, TenStepsMatchDoubleReference) {
  AdamWConfig c;
  c.lr = 3e-3;
  c.weight_decay = 0.1;
  Generator gen(7);
  for (int e = 0; e < 20; ++e) {
    const float p0 = static_cast<float>(gen.next_normal());
    float p = p0, m = 0.0f, v = 0.0f;
    RefState ref{p0};
    for (int64_t step = 1; step <= 10; ++step) {
      // gradients of every scale, including 0 (pure decay) and tiny values (eps matters)
      const double g = step == 4 ? 0.0 : gen.next_normal() * std::pow(10.0, e % 5 - 3);
      adamw_update(p, static_cast<float>(g), m, v, adamw_coefficients(c, step));
      reference_adamw(ref, g, c, step);
      ASSERT_NEAR(p, ref.p, 1e-6 * (1 + std::abs(ref.p))) << "element " << e << " step " << step;
      ASSERT_NEAR(m, ref.m, 1e-6 * (1 + std::abs(ref.m))) << "element " << e << " step " << step;
      ASSERT_NEAR(v, ref.v, 1e-6 * (1 + std::abs(ref.v))) << "element " << e << " step " << step;
    }
  }
}

TEST(Ch07_6_GradNorm, ValidatesBeforeLaunching) {
  // Runs without a GPU: CPU tensors must be rejected with a clear message.
  const Tensor out = zeros({});
  EXPECT_TT_ERROR(cuda::grad_norm(out, {ones({3})}), "grad_norm", "CUDA");
}

// ----- on the GPU ----------------------------------------------------------------------------

using Ch07_5_CudaAdamW = CudaMatmulTest;
using Ch07_6_CudaGradNorm = CudaMatmulTest;
using Ch07_CudaClipGrads = CudaMatmulTest;

/// Tensor sizes around the chunk boundaries of the multi-tensor kernels.
std::vector<int64_t> awkward_sizes() {
  const int64_t c = cuda::kMultiTensorChunk;
  return {1, 3, 4, 5, c - 1, c, c + 1, 3 * c + 7, 1000};
}

/// One CUDA tensor per size (seeded), plus a misaligned view (offset 1 float) at the end.
std::vector<Tensor> make_tensors(uint64_t seed, double scale = 1.0) {
  std::vector<Tensor> ts;
  for (int64_t n : awkward_sizes()) {
    ts.push_back(
        random_tensor({n}, DType::kFloat64, seed++).to(DType::kFloat32).to(Device::cuda()));
  }
  const Tensor base = random_tensor({1 + 4099}, DType::kFloat32, seed).to(Device::cuda());
  ts.push_back(strided_view(base, {4099}, {1}, 1));
  if (scale != 1.0) {
    for (Tensor& t : ts) {
      const std::vector<float> v = t.to_vector<float>();
      std::vector<float> s(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) s[i] = static_cast<float>(v[i] * scale);
      t.copy_(from_vector(s, t.shape()));
    }
  }
  return ts;
}

TEST_F(Ch07_5_CudaAdamW, MatchesHostUpdateOverSteps) {
  std::vector<Tensor> params = make_tensors(100), m, v;
  for (const Tensor& p : params) {
    m.push_back(zeros(p.shape(), {DType::kFloat32, Device::cuda()}));
    v.push_back(zeros(p.shape(), {DType::kFloat32, Device::cuda()}));
  }
  // Host copies of the state, updated with the same element function.
  std::vector<std::vector<float>> hp, hm, hv;
  for (const Tensor& p : params) {
    hp.push_back(p.to_vector<float>());
    hm.emplace_back(hp.back().size(), 0.0f);
    hv.emplace_back(hp.back().size(), 0.0f);
  }
  AdamWConfig config;
  config.lr = 1e-2;
  config.weight_decay = 0.1;
  for (int64_t step = 1; step <= 3; ++step) {
    const std::vector<Tensor> grads = make_tensors(200 + 50 * static_cast<uint64_t>(step), 0.1);
    call_kernel<AdamWKernel>("adamw_step", Device::cuda(), params, grads, m, v, config, step);
    const AdamWCoefficients k = adamw_coefficients(config, step);
    for (std::size_t t = 0; t < params.size(); ++t) {
      const std::vector<float> g = grads[t].to_vector<float>();
      for (std::size_t i = 0; i < g.size(); ++i)
        adamw_update(hp[t][i], g[i], hm[t][i], hv[t][i], k);
    }
  }
  for (std::size_t t = 0; t < params.size(); ++t) {
    SCOPED_TRACE("tensor " + std::to_string(t) + " " + params[t].describe());
    // The device may contract a*b + c into one FMA where the host rounds twice: a few ulps.
    EXPECT_TENSOR_NEAR(params[t].to(Device::cpu()), from_vector(hp[t], params[t].shape()), 1e-6,
                       1e-6);
    EXPECT_TENSOR_NEAR(m[t].to(Device::cpu()), from_vector(hm[t], params[t].shape()), 1e-6, 1e-6);
    EXPECT_TENSOR_NEAR(v[t].to(Device::cpu()), from_vector(hv[t], params[t].shape()), 1e-6, 1e-6);
  }
}

TEST_F(Ch07_5_CudaAdamW, RejectsMismatchedLists) {
  const Tensor p = zeros({4}, {DType::kFloat32, Device::cuda()});
  const Tensor q = zeros({5}, {DType::kFloat32, Device::cuda()});
  const AdamWConfig c;
  EXPECT_TT_ERROR(cuda::adamw_step({p}, {p, p}, {p}, {p}, c, 1), "adamw_step", "grads",
                  "2 tensors");
  EXPECT_TT_ERROR(cuda::adamw_step({p}, {q}, {p}, {p}, c, 1), "adamw_step", "grads[0]");
  EXPECT_TT_ERROR(cuda::adamw_step({p}, {p}, {zeros({4})}, {p}, c, 1), "exp_avg[0]", "CUDA");
  const Tensor wide = zeros({4, 2}, {DType::kFloat32, Device::cuda()});
  EXPECT_TT_ERROR(cuda::adamw_step({wide.transpose(0, 1)}, {wide}, {wide}, {wide}, c, 1),
                  "params[0]", "contiguous");
}

TEST_F(Ch07_6_CudaGradNorm, MatchesDoubleSumAndIsDeterministic) {
  const std::vector<Tensor> grads = make_tensors(300);
  double sum = 0;
  for (const Tensor& g : grads) {
    for (float x : g.to_vector<float>()) sum += static_cast<double>(x) * x;
  }
  const Tensor out = empty({}, {DType::kFloat32, Device::cuda()});
  call_kernel<GradNormKernel>("grad_norm", Device::cuda(), out, grads);
  const Tensor again = empty({}, {DType::kFloat32, Device::cuda()});
  call_kernel<GradNormKernel>("grad_norm", Device::cuda(), again, grads);
  // float partial sums of 256 terms per thread, then a tree: relative error well below 1e-5.
  EXPECT_NEAR(out.item(), std::sqrt(sum), 1e-5 * std::sqrt(sum)) << "sum of squares " << sum;
  EXPECT_EQ(out.item(), again.item()) << "two runs differ: the reduction is not deterministic";
}

TEST_F(Ch07_6_CudaGradNorm, EmptyAndZeroSized) {
  const Tensor out = full({}, 7.0, {DType::kFloat32, Device::cuda()});
  cuda::grad_norm(out, {});
  EXPECT_EQ(out.item(), 0.0);
  out.fill_(7.0);
  cuda::grad_norm(out, {zeros({0}, {DType::kFloat32, Device::cuda()})});
  EXPECT_EQ(out.item(), 0.0);
  const Tensor g = full({3}, 2.0, {DType::kFloat32, Device::cuda()});
  cuda::grad_norm(out, {g, g});
  EXPECT_NEAR(out.item(), std::sqrt(24.0), 1e-6);
}

TEST_F(Ch07_CudaClipGrads, ScalesOnlyAboveMaxNorm) {
  const std::vector<Tensor> grads = make_tensors(400);
  std::vector<std::vector<float>> before;
  for (const Tensor& g : grads) before.push_back(g.to_vector<float>());
  const Tensor norm = empty({}, {DType::kFloat32, Device::cuda()});
  cuda::grad_norm(norm, grads);
  const double n = norm.item();
  call_kernel<ClipGradsKernel>("clip_grads", Device::cuda(), grads, norm, 2.0 * n);
  for (std::size_t t = 0; t < grads.size(); ++t) {
    EXPECT_TENSOR_NEAR(grads[t].to(Device::cpu()), from_vector(before[t], grads[t].shape()), 0, 0)
        << "max_norm above the norm: grads must be unchanged";
  }
  call_kernel<ClipGradsKernel>("clip_grads", Device::cuda(), grads, norm, 0.5 * n);
  const float scale = static_cast<float>(0.5 * n) / (static_cast<float>(n) + 1e-6f);
  for (std::size_t t = 0; t < grads.size(); ++t) {
    std::vector<float> expected = before[t];
    for (float& x : expected) x *= scale;
    EXPECT_TENSOR_NEAR(grads[t].to(Device::cpu()), from_vector(expected, grads[t].shape()), 0,
                       1e-6);
  }
  const Tensor after = empty({}, {DType::kFloat32, Device::cuda()});
  cuda::grad_norm(after, grads);
  EXPECT_NEAR(after.item(), 0.5 * n, 1e-5 * n) << "the clipped norm is max_norm";
}

#else
// adamw_update, grad_norm and the fused kernels are defined in CUDA sources only.
TEST(Ch07_5_AdamWUpdate, FirstStepMovesByLearningRate) {
  GTEST_SKIP() << "built without CUDA";
}
#endif

}  // namespace
}  // namespace tt
