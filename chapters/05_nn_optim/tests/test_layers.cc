// Tests of the layers (tt/layers.h): forward values against hand computations, gradients through
// autograd, containers, GPT-2 initialisation.
#include <cmath>
#include <memory>

#include "tt/autograd.h"
#include "tt/functional.h"
#include "tt/layers.h"
#include "tt/testing.h"

namespace tt::nn {
namespace {

TEST(Ch05_Layers, LinearComputesXWtPlusB) {
  Generator gen(1);
  Linear lin(3, 2, true, gen);
  EXPECT_EQ(lin.weight.shape(), (Shape{2, 3}));
  EXPECT_EQ(lin.bias.shape(), (Shape{2}));
  lin.weight.copy_(from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  lin.bias.copy_(from_vector<float>({0.5f, -1}, {2}));
  // Leading batch dims: [2, 1, 3] -> [2, 1, 2].
  Tensor x = from_vector<float>({1, 0, -1, 2, 1, 0}, {2, 1, 3});
  Tensor y = lin(x);
  EXPECT_TENSOR_NEAR(y, from_vector<float>({-1.5f, -3, 4.5f, 12}, {2, 1, 2}), 1e-6, 0);
  // Gradients reach weight and bias.
  autograd::backward(sum(y));
  EXPECT_TENSOR_NEAR(lin.weight.grad(), from_vector<float>({3, 1, -1, 3, 1, -1}, {2, 3}), 1e-6, 0);
  EXPECT_TENSOR_NEAR(lin.bias.grad(), from_vector<float>({2, 2}, {2}), 1e-6, 0);
  EXPECT_EQ(lin.extra_repr(), "in=3, out=2, bias=true");
  EXPECT_TT_ERROR(lin(zeros({2, 4})), "Linear::forward", "[..., 3]", "[2, 4]");
}

TEST(Ch05_Layers, LinearInitIsSeededAndBounded) {
  Generator g1(7), g2(7);
  Linear a(16, 4, true, g1), b(16, 4, true, g2);
  EXPECT_EQ(a.weight.to_vector<float>(), b.weight.to_vector<float>());
  for (float w : a.weight.to_vector<float>()) EXPECT_LE(std::abs(w), 0.25f);  // 1/sqrt(16)
  Linear no_bias(4, 4, false, g1);
  EXPECT_FALSE(no_bias.bias.defined());
  EXPECT_EQ(no_bias.own_parameters().size(), 1u);
}

TEST(Ch05_Layers, LayerNormEmbeddingGelu) {
  LayerNorm ln(4);
  EXPECT_EQ(ln.weight.to_vector<float>(), std::vector<float>(4, 1.f));
  EXPECT_EQ(ln.bias.to_vector<float>(), std::vector<float>(4, 0.f));
  Tensor x = from_vector<float>({1, 2, 3, 4}, {1, 4});
  // mean 2.5, variance 1.25
  const float r = 1.f / std::sqrt(1.25f + 1e-5f);
  EXPECT_TENSOR_NEAR(ln(x), from_vector<float>({-1.5f * r, -0.5f * r, 0.5f * r, 1.5f * r}, {1, 4}),
                     1e-5, 0);

  Generator gen(3);
  Embedding emb(5, 2, gen);
  emb.weight.copy_(from_vector<float>({0, 1, 10, 11, 20, 21, 30, 31, 40, 41}, {5, 2}));
  EXPECT_EQ(emb(tensor_i64({4, 0, 4})).to_vector<float>(),
            (std::vector<float>{40, 41, 0, 1, 40, 41}));
  EXPECT_EQ(emb.extra_repr(), "num=5, dim=2");

  GELU g;
  EXPECT_TENSOR_NEAR(g(tensor({0.f})), tensor({0.f}), 0, 0);
  EXPECT_TRUE(g.own_parameters().empty());
}

TEST(Ch05_Layers, SequentialModuleListMlp) {
  Generator gen(5);
  Sequential seq;
  auto fc = seq.push_back(std::make_shared<Linear>(3, 3, false, gen));
  seq.push_back(std::make_shared<GELU>());
  fc->weight.copy_(from_vector<float>({1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3}));
  Tensor x = from_vector<float>({-1, 0, 2}, {1, 3});
  EXPECT_TENSOR_NEAR(seq(x), gelu(x), 0, 0);
  EXPECT_EQ(seq.named_parameters()[0].first, "0.weight");

  ModuleList list;
  list.push_back(std::make_shared<LayerNorm>(2));
  list.push_back(std::make_shared<GELU>());
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list.at<LayerNorm>(0).dim, 2);
  EXPECT_TT_ERROR(list.at<LayerNorm>(1), "ModuleList::at", "GELU");
  EXPECT_TT_ERROR(list[2], "index 2 out of range");
  EXPECT_TT_ERROR(list(x), "ModuleList has no forward");

  MLP mlp(8, 16, 4, gen);
  EXPECT_EQ(mlp(zeros({2, 5, 8})).shape(), (Shape{2, 5, 4}));
  std::vector<std::string> names;
  for (auto& [name, p] : mlp.named_parameters()) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"}));
  EXPECT_EQ(mlp.to_string(),
            "MLP(\n  (c_fc): Linear(in=8, out=16, bias=true)\n  (gelu): GELU()\n"
            "  (c_proj): Linear(in=16, out=4, bias=true)\n)");
}

/// Standard deviation of a tensor's values (mean assumed ~0).
double rms(const Tensor& t) {
  double s = 0;
  for (float v : t.to_vector<float>()) s += static_cast<double>(v) * v;
  return std::sqrt(s / static_cast<double>(t.numel()));
}

/// A two-"layer" model with GPT-2 names, a tied head and a LayerNorm.
struct TinyGpt : Module {
  explicit TinyGpt(Generator& gen) : Module("TinyGpt") {
    wte = register_module("wte", std::make_shared<Embedding>(64, 32, gen));
    h = register_module("h", std::make_shared<ModuleList>());
    for (int i = 0; i < 2; ++i) h->push_back(std::make_shared<MLP>(32, 128, 32, gen));
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(32));
    register_parameter("lm_head", wte->weight);  // tied
  }
  std::shared_ptr<Embedding> wte;
  std::shared_ptr<ModuleList> h;
  std::shared_ptr<LayerNorm> ln_f;
};

TEST(Ch05_Layers, InitGpt2ScalesResidualProjections) {
  Generator gen(11);
  TinyGpt model(gen);
  model.ln_f->weight.fill_(3.0);
  Generator init(1337);
  init_gpt2_(model, /*n_layer=*/2, init);
  EXPECT_NEAR(rms(model.wte->weight), 0.02, 0.002);
  auto& mlp = model.h->at<MLP>(0);
  EXPECT_NEAR(rms(mlp.c_fc->weight), 0.02, 0.001);
  EXPECT_NEAR(rms(mlp.c_proj->weight), 0.02 / std::sqrt(4.0), 0.0005);
  EXPECT_EQ(mlp.c_fc->bias.to_vector<float>(), std::vector<float>(128, 0.f));
  EXPECT_EQ(model.ln_f->weight.to_vector<float>(), std::vector<float>(32, 1.f));
  // Deterministic for a seed; tensors keep their identity.
  Generator gen2(99), init2(1337);
  TinyGpt other(gen2);
  init_gpt2_(other, 2, init2);
  EXPECT_EQ(other.h->at<MLP>(1).c_proj->weight.to_vector<float>(),
            model.h->at<MLP>(1).c_proj->weight.to_vector<float>());
  EXPECT_TRUE(model.parameters()[0].is_same(model.wte->weight));
  EXPECT_TRUE(is_residual_projection("h.3.attn.c_proj.weight"));
  EXPECT_TRUE(is_residual_projection("c_proj.weight"));
  EXPECT_FALSE(is_residual_projection("h.3.attn.c_proj.bias"));
  EXPECT_FALSE(is_residual_projection("h.3.xc_proj.weight"));
}

}  // namespace
}  // namespace tt::nn
