// LLaMA under chapter 11's bf16 mixed precision (Llama::set_mixed_precision, issue 26): a tiny
// GQA LLaMA (NH 4, NKV 2, hs 32: a head size chapter 11's CUDA FlashAttention takes) trained 10
// AdamW steps (3 under the sanitizers) on one batch, in float32 with optim::AdamW and in bf16 with a MasterWeightAdamW,
// from the same initial weights. The bf16 losses fall and follow the float32 ones within
// kLossTolerance, and differ from them (the GEMMs round their operands to bfloat16: 8
// significant bits, a relative error up to 2^-9 per operand, so the loss near ln 96 = 4.56
// moves by some 1e-3; 10 steps of AdamW at lr 3e-3 let the two runs drift apart a little).
// The projections read the bf16 copies that AdamW writes; the head (cast per call by chapter
// 11's classifier), the embedding and the norms' weights have none.
#include <cmath>
#include <memory>
#include <vector>

#include "ch15_test_util.h"
#include "tt/linear_bf16.h"
#include "tt/llama_ops.h"
#include "tt/master_weights.h"
#include "tt/mixed_precision.h"
#include "tt/ops_elementwise.h"
#include "tt/ops_matmul.h"
#include "tt/ops_reduce.h"
#include "tt/ops_view.h"
#include "tt/train.h"

namespace tt {
namespace {

// 10 steps; 3 under the sanitizers (every code path of the step, at a tenth of the time there).
constexpr int kSteps = tt::testing::steps_unless_sanitized(10, 3);
constexpr double kLossTolerance = 0.02;  ///< |bf16 loss - float32 loss| per step

llama::LlamaConfig bf16_config() {
  llama::LlamaConfig c = ch15::tiny_config();
  c.dim = 128;  // hs = 128 / 4 = 32
  c.ffn_dim = 128;
  c.init_std = 0.05;
  return c;
}

struct Bf16Run {
  std::unique_ptr<llama::Llama> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::vector<double> losses;
};

/// kSteps steps of the model of bf16_config() (seed 11) on one fixed batch of 4 x 16 tokens,
/// in bf16 mixed precision or float32, on `device`.
Bf16Run train(bool bf16, Device device) {
  Bf16Run run;
  run.model = std::make_unique<llama::Llama>(bf16_config(), 11);
  run.model->to(device);
  run.model->set_mixed_precision(bf16);
  const optim::AdamWOptions ao{.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95};
  auto groups = gpt2::param_groups(*run.model, 0.1);
  run.optimizer = bf16 ? make_master_weight_adamw(std::move(groups), ao)
                       : std::make_unique<optim::AdamW>(std::move(groups), ao);
  Generator gen(5);
  const int64_t V = run.model->config().vocab_size;
  std::vector<int64_t> tokens(4 * 17);
  for (int64_t& t : tokens) t = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(V));
  const Tensor all = from_vector<int64_t>(tokens, {4, 17});
  const Batch batch{all.narrow(1, 0, 16).contiguous().to(device),
                    all.narrow(1, 1, 16).contiguous().to(device)};
  gpt2::TrainStepOptions so;
  so.max_grad_norm = 1.0;
  for (int s = 0; s < kSteps; ++s) {
    const auto loss_of = [&](const Batch& b) { return run.model->loss(b.inputs, b.targets); };
    const gpt2::TrainStepResult r = gpt2::train_step(
        *run.optimizer, loss_of, [&] { return batch; }, so);
    EXPECT_TRUE(r.finite) << "step " << s;
    run.losses.push_back(r.loss);
  }
  return run;
}

/// The bf16 run falls and follows the float32 run within kLossTolerance, but is not equal to it.
void expect_bf16_follows_float32(Device device) {
  const Bf16Run fp32 = train(false, device);
  const Bf16Run bf16 = train(true, device);
  ASSERT_EQ(bf16.losses.size(), fp32.losses.size());
  double max_diff = 0;
  for (std::size_t s = 0; s < fp32.losses.size(); ++s) {
    EXPECT_NEAR(bf16.losses[s], fp32.losses[s], kLossTolerance) << "step " << s;
    max_diff = std::max(max_diff, std::abs(bf16.losses[s] - fp32.losses[s]));
  }
  // 4.69 falls to 0.20 in 10 steps; at least 0.05 a step.
  EXPECT_LT(bf16.losses.back(), bf16.losses.front() - 0.05 * kSteps)
      << "the bf16 loss did not fall";
  EXPECT_GT(max_diff, 1e-6) << "the bf16 losses equal the float32 ones: nothing ran in bf16";
  std::printf("%s: max |bf16 - float32| loss over %d steps %.3g (first %.4f, last %.4f)\n",
              device.str().c_str(), kSteps, max_diff, bf16.losses.front(), bf16.losses.back());
}

TEST(Ch15_Bf16Training, LossesFollowFloat32AndFall) {
  expect_bf16_follows_float32(Device::cpu());
}

TEST(Ch15_Bf16Training, ProjectionsReadTheCopiesAdamWWrites) {
  const Bf16Run run = train(true, Device::cpu());
  const auto& opt = dynamic_cast<const MasterWeightAdamW&>(*run.optimizer);
  for (const auto& [name, p] : run.model->named_parameters()) {
    EXPECT_EQ(p.dtype(), DType::kFloat32) << name << ": the masters stay float32";
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().dtype(), DType::kFloat32) << name;
    // The seven projections read copies; the head is cast per call by classifier_loss_bf16 (as
    // GPT-2's tied wte), the embedding and the norms' weights are read in float32.
    const bool gemm = name.find("_proj.") != std::string::npos;
    const Tensor copy = opt.copy_of(p);
    EXPECT_EQ(copy.defined(), gemm) << name << (gemm ? " has no" : " has a") << " bf16 copy";
    if (copy.defined()) {
      EXPECT_EQ(copy.dtype(), DType::kBFloat16) << name;
      // The copy is the master rounded to nearest even (written by the last step).
      EXPECT_TENSOR_NEAR(copy.reshape(p.shape()).to(DType::kFloat32),
                         p.to(DType::kBFloat16).to(DType::kFloat32), 0.0, 0.0)
          << name;
    }
  }
}

