// Chapter 09 on a GPU (TF32 off, so that float32 GEMMs are exact float32):
//  - the tiny reference model (reference_data/ch09/gpt2_tiny.bin) gives the same logits, loss,
//    gradients and 10 AdamW steps on CUDA as on the CPU;
//  - GPT-2 124M shapes (L=12, C=768, V=50257, B=8, T=1024) against PyTorch on CUDA: logits, loss
//    and a few gradients. The PyTorch side is written by reference_data/ch09/check_gpt2_124m.py
//    into the folder named by TT_GPT2_124M_REF (tools/device_check.sh does both); without that
//    variable the test skips and says so.
// All tests skip without a CUDA device.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "ch09_test_util.h"
#include "tt/cuda_matmul.h"
#include "tt/functional.h"
#include "tt/gpt2.h"
#include "tt/npy_tensor.h"
#include "tt/reference_data.h"
#include "tt/train.h"

namespace tt::gpt2 {
namespace {

using test09::max_abs_diff;

Tensor on_cpu(const Tensor& t) {
  return t.to(Device::cpu());
}

optim::AdamW make_adamw(const GPT2& model) {
  optim::AdamWOptions o;
  o.lr = 1e-3;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  return optim::AdamW(param_groups(model, 0.1), o);
}

TEST(Ch09_GPT2Cuda, TinyModelMatchesTheCpu) {
  TT_SKIP_IF_NO_CUDA();
  cuda::AllowTf32Guard exact(false);
  const std::string bin = testing::reference_path("ch09/gpt2_tiny.bin");
  auto cpu_model = load_llmc(bin);
  auto gpu_model = load_llmc(bin);
  gpu_model->to(Device::cuda(0));
  ASSERT_TRUE(gpu_model->device().is_cuda());
  const Tensor idx = load_npy(testing::reference_path("ch09/gpt2_tiny_idx.npy"));
  const Tensor targets = load_npy(testing::reference_path("ch09/gpt2_tiny_targets.npy"));
  const Tensor gidx = idx.to(Device::cuda(0)), gtargets = targets.to(Device::cuda(0));

  // Forward, loss and every gradient.
  const Tensor cpu_logits = cpu_model->forward(idx);
  const Tensor gpu_logits = gpu_model->forward(gidx);
  EXPECT_TENSOR_NEAR(on_cpu(gpu_logits), cpu_logits, 1e-5, 1e-5);
  const Tensor cpu_loss = cpu_model->loss(idx, targets);
  const Tensor gpu_loss = gpu_model->loss(gidx, gtargets);
  EXPECT_TENSOR_NEAR(on_cpu(gpu_loss), cpu_loss, 1e-6, 1e-6);
  autograd::backward(cpu_loss);
  autograd::backward(gpu_loss);
  const auto cpu_params = cpu_model->named_parameters();
  const auto gpu_params = gpu_model->named_parameters();
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    EXPECT_TENSOR_NEAR(on_cpu(gpu_params[i].second.grad()), cpu_params[i].second.grad(), 1e-6, 1e-4)
        << cpu_params[i].first;
  }

  // Ten AdamW steps (clipping at 1.0) on both devices: losses and final weights agree.
  cpu_model->zero_grad();
  gpu_model->zero_grad();
  optim::AdamW cpu_opt = make_adamw(*cpu_model), gpu_opt = make_adamw(*gpu_model);
  for (int step = 0; step < 10; ++step) {
    const TrainStepResult c = train_step(*cpu_model, cpu_opt,
                                         [&] {
                                           return Batch{idx, targets};
                                         },
                                         {1, 1.0});
    const TrainStepResult g = train_step(*gpu_model, gpu_opt,
                                         [&] {
                                           return Batch{gidx, gtargets};
                                         },
                                         {1, 1.0});
    ASSERT_TRUE(c.finite && g.finite) << "step " << step;
    EXPECT_NEAR(g.loss, c.loss, 1e-5 * std::abs(c.loss)) << "step " << step;
    EXPECT_NEAR(g.grad_norm, c.grad_norm, 1e-4 * c.grad_norm) << "step " << step;
  }
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    // Adam moves every weight by about lr = 1e-3 per step whatever the gradient's size, so a
    // tiny gradient whose rounding differs between the devices can move a weight by ~1e-5 more.
    EXPECT_TENSOR_NEAR(on_cpu(gpu_params[i].second), cpu_params[i].second, 1e-4, 1e-4)
        << cpu_params[i].first;
  }
}

/// Tolerances of the 124M comparison (float32 both sides, TF32 off, different summation
/// orders over C=768 and 12 layers; logits are O(1)). Measured on an H100 (2026-11-23): logits
/// 6.4e-6, loss equal to 7 digits, gradients <= 1e-8 absolute (entries up to 6e-3).
constexpr double kLogitsAtol = 5e-5, kLossAtol = 1e-5, kGradAtol = 1e-7, kGradRtol = 1e-3;

TEST(Ch09_GPT2Cuda, Gpt2_124MMatchesPyTorch) {
  TT_SKIP_IF_NO_CUDA();
  const std::string dir = test09::gpt2_124m_ref_dir();
  if (dir.empty()) GTEST_SKIP() << test09::kGpt2RefHint;
  cuda::AllowTf32Guard exact(false);
  auto model = load_llmc(dir + "gpt2_124m.bin");
  ASSERT_EQ(model->config().n_layer, 12);
  ASSERT_EQ(model->config().vocab_size, 50257);
  model->to(Device::cuda(0));
  const Tensor idx = load_npy(dir + "idx.npy").to(Device::cuda(0));
  const Tensor targets = load_npy(dir + "targets.npy").to(Device::cuda(0));

  const Tensor logits = model->forward(idx);
  // The script keeps every 128th position of the logits (the whole tensor is 1.6 GB).
  const Tensor sampled = on_cpu(slice(logits, 1, 0, logits.size(1), 128));
  const Tensor ref_logits = load_npy(dir + "logits_every128.npy");
  std::printf("124M: max |logits - torch| = %.3g\n", max_abs_diff(sampled, ref_logits));
  EXPECT_TENSOR_NEAR(sampled, ref_logits, kLogitsAtol, 0.0);

  const Tensor loss = cross_entropy(view(logits, {-1, 50257}), targets.reshape({-1}));
  const Tensor ref_loss = load_npy(dir + "loss.npy");
  std::printf("124M: loss %.7f, torch %.7f\n", on_cpu(loss).item(), ref_loss.item());
  EXPECT_TENSOR_NEAR(on_cpu(loss), ref_loss, kLossAtol, 0.0);

  autograd::backward(loss);
  for (const std::string& name : test09::gpt2_124m_checked_grads()) {
    std::string file = "grad_" + name + ".npy";
    const Tensor ref_grad = load_npy(dir + file);
    const Tensor grad = on_cpu(model->parameter(name).grad());
    std::printf("124M: max |grad %s - torch| = %.3g (max |torch| %.3g)\n", name.c_str(),
                max_abs_diff(grad, ref_grad), max_abs_diff(ref_grad, zeros_like(ref_grad)));
    EXPECT_TENSOR_NEAR(grad, ref_grad, kGradAtol, kGradRtol) << name;
  }
}

}  // namespace
}  // namespace tt::gpt2
