// GPT-2 under the mixed-precision policy (operation set "bf16") on the CPU emulated path: close
// to the float32 model within bf16 tolerances, float32 parameters and gradients, and
// train_gpt2 --precision bf16 trains and resumes exactly.
//
// Tolerance of the loss and gradients, in units of bf16's unit roundoff u = 2^-8 (8 significant
// bits: one rounding to nearest changes a value by at most u relative; its RMS over random
// values is about u / 2.3, i.e. 2^-9). Every GEMM operand is rounded to bf16 (random sign), so
// each GEMM output carries a relative error of about u / 2 (the roundings of its K products
// average out as sqrt(K) u / sqrt(K) in the ratio to the output's own size). The tiny model
// chains 2 blocks of 4 GEMMs and the attention, and the bf16 activations are rounded again at
// each op's output: about 10 roundings of u / 2 in sequence, RMS sqrt(10) u / 2 = 6e-3 relative
// on the logits. The loss (log V = 3.9 at init) moves by much less than the logits' error
// (softmax averages it): |dloss| <= 2u * loss (measured: 1e-6 at init, where the logits are
// small).
// Gradients go back through the same chain with bf16 activation gradients:
// ||g_bf16 - g_f32|| / ||g_f32|| <= 8u = 3.1e-2 per parameter (measured: printed by the test).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../../09_gpt2/tests/ch09_test_util.h"
#include "accum_fusion_test_util.h"
#include "tt/autograd.h"
#include "tt/checkpoint.h"
#include "tt/functional.h"
#include "tt/gpt2.h"
#include "tt/mixed_precision.h"
#include "tt/testing.h"

