// Chapter 10 inside GPT-2: the registered "fast" operation set, a GPT-2 trained 3 steps with it
// against the reference set, the probe that finds TODO operations, and the step profiler that
// train_gpt2 --profile-step uses.
#include <cmath>
#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "ch10_test_util.h"
#include "tt/fast_ops.h"
#include "tt/flash_attention.h"
#include "tt/gpt2.h"
#include "tt/optim.h"
#include "tt/todo.h"
#include "tt/train.h"

namespace tt {
namespace {

TEST(Ch10_FastOps, FastIsRegisteredAndSaysWhatIsOn) {
  ASSERT_TRUE(gpt2::has_model_ops("fast"));
  const gpt2::ModelOps ops = gpt2::model_ops("fast");
  EXPECT_TRUE(static_cast<bool>(ops.attention));
  EXPECT_TRUE(static_cast<bool>(ops.classifier_loss));
  EXPECT_EQ(ops.description.rfind("fast: FlashAttention (packed qkv), fused classifier", 0), 0u)
      << ops.description;
  // Every member still empty is named as reference.
  for (const std::string& member : gpt2::reference_members(ops)) {
    EXPECT_NE(ops.description.find(member), std::string::npos) << member;
  }
  EXPECT_EQ(gpt2::model_ops_not_implemented(ops, Device::cpu()), "");
}

TEST(Ch10_FastOps, ThreeTrainingStepsMatchTheReference) {
  // Same model, same batches, AdamW at lr 1e-3: the fast set changes only the summation order of
  // the attention and of the classifier's GEMMs and loss mean (float32), so the losses agree to
  // ~1e-6 relative; 1e-5 is the bound.
  const gpt2::GPT2Config config{.block_size = 16,
                                .vocab_size = 50,
                                .padded_vocab_size = 64,
                                .n_layer = 2,
                                .n_head = 2,
                                .n_embd = 32};
  auto losses = [&](const gpt2::ModelOps& ops) {
    gpt2::GPT2 model(config, 21);
    model.set_ops(ops);
    optim::AdamWOptions ao;
    ao.lr = 1e-3;
    optim::AdamW opt(gpt2::param_groups(model, 0.1), ao);
    uint64_t seed = 0;
    std::vector<double> out;
    for (int step = 0; step < 3; ++step) {
      const auto next = [&] { return test09::fixed_batch(2, 13, config.vocab_size, ++seed); };
      out.push_back(gpt2::train_step(model, opt, next, {1, 1.0}).loss);
    }
    return out;
  };
  const std::vector<double> ref = losses(gpt2::model_ops("reference"));
  const std::vector<double> fast = losses(gpt2::model_ops("fast"));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(fast[i], ref[i], 1e-5 * std::abs(ref[i])) << "step " << i + 1;
  }
  EXPECT_LT(ref.back(), ref.front());  // it trains
}

TEST(Ch10_FastOps, ProbeReportsATodoOperation) {
  gpt2::ModelOps ops;
  ops.attention = [](const Tensor&, int64_t) -> Tensor { TT_TODO("ch10.99", "a missing op"); };
  const std::string message = gpt2::model_ops_not_implemented(ops, Device::cpu());
  EXPECT_NE(message.find("ch10.99"), std::string::npos) << message;
}

TEST(Ch10_FastOps, StepProfilerPrintsTheProfileOfAStep) {
  const std::unique_ptr<gpt2::StepProfiler> profiler = gpt2::make_step_profiler(Device::cpu());
  ASSERT_NE(profiler, nullptr);
  const Tensor qkv = test10::randn_t({1, 9, 24}, 3, DType::kFloat32);
  profiler->begin();
  flash_attention_qkv(qkv, 2);
  const std::string report = profiler->end();
  EXPECT_NE(report.find("Per-op profile of one training step on cpu (1 kernel calls)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("flash_attention_forward"), std::string::npos) << report;
  EXPECT_NE(report.find("by op and input shapes"), std::string::npos) << report;
  EXPECT_TT_ERROR(gpt2::register_step_profiler([](Device, bool) { return nullptr; }),
                  "already registered");
}

TEST(Ch10_FastOps, FlashAttentionSupportsItsHeadSizes) {
  EXPECT_TRUE(flash_attention_supports(DeviceType::kCPU, 16));
  EXPECT_TRUE(flash_attention_supports(DeviceType::kCPU, 1));
  EXPECT_FALSE(flash_attention_supports(DeviceType::kCPU, 0));
  EXPECT_TRUE(flash_attention_supports(DeviceType::kCUDA, 64));
  EXPECT_FALSE(flash_attention_supports(DeviceType::kCUDA, 16));
  EXPECT_FALSE(flash_attention_supports(DeviceType::kCUDA, 96));
}

TEST(Ch10_FastOpsCuda, AnUnsupportedHeadSizeRunsTheReferenceAttention) {
  TT_SKIP_IF_NO_CUDA();
  // hs = 16: no CUDA FlashAttention kernel (flash_attention_qkv throws), so the "fast" set's
  // attention is chapter 09's composition: the same values and gradients as calling it.
  const Tensor host = test10::randn_t({2, 8, 3 * 32}, 3, DType::kFloat32);
  const gpt2::ModelOps ops = gpt2::model_ops("fast");
  Tensor a = host.to(Device::cuda(0)), b = host.to(Device::cuda(0));
  a.set_requires_grad();
  b.set_requires_grad();
  EXPECT_TT_ERROR(flash_attention_qkv(a, 2), "head size");
  const Tensor ya = ops.attention(a, 2);
  const Tensor yb = gpt2::causal_self_attention(b, 2);
  EXPECT_EQ(ya.to(Device::cpu()).to_vector<float>(), yb.to(Device::cpu()).to_vector<float>());
  autograd::backward(sum(ya));
  autograd::backward(sum(yb));
  EXPECT_EQ(a.grad().to(Device::cpu()).to_vector<float>(),
            b.grad().to(Device::cpu()).to_vector<float>());
}

}  // namespace
}  // namespace tt
