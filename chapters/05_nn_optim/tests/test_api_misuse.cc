// API misuse of chapter 05: layers, modules, optimizers, clipping and schedules given wrong
// shapes, dtypes, devices, undefined tensors and bad (negative, NaN, Inf) hyper-parameters must
// throw tt::Error naming the entry point and the offending values. Then the documented
// behaviour for empty tensors and for NaN/Inf gradients (optim.h).
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tt/functional.h"
#include "tt/nn.h"
#include "tt/second_device.h"
#include "tt/testing.h"

namespace tt {
namespace {

using testing::expect_errors;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A float32 leaf parameter of `shape` (zeros) with requires_grad.
Tensor param(const Shape& shape) {
  Tensor p = zeros(shape);
  p.set_requires_grad();
  return p;
}

TEST(Ch05_ApiMisuse, LayersNameShapesDtypesAndDevices) {
  Generator gen(1);
  nn::Linear lin(3, 2, true, gen);
  nn::LayerNorm ln(4);
  nn::Embedding emb(5, 2, gen);
  nn::GELU act;
  nn::ModuleList list;
  list.push_back(std::make_shared<nn::GELU>());
  expect_errors({
      {"Linear in=0", [&] { nn::Linear(0, 2, true, gen); }, {"Linear", "in_features", "0"}},
      {"Linear shape",
       [&] {
         lin(zeros({2, 4}));
       },
       {"Linear::forward", "[..., 3]", "[2, 4]"}},
      {"Linear 0-d", [&] { lin(scalar_tensor(1)); }, {"Linear::forward", "[]"}},
      {"Linear dtype",
       [&] {
         lin(zeros({2, 3}, {.dtype = DType::kFloat64}));
       },
       {"Linear::forward", "float64", "float32"}},
      {"Linear int64",
       [&] {
         lin(zeros({2, 3}, {.dtype = DType::kInt64}));
       },
       {"Linear::forward", "int64"}},
      {"Linear undefined", [&] { lin(Tensor()); }, {"Linear::forward", "undefined"}},
      {"LayerNorm dim=0", [&] { nn::LayerNorm(0); }, {"LayerNorm", "dim", "0"}},
      {"LayerNorm shape",
       [&] {
         ln(zeros({2, 3}));
       },
       {"layernorm", "[2, 3]", "[4]"}},
      {"LayerNorm dtype",
       [&] {
         ln(zeros({2, 4}, {.dtype = DType::kFloat64}));
       },
       {"layernorm", "float64", "float32"}},
      {"Embedding sizes", [&] { nn::Embedding(5, -1, gen); }, {"Embedding", "-1"}},
      {"Embedding float ids", [&] { emb(zeros({2})); }, {"embedding", "indices", "float32"}},
      {"Embedding id range",
       [&] { emb(tensor_i64({5})); },
       {"embedding", "indices[0] = 5", "[0, 5)"}},
      {"GELU int64", [&] { act(tensor_i64({1})); }, {"gelu", "int64"}},
      {"ModuleList index", [&] { list[3]; }, {"ModuleList", "index 3", "1 modules"}},
      {"ModuleList type", [&] { list.at<nn::Linear>(0); }, {"ModuleList::at", "GELU"}},
      {"no forward", [&] { list.forward(zeros({1})); }, {"ModuleList", "no forward"}},
      {"normal_ int64",
       [&] { nn::normal_(zeros({2}, {.dtype = DType::kInt64}), 1, gen); },
       {"normal_", "int64", "[2]"}},
      {"normal_ NaN std", [&] { nn::normal_(zeros({2}), kNaN, gen); }, {"normal_", "std", "nan"}},
      {"normal_ negative std", [&] { nn::normal_(zeros({2}), -1, gen); }, {"normal_", "-1"}},
      {"init_gpt2_ n_layer", [&] { nn::init_gpt2_(lin, 0, gen); }, {"init_gpt2_", "n_layer", "0"}},
      {"register undefined",
       [&] {
         nn::Module m;
         m.register_parameter("w", Tensor());
       },
       {"register_parameter", "'w'", "undefined"}},
      {"register int64",
       [&] {
         nn::Module m;
         m.register_parameter("w", tensor_i64({1}));
       },
       {"register_parameter", "'w'", "int64"}},
      {"register dotted",
       [&] {
         nn::Module m;
         m.register_buffer("a.b", zeros({1}));
       },
       {"register_buffer", "a.b"}},
  });
}

TEST(Ch05_ApiMisuse, LayersOnAnotherDeviceNameBothDevices) {
  TT_SECOND_DEVICE_OR_SKIP(dev);
  Generator gen(2);
  nn::Linear lin(3, 2, true, gen);
  lin.to(dev);
  nn::Embedding emb(5, 2, gen);
  emb.to(dev);
  expect_errors({
      {"Linear",
       [&] {
         lin(zeros({1, 3}));
       },
       {"Linear::forward", "cpu", "cuda:0"}},
      {"Embedding", [&] { emb(tensor_i64({1})); }, {"embedding", "cpu", "cuda:0"}},
  });
}

TEST(Ch05_ApiMisuse, OptimizersRejectBadHyperParametersNamingTheValue) {
  const Tensor p = param({2});
  using optim::AdamWOptions;
  using optim::SgdOptions;
  expect_errors({
      {"SGD lr<0", [&] { optim::SGD({p}, SgdOptions{.lr = -1}); }, {"SGD", "learning rate", "-1"}},
      {"SGD lr NaN",
       [&] { optim::SGD({p}, SgdOptions{.lr = kNaN}); },
       {"SGD", "learning rate", "nan"}},
      {"AdamW lr Inf",
       [&] { optim::AdamW({p}, AdamWOptions{.lr = kInf}); },
       {"AdamW", "learning rate", "inf"}},
      {"SGD momentum NaN",
       [&] { optim::SGD({p}, SgdOptions{.momentum = kNaN}); },
       {"SGD", "momentum nan"}},
      {"SGD weight_decay<0",
       [&] { optim::SGD({p}, SgdOptions{.weight_decay = -0.5}); },
       {"SGD", "weight_decay -0.5"}},
      {"SGD dampening Inf",
       [&] { optim::SGD({p}, SgdOptions{.momentum = 0.9, .dampening = kInf}); },
       {"SGD", "dampening inf"}},
      {"SGD nesterov", [&] { optim::SGD({p}, SgdOptions{.nesterov = true}); }, {"SGD", "Nesterov"}},
      {"AdamW beta1",
       [&] { optim::AdamW({p}, AdamWOptions{.beta1 = 1.0}); },
       {"AdamW", "betas", "(1, "}},
      {"AdamW beta2 NaN",
       [&] { optim::AdamW({p}, AdamWOptions{.beta2 = kNaN}); },
       {"AdamW", "betas", "nan"}},
      {"AdamW eps NaN",
       [&] { optim::AdamW({p}, AdamWOptions{.eps = kNaN}); },
       {"AdamW", "eps nan"}},
      {"AdamW weight_decay Inf",
       [&] { optim::AdamW({p}, AdamWOptions{.weight_decay = kInf}); },
       {"AdamW", "weight_decay inf"}},
      {"group weight_decay",
       [&] {
         optim::AdamW(std::vector<optim::ParamGroup>{{{p}, -1.0}}, AdamWOptions{});
       },
       {"AdamW", "group 0", "-1"}},
      {"set_lr NaN",
       [&] { optim::AdamW({p}, AdamWOptions{}).set_lr(kNaN); },
       {"AdamW::set_lr", "nan"}},
      {"set_lr Inf", [&] { optim::SGD({p}, SgdOptions{}).set_lr(kInf); }, {"SGD::set_lr", "inf"}},
      {"int64 parameter",
       [&] { optim::SGD({tensor_i64({1})}, SgdOptions{}); },
       {"SGD", "parameter 0", "int64"}},
      {"non-contiguous parameter",
       [&] {
         optim::SGD({param({2, 3}).transpose(0, 1)}, SgdOptions{});
       },
       {"SGD", "parameter 0", "[3, 2]"}},
      {"duplicate parameter",
       [&] {
         optim::AdamW({p, p}, AdamWOptions{});
       },
       {"AdamW", "parameter 1", "twice"}},
      {"undefined parameter",
       [&] {
         optim::AdamW({p, Tensor()}, AdamWOptions{});
       },
       {"AdamW", "parameter 1", "undefined"}},
      {"clip max_norm 0",
       [&] { optim::clip_grad_norm_({p}, 0.0); },
       {"clip_grad_norm_", "max_norm", "0"}},
      {"clip max_norm NaN", [&] { optim::clip_grad_norm_({p}, kNaN); }, {"clip_grad_norm_", "nan"}},
      {"schedule order",
       [&] { optim::WarmupCosineLR(1e-3, 1e-2, 1, 10); },
       {"WarmupCosineLR", "0.001", "0.01"}},
      {"schedule Inf", [&] { optim::WarmupCosineLR(kInf, 0, 1, 10); }, {"WarmupCosineLR", "inf"}},
      {"schedule NaN",
       [&] { optim::WarmupCosineLR(1e-3, kNaN, 1, 10); },
       {"WarmupCosineLR", "nan"}},
      {"schedule steps",
       [&] { optim::WarmupCosineLR(1e-3, 0, 10, 10); },
       {"WarmupCosineLR", "total_steps > warmup_steps", "10"}},
      {"schedule step<0",
       [&] { optim::WarmupCosineLR(1, 0, 0, 2).lr(-1); },
       {"WarmupCosineLR::lr", "-1"}},
  });
}

TEST(Ch05_ApiMisuse, StepRejectsGradientsThatDoNotMatch) {
  const Tensor p = param({2, 3});
  optim::AdamW opt({p}, {});
  expect_errors({
      {"set_grad shape",
       [&] {
         p.set_grad(zeros({3, 2}));
       },
       {"set_grad", "[3, 2]", "[2, 3]"}},
      {"grad dtype",
       [&] {
         p.set_grad(zeros({2, 3}, {.dtype = DType::kFloat64}));
         opt.step();
       },
       {"AdamW::step", "parameter 0", "float64", "float32"}},
  });
  EXPECT_EQ(opt.step_count(), 0);  // a rejected step counts nothing
}

TEST(Ch05_ApiMisuse, StepRejectsAGradientOnAnotherDevice) {
  TT_SECOND_DEVICE_OR_SKIP(dev);
  const Tensor p = param({2});
  optim::SGD opt({p}, {});
  p.set_grad(zeros({2}).to(dev));
  EXPECT_TT_ERROR(opt.step(), "SGD::step", "parameter 0", "cpu", "cuda:0");
  EXPECT_TT_ERROR(optim::clip_grad_norm_({p}, 1.0), "clip_grad_norm_", "cuda:0", "cpu");
}

// ----- empty tensors -----------------------------------------------------------------------

TEST(Ch05_EmptyTensors, LayersAndOptimizersHandleNoRowsAndNoElements) {
  Generator gen(3);
  nn::Linear lin(3, 2, true, gen);
  const Tensor y = lin(zeros({0, 3}));
  EXPECT_EQ(y.shape(), (Shape{0, 2}));
  autograd::backward(sum(y));  // no rows: zero gradients of the right shapes
  EXPECT_TENSOR_NEAR(lin.weight.grad(), zeros({2, 3}), 0, 0);
  EXPECT_TENSOR_NEAR(lin.bias.grad(), zeros({2}), 0, 0);
  const auto before = lin.weight.to_vector<float>();
  optim::SGD sgd(lin.parameters(), {.lr = 0.1});
  sgd.step();
  EXPECT_EQ(lin.weight.to_vector<float>(), before);
  EXPECT_EQ(optim::clip_grad_norm_(lin.parameters(), 1.0), 0.0);
  // A parameter with no elements is updated (trivially) without complaint.
  const Tensor e = param({0, 4});
  e.set_grad(zeros({0, 4}));
  optim::AdamW adam({e}, {});
  adam.step();
  EXPECT_EQ(adam.step_count(), 1);
  EXPECT_EQ(e.shape(), (Shape{0, 4}));
}

// ----- NaN and Inf gradients ---------------------------------------------------------------

TEST(Ch05_NonFinite, ClipReportsNonFiniteNormsAndStepAppliesThem) {
  // As documented in optim.h: clip_grad_norm_ returns the non-finite norm (an Inf norm scales
  // every gradient by 0, a NaN norm scales nothing), and step() applies what it is given.
  Tensor a = param({2}), b = param({2});
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  a.set_grad(from_vector<float>({inf, 1}, {2}));
  b.set_grad(from_vector<float>({2, 3}, {2}));
  EXPECT_EQ(optim::clip_grad_norm_({a, b}, 1.0), kInf);
  EXPECT_TRUE(std::isnan(a.grad().to_vector<float>()[0]));  // Inf * 0
  EXPECT_EQ(a.grad().to_vector<float>()[1], 0.0f);
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{0, 0}));
  a.set_grad(from_vector<float>({nan, 1}, {2}));
  EXPECT_TRUE(std::isnan(optim::clip_grad_norm_({a}, 1.0)));
  EXPECT_EQ(a.grad().to_vector<float>()[1], 1.0f);  // unscaled
  optim::AdamW opt({a}, {});
  opt.step();
  const auto v = a.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isfinite(v[1]));
}

}  // namespace
}  // namespace tt