namespace tt {
namespace {

constexpr double kU = 1.0 / 256;  // bf16's unit roundoff u = 2^-8

struct LossAndGrads {
  double loss = 0;
  std::vector<std::pair<std::string, Tensor>> grads;  // float32, in parameter order
};

LossAndGrads run_model(const std::string& ops, const Batch& batch,
                       const gpt2::GPT2Config& config = test09::tiny_config(),
                       Device device = Device::cpu()) {
  gpt2::GPT2 model(config, 7);
  model.to(device);
  model.set_ops(gpt2::model_ops(ops));
  const Tensor loss = model.loss(batch.inputs.to(device), batch.targets.to(device));
  EXPECT_EQ(loss.dtype(), DType::kFloat32) << ops;
  autograd::backward(loss);
  LossAndGrads out{loss.item(), {}};
  for (const auto& [name, p] : model.named_parameters()) {
    EXPECT_EQ(p.dtype(), DType::kFloat32) << ops << " " << name << ": master weights are float32";
    EXPECT_TRUE(p.grad().defined()) << ops << " " << name;
    if (!p.grad().defined()) continue;
    EXPECT_EQ(p.grad().dtype(), DType::kFloat32) << ops << " " << name;
    out.grads.emplace_back(name, p.grad().detach().to(Device::cpu()).clone());
  }
  return out;
}

double norm(const Tensor& t) {
  return std::sqrt(sum(mul(t, t)).item());
}

/// `grad_units`: the gradients' tolerance in units of u (8 for the 2-block tiny model; the
/// chain of roundings grows with the depth, its RMS as the square root of the block count).
void expect_bf16_close(const LossAndGrads& b16, const LossAndGrads& f32, double grad_units = 8) {
  std::printf("[ bf16 ] loss %.6f vs float32 %.6f (rel %.2e, tolerance %.2e)\n", b16.loss, f32.loss,
              std::abs(b16.loss - f32.loss) / f32.loss, 2 * kU);
  EXPECT_NEAR(b16.loss, f32.loss, 2 * kU * f32.loss);
  ASSERT_EQ(b16.grads.size(), f32.grads.size());
  double worst = 0;
  for (std::size_t i = 0; i < f32.grads.size(); ++i) {
    const auto& [name, ref] = f32.grads[i];
    const double rel = norm(sub(b16.grads[i].second, ref)) / std::max(norm(ref), 1e-12);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, grad_units * kU) << name << ": ||g_bf16 - g_f32|| / ||g_f32||";
  }
  std::printf("[ bf16 ] worst gradient ||err|| / ||ref|| = %.2e (tolerance %.2e)\n", worst,
              grad_units * kU);
  // The bf16 path really rounds: it is not the float32 computation in disguise.
  EXPECT_NE(b16.loss, f32.loss);
}

TEST(Ch11_Bf16Gpt2, LossAndGradientsWithinBf16ToleranceOfFloat32) {
  ASSERT_TRUE(gpt2::has_model_ops("bf16"));
  const Batch batch = test09::fixed_batch(2, 12, test09::tiny_config().vocab_size, 11);
  expect_bf16_close(run_model("bf16", batch), run_model("reference", batch));
}

// On CUDA (head size 32: the tensor-core bf16 FlashAttention) against the float32 CPU model.
TEST(Ch11_Bf16Gpt2Cuda, LossAndGradientsWithinBf16ToleranceOfFloat32) {
  TT_SKIP_IF_NO_CUDA();
  gpt2::GPT2Config config = test09::tiny_config();
  config.n_embd = 64;  // 2 heads of 32
  const Batch batch = test09::fixed_batch(2, 12, config.vocab_size, 12);
  expect_bf16_close(run_model("bf16", batch, config, Device::cuda(0)),
                    run_model("reference", batch, config));
}

// Three micro-batches accumulated with gradient-accumulation fusion on and off (tt/autograd.h,
// accumulation_target): every parameter's .grad is the same bit for bit, and with fusion the
// engine no longer adds the MLP's c_proj weight gradients (the GEMM accumulates them).
void expect_fusion_changes_nothing(const gpt2::GPT2Config& config, Device device) {
  const int micro = 3;
  const auto run = [&](bool fusion, int* adds) {
    autograd::GradAccumulationFusionGuard guard(fusion);
    gpt2::GPT2 model(config, 7);
    model.to(device);
    model.set_ops(gpt2::model_ops("bf16"));
    test11::AddCounter counter({config.n_embd, 4 * config.n_embd});  // c_proj of the MLP
    for (int m = 0; m < micro; ++m) {
      const Batch batch = test09::fixed_batch(2, 12, config.vocab_size, 40 + m);
      autograd::backward(model.loss(batch.inputs.to(device), batch.targets.to(device)));
    }
    *adds = counter.count;
    std::vector<Tensor> grads;
    for (const auto& [name, p] : model.named_parameters()) grads.push_back(p.grad());
    return grads;
  };
  int adds_off = 0, adds_on = 0;
  const std::vector<Tensor> off = run(false, &adds_off), on = run(true, &adds_on);
  EXPECT_EQ(adds_off, config.n_layer * (micro - 1));
  EXPECT_EQ(adds_on, 0);
  ASSERT_EQ(off.size(), on.size());
  for (std::size_t i = 0; i < off.size(); ++i) {
    EXPECT_TRUE(test11::same_bits(on[i], off[i])) << "parameter " << i;
  }
}

TEST(Ch11_Bf16Gpt2, GradientAccumulationFusionChangesNoGradient) {
  expect_fusion_changes_nothing(test09::tiny_config(), Device::cpu());
}

TEST(Ch11_Bf16Gpt2Cuda, GradientAccumulationFusionChangesNoGradient) {
  TT_SKIP_IF_NO_CUDA();
  gpt2::GPT2Config config = test09::tiny_config();
  config.n_embd = 64;  // 2 heads of 32
  expect_fusion_changes_nothing(config, Device::cuda(0));
}

// GPT-2 124M (12 blocks, V = 50257, hs = 64) on the GPU: bf16 against our float32 model (chapter
// 09's reference operations, TF32 off), on the same GPU, from the same initialization. Logits:
// 12 blocks of ~5 roundings each, RMS sqrt(60) u / 2 = 1.5e-2 relative; tolerance 8u = 3.1e-2.
// Gradients: the tiny model's 8u scaled by sqrt(12 / 2) blocks: 20u = 7.8e-2 per parameter.
TEST(Ch11_Bf16Gpt2Cuda, Gpt2_124MLogitsLossAndGradientsWithinBf16ToleranceOfFloat32) {
  TT_SKIP_IF_NO_CUDA();
  const gpt2::GPT2Config config;  // GPT-2 124M
  const Device gpu = Device::cuda(0);
  const Batch batch = test09::fixed_batch(4, 256, config.vocab_size, 13);
  Tensor logits[2];
  const char* const sets[2] = {"bf16", "reference"};
  for (int i = 0; i < 2; ++i) {
    gpt2::GPT2 model(config, 7);
    model.to(gpu);
    model.set_ops(gpt2::model_ops(sets[i]));
    autograd::NoGradGuard no_grad;
    logits[i] = model.forward(batch.inputs.to(gpu)).to(Device::cpu());
    EXPECT_EQ(logits[i].dtype(), DType::kFloat32) << sets[i];
  }
  const double rel = norm(sub(logits[0], logits[1])) / norm(logits[1]);
  std::printf("[ bf16 ] GPT-2 124M logits ||err|| / ||ref|| = %.2e (tolerance %.2e)\n", rel,
              8 * kU);
  EXPECT_LE(rel, 8 * kU);
  EXPECT_GT(rel, 0) << "the bf16 path rounds";
  expect_bf16_close(run_model("bf16", batch, config, gpu),
                    run_model("reference", batch, config, gpu), 20);
}

TEST(Ch11_Bf16Gpt2, TheSetRunsOnTheCpuAndSaysWhatItIs) {
  const gpt2::ModelOps ops = gpt2::model_ops("bf16");
  EXPECT_TRUE(gpt2::reference_members(ops).empty());
  EXPECT_NE(ops.description.find("bf16"), std::string::npos) << ops.description;
  EXPECT_EQ(gpt2::model_ops_not_implemented(ops, Device::cpu()), "");
}

TEST(Ch11_Bf16Gpt2, ToDTypeIsDifferentiableBothWays) {
  const Tensor x = from_vector(std::vector<float>{1.0f, 1.00390625f, -3.0f}, {3});
  x.set_requires_grad();
  const Tensor y = to_dtype(x, DType::kBFloat16);
  EXPECT_EQ(y.dtype(), DType::kBFloat16);
  EXPECT_EQ(y.to(DType::kFloat32).to_vector<float>(), (std::vector<float>{1.0f, 1.0f, -3.0f}));
  const Tensor g = from_vector(std::vector<float>{2.0f, 0.5f, 1.0f}, {3});
  autograd::backward(sum(mul(to_dtype(y, DType::kFloat32), g)));
  EXPECT_EQ(x.grad().dtype(), DType::kFloat32);
  EXPECT_EQ(x.grad().to_vector<float>(), g.to_vector<float>());
  EXPECT_TRUE(to_dtype(x, DType::kFloat32).is_same(x));
  EXPECT_THROW(to_dtype(x, DType::kFloat64), Error);
}

// ----- train_gpt2 --precision bf16 ------------------------------------------------------------

class Ch11_Bf16TrainGpt2 : public ::testing::Test {
 protected:
  void SetUp() override {
    app_ = test09::program_path("train_gpt2");
    ASSERT_FALSE(app_.empty()) << "train_gpt2 is not built next to the test binary";
    test09::write_tiny_dataset(dir_.file("data"));
  }
  /// train_gpt2 on the tiny dataset with `extra`; `where` picks the device and the width.
  test09::RunResult train(const std::string& extra, const std::string& out,
                          const std::string& where = "--device cpu --channels 32") {
    return test09::run_program(app_,
                               "--data '" + dir_.file("data") + "' " + where +
                                   " --threads 1 --layers 1 --heads 2 --B 2 --T 8 --warmup 1 "
                                   "--eval-batches 1 --sample-tokens 2 " +
                                   extra + " --out '" + dir_.file(out) + "'",
                               dir_.file(out + ".log"));
  }
  std::string app_;
  test09::TempDir dir_;
};

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// The checkpoint of a bf16 run holds no bfloat16 tensor: float32 master weights and AdamW state.
void expect_float32_checkpoint(const std::string& path) {
  const nn::StateDict state = ckpt::load(path);
  EXPECT_FALSE(state.empty()) << path;
  int64_t float32 = 0;
  for (const auto& [name, t] : state) {
    EXPECT_NE(t.dtype(), DType::kBFloat16) << name;  // scalars (lr, step) may be float64/int64
    float32 += t.dtype() == DType::kFloat32;
  }
  EXPECT_GT(float32, 0) << path;
}

TEST_F(Ch11_Bf16TrainGpt2, RunsAndResumesExactly) {
  const std::string base = "--precision bf16 --eval-every 2 --checkpoint-every 3 --steps 8";
  const test09::RunResult full = train(base, "full");
  ASSERT_EQ(full.status, 0) << full.output;
  EXPECT_TRUE(contains(full.output, "ops: bf16 mixed precision")) << full.output;
  const test09::RunResult crash = train(base + " --kill-after-step 5", "crashed");
  ASSERT_TRUE(crash.killed) << "status " << crash.status << "\n" << crash.output;
  const test09::RunResult resumed = train(base + " --resume", "crashed");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_TRUE(contains(resumed.output, "at step 3")) << resumed.output;
  expect_float32_checkpoint(dir_.file("crashed") + "/checkpoint.ttckpt");
  // The checkpoint holds the float32 parameters: the resumed run repeats steps 4.. bit for bit.
  EXPECT_EQ(test09::reproducible_columns(dir_.file("crashed") + "/train.csv"),
            test09::reproducible_columns(dir_.file("full") + "/train.csv"));
  // --recompute (each block's MLP run again in backward) trains bit for bit the same.
  const test09::RunResult rec = train(base + " --recompute", "recompute");
  ASSERT_EQ(rec.status, 0) << rec.output;
  EXPECT_TRUE(contains(rec.output, "MLP recomputed in backward")) << rec.output;
  EXPECT_EQ(test09::reproducible_columns(dir_.file("recompute") + "/train.csv"),
            test09::reproducible_columns(dir_.file("full") + "/train.csv"));
  // And bf16 is not float32: the same run in fp32 logs other losses.
  const test09::RunResult fp32 = train("--precision fp32 --eval-every 2 --steps 8", "fp32");
  ASSERT_EQ(fp32.status, 0) << fp32.output;
  EXPECT_NE(test09::reproducible_columns(dir_.file("fp32") + "/train.csv"),
            test09::reproducible_columns(dir_.file("full") + "/train.csv"));
}

TEST_F(Ch11_Bf16TrainGpt2, RunsOnCudaWithItsMfuPeak) {
  TT_SKIP_IF_NO_CUDA();
  // --channels 64 --heads 2: head size 32, which the tensor-core bf16 FlashAttention takes.
  const test09::RunResult run =
      train("--precision bf16 --steps 3", "gpu", "--device cuda --channels 64");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "(bf16 mixed precision)")) << run.output;
  EXPECT_TRUE(contains(run.output, "MFU")) << run.output;
  expect_float32_checkpoint(dir_.file("gpu") + "/checkpoint.ttckpt");
}

TEST_F(Ch11_Bf16TrainGpt2, PrecisionMisusesAreRefusedWithTheirCause) {
  const std::pair<const char*, const char*> cases[] = {
      {"--precision fp16", "--precision must be fp32, tf32 or bf16"},
      {"--precision bf16 --tf32", "--tf32 means --precision tf32"},
      {"--precision tf32 --recompute", "--recompute needs --precision bf16"},
      {"--precision bf16 --fused off", "as a whole"}};
  int i = 0;
  for (const auto& [options, cause] : cases) {
    const test09::RunResult run =
        train(std::string("--steps 2 ") + options, "bad" + std::to_string(i++));
    EXPECT_EQ(run.status, 1) << options;
    EXPECT_TRUE(contains(run.output, cause)) << options << "\n" << run.output;
  }
}

}  // namespace
}  // namespace tt