TEST(Ch15_Bf16Training, FloatParametersOnlyAndSamplingStaysFloat32) {
  llama::Llama model(ch15::tiny_config(), 3, {DType::kFloat64});
  EXPECT_THROW(model.set_mixed_precision(true), Error);
  model.set_mixed_precision(false);  // always allowed
  llama::Llama m32(ch15::tiny_config(), 3);
  m32.set_mixed_precision(true);
  EXPECT_TRUE(m32.mixed_precision());
  // Generation under mixed precision (the run's samples): the float32 cache, bf16 projections.
  autograd::NoGradGuard no_grad;
  llama::KVCache cache = m32.make_cache(1, 4);
  const Tensor logits = m32.forward_cached(from_vector<int64_t>({1, 2, 3}, {1, 3}), cache, {0});
  EXPECT_EQ(logits.dtype(), DType::kFloat32);
  EXPECT_EQ(logits.shape(), Shape({1, 3, 96}));
}

// The CPU "gqa_attention_*" kernels take bfloat16 (NH 4, NKV 2): out is the float32 kernel's on
// the same (bf16) values rounded once (within 2^-8 relative, plus 1e-3 absolute near 0); the
// gradients follow float32's within 2e-2 + 2^-6 relative (measured: 9e-3 at most).
TEST(Ch15_Bf16Training, CpuGqaKernelTakesBf16AsTheFloat32OneRounded) {
  auto bf16_leaf = [](const Shape& shape, uint64_t seed) {
    return ch15::leaf(shape, seed, 1.0, DType::kFloat32, false).to(DType::kBFloat16);
  };
  const Tensor q16 = bf16_leaf({2, 4, 6, 8}, 1), k16 = bf16_leaf({2, 2, 6, 8}, 2),
               v16 = bf16_leaf({2, 2, 6, 8}, 3);
  const Tensor w = ch15::leaf({2, 4, 6, 8}, 4, 1.0, DType::kFloat32, false);
  std::vector<Tensor> grads16, grads32;
  Tensor y16, y32;
  for (const DType dtype : {DType::kBFloat16, DType::kFloat32}) {
    std::vector<Tensor> in;
    for (const Tensor& t : {q16, k16, v16}) {
      in.push_back(t.to(dtype));
      in.back().set_requires_grad(true);
    }
    const Tensor y = gqa_attention(in[0], in[1], in[2]);
    EXPECT_EQ(y.dtype(), dtype);
    autograd::backward(sum(mul(to_dtype(y, DType::kFloat32), w)));
    (dtype == DType::kBFloat16 ? y16 : y32) = y;
    for (const Tensor& t : in) {
      ASSERT_EQ(t.grad().dtype(), dtype);
      (dtype == DType::kBFloat16 ? grads16 : grads32).push_back(t.grad().to(DType::kFloat32));
    }
  }
  EXPECT_TENSOR_NEAR(y16.to(DType::kFloat32), y32, 1e-3, 1.0 / 256);
  for (std::size_t i = 0; i < 3; ++i) {
    // Looser: the backward also reads dout and out rounded to bfloat16.
    EXPECT_TENSOR_NEAR(grads16[i], grads32[i], 2e-2, 1.0 / 64) << "gradient of input " << i;
  }
}

/// max |a - b| of two float32 tensors of one shape.
double max_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> va = a.contiguous().to_vector<float>();
  const std::vector<float> vb = b.contiguous().to_vector<float>();
  double m = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(va[i]) - vb[i]));
  }
  return m;
}

/// A float32 leaf whose values are bfloat16 numbers (so that rounding it to bfloat16 is exact).
Tensor bf16_valued(const Shape& shape, uint64_t seed, double scale = 1.0) {
  return ch15::leaf(shape, seed, scale, DType::kFloat32, false)
      .to(DType::kBFloat16)
      .to(DType::kFloat32);
}

// linears_bf16 (q/k/v in one call): each output is linear_bf16's (the same bfloat16 GEMM), the
// weight gradients are linear_bf16's, and dx = sum_i dy_i W_i is accumulated in float32: within
// float32 rounding (1e-5 relative) of the float64 sum of the same bfloat16 operands, where one
// linear_bf16 per layer rounds each dgrad to bfloat16 (up to 2^-9 relative each; the test also
// checks that this one IS farther, so the float32 accumulation is what it measures). With
// float32 outputs, y is the GEMM's float32 result, not rounded.
TEST(Ch15_Bf16Training, LinearsBf16CastsXOnceAndSumsDxInFloat32) {
  Generator gen(3);
  std::vector<std::shared_ptr<nn::Linear>> owned;
  std::vector<nn::Linear*> layers;
  for (const int64_t out : {16, 8, 8}) {
    owned.push_back(std::make_shared<nn::Linear>(24, out, false, gen));
    layers.push_back(owned.back().get());
  }
  const Tensor x0 = ch15::leaf({2, 5, 24}, 1, 1.0, DType::kFloat32, false);
  std::vector<Tensor> g;  // bfloat16-valued output gradients
  for (std::size_t i = 0; i < layers.size(); ++i) {
    g.push_back(bf16_valued({2, 5, layers[i]->out_features}, 10 + i));
  }
  auto run = [&](bool fused, std::vector<Tensor>& ys) {
    for (nn::Linear* l : layers) l->weight.set_grad(Tensor());
    Tensor x = x0.detach();
    x.set_requires_grad(true);
    if (fused) {
      ys = linears_bf16(x, layers);
    } else {
      ys.clear();
      for (nn::Linear* l : layers) ys.push_back(linear_bf16(x, *l));
    }
    Tensor loss;
    for (std::size_t i = 0; i < ys.size(); ++i) {
      EXPECT_EQ(ys[i].dtype(), DType::kBFloat16);
      const Tensor term = sum(mul(to_dtype(ys[i], DType::kFloat32), g[i]));
      loss = loss.defined() ? add(loss, term) : term;
    }
    autograd::backward(loss);
    return x.grad();
  };
  std::vector<Tensor> ys_fused, ys_each;
  const Tensor dx_fused = run(true, ys_fused);
  std::vector<Tensor> dw_fused;
  for (nn::Linear* l : layers) dw_fused.push_back(l->weight.grad().clone());
  const Tensor dx_each = run(false, ys_each);
  ASSERT_EQ(dx_fused.dtype(), DType::kFloat32);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    EXPECT_TENSOR_NEAR(ys_fused[i].to(DType::kFloat32), ys_each[i].to(DType::kFloat32), 0.0, 0.0)
        << "output " << i;
    EXPECT_TENSOR_NEAR(dw_fused[i], layers[i]->weight.grad(), 1e-6, 1e-6) << "dW " << i;
  }
  // The float64 reference: sum_i g_i W_i with W_i rounded to bfloat16.
  Tensor ref;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Tensor w = layers[i]->weight.detach().to(DType::kBFloat16).to(DType::kFloat64);
    const Tensor term = matmul(g[i].to(DType::kFloat64).reshape({10, -1}), w);
    ref = ref.defined() ? add(ref, term) : term;
  }
  ref = ref.reshape({2, 5, 24}).to(DType::kFloat32);
  EXPECT_TENSOR_NEAR(dx_fused, ref, 1e-6, 1e-5);
  const double err_fused = max_diff(dx_fused, ref);
  const double err_each = max_diff(dx_each, ref);
  EXPECT_LT(err_fused * 10, err_each) << "one linear_bf16 per layer rounds each dgrad: farther";
  // One layer on a bfloat16 input (o_proj, down_proj): dx is written in bfloat16 by the GEMM,
  // linear_bf16's bit for bit.
  std::vector<Tensor> dx_one;
  for (const bool fused : {true, false}) {
    Tensor xb = x0.to(DType::kBFloat16);
    xb.set_requires_grad(true);
    const Tensor y = fused ? linears_bf16(xb, {layers[1]})[0] : linear_bf16(xb, *layers[1]);
    autograd::backward(sum(mul(to_dtype(y, DType::kFloat32), g[1])));
    ASSERT_EQ(xb.grad().dtype(), DType::kBFloat16);
    dx_one.push_back(xb.grad().to(DType::kFloat32));
  }
  EXPECT_TENSOR_NEAR(dx_one[0], dx_one[1], 0.0, 0.0);
  // float32 outputs: the GEMM's float32 result (no bfloat16 rounding of y).
  autograd::NoGradGuard no_grad;
  const Tensor y32 = linears_bf16(x0, {layers[0]}, DType::kFloat32)[0];
  ASSERT_EQ(y32.dtype(), DType::kFloat32);
  const Tensor y64 =
      matmul(x0.to(DType::kBFloat16).to(DType::kFloat64).reshape({10, 24}),
             transpose(layers[0]->weight.to(DType::kBFloat16).to(DType::kFloat64), 0, 1))
          .reshape({2, 5, 16});
  EXPECT_TENSOR_NEAR(y32, y64.to(DType::kFloat32), 1e-6, 1e-5);
  EXPECT_GT(max_diff(y32, ys_fused[0].to(DType::kFloat32)), 0.0)
      << "float32 outputs are not rounded to bfloat16";
  // Misuse throws.
  nn::Linear biased(24, 4, true, gen);
  EXPECT_THROW(linears_bf16(x0, {layers[0], &biased}), Error);
  EXPECT_THROW(linears_bf16(x0, {}), Error);
  EXPECT_THROW(linears_bf16(x0.to(DType::kFloat64), {layers[0]}), Error);
}

// The CPU RoPE and SwiGLU take bfloat16 (what mixed-precision LLaMA feeds them): forward and
// backward equal the float32 kernels on the same values, each result rounded to bfloat16 once
// (exactly: the bfloat16 path runs the float32 kernel).
TEST(Ch15_Bf16Training, CpuRopeAndSwigluTakeBf16AsTheFloat32OnesRounded) {
  auto rounded = [](const Tensor& t) { return t.to(DType::kBFloat16).to(DType::kFloat32); };
  const RopeTables tables = rope_tables(16, 8, 10000.0, {});
  const Tensor pos = from_vector<int64_t>({0, 1, 2, 5, 3, 4, 9, 15}, {2, 4});
  const Tensor r = bf16_valued({2, 4, 3, 8}, 1);  // [B, T, H, hs], read transposed
  const Tensor a = bf16_valued({3, 7}, 2, 2.0), b = bf16_valued({3, 7}, 3);
  const Tensor gr = bf16_valued({2, 3, 4, 8}, 4), gs = bf16_valued({3, 7}, 5);
  std::vector<Tensor> outs[2], grads[2];
  for (const int bf : {0, 1}) {
    const DType dt = bf ? DType::kBFloat16 : DType::kFloat32;
    std::vector<Tensor> in{r.to(dt), a.to(dt), b.to(dt)};
    for (Tensor& t : in) t.set_requires_grad(true);
    const Tensor yr = rope(transpose(in[0], 1, 2), tables, pos);
    const Tensor ys = swiglu(in[1], in[2]);
    EXPECT_EQ(yr.dtype(), dt);
    EXPECT_EQ(ys.dtype(), dt);
    autograd::backward(add(sum(mul(to_dtype(yr, DType::kFloat32), gr)),
                           sum(mul(to_dtype(ys, DType::kFloat32), gs))));
    outs[bf] = {yr.to(DType::kFloat32), ys.to(DType::kFloat32)};
    for (const Tensor& t : in) {
      ASSERT_EQ(t.grad().dtype(), dt);
      grads[bf].push_back(t.grad().to(DType::kFloat32));
    }
  }
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TENSOR_NEAR(outs[1][i], rounded(outs[0][i]), 0.0, 0.0) << "output " << i;
  }
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TENSOR_NEAR(grads[1][i], rounded(grads[0][i]), 0.0, 0.0) << "gradient " << i;
  }
  EXPECT_GT(max_diff(outs[1][1], outs[0][1]), 0.0) << "nothing was rounded";
  // bfloat16 x needs float32 tables.
  EXPECT_THROW(rope(transpose(r.to(DType::kBFloat16), 1, 2),
                    rope_tables(16, 8, 10000.0, {}, {DType::kFloat64}), pos),
               Error);
}

TEST(Ch15_Bf16TrainingCuda, LossesFollowFloat32AndFall) {
  TT_SKIP_IF_NO_CUDA();
  expect_bf16_follows_float32(Device::cuda(0));
}

}  // namespace
}  // namespace tt
