// Chapter 09: the registry of GPT-2 operation sets (tt/gpt2_ops.h) and the model's use of a set
// (GPT2::set_ops): every member is called where it belongs, and a set of reference-equivalent
// members gives the reference model's loss and gradients.
#include <algorithm>
#include <map>
#include <string>

#include "ch09_test_util.h"
#include "tt/autograd.h"
#include "tt/functional.h"
#include "tt/gpt2.h"
#include "tt/gpt2_ops.h"
#include "tt/testing.h"

namespace tt::gpt2 {
namespace {

using test09::fixed_batch;
using test09::tiny_config;

TEST(Ch09_ModelOps, ReferenceIsRegisteredAndEmpty) {
  ASSERT_TRUE(has_model_ops("reference"));
  const ModelOps ops = model_ops("reference");
  EXPECT_FALSE(ops.attention || ops.linear || ops.linear_gelu || ops.residual_layernorm ||
               ops.classifier_loss);
  EXPECT_EQ(ops.description, "reference (chapter 09 compositions)");
  const std::vector<std::string> names = model_ops_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "reference"), names.end());
  EXPECT_FALSE(has_model_ops("no such set"));
}

TEST(Ch09_ModelOps, ErrorsNameTheRegisteredSets) {
  EXPECT_TT_ERROR(model_ops("no such set"), "no such set", "registered: ", "reference");
  EXPECT_TT_ERROR(register_model_ops("reference", reference_model_ops), "already registered",
                  "reference");
  EXPECT_TT_ERROR(register_model_ops("", reference_model_ops), "must not be empty");
  EXPECT_TT_ERROR(register_model_ops("test: no factory", {}), "no factory");
  EXPECT_FALSE(has_model_ops("test: no factory"));
}

TEST(Ch09_ModelOps, DuplicateRegistrationThrowsAndKeepsTheFirst) {
  auto first = [] {
    ModelOps ops;
    ops.description = "first";
    return ops;
  };
  auto second = [] {
    ModelOps ops;
    ops.description = "second";
    return ops;
  };
  EXPECT_TRUE(register_model_ops("test: duplicate", first));
  EXPECT_TT_ERROR(register_model_ops("test: duplicate", second), "test: duplicate",
                  "already registered");
  EXPECT_EQ(model_ops("test: duplicate").description, "first");
}

// A set whose members are the reference compositions, each counting its calls.
ModelOps counting_ops(std::map<std::string, int>& calls) {
  ModelOps ops;
  ops.attention = [&calls](const Tensor& qkv, int64_t n_head) {
    ++calls["attention"];
    return causal_self_attention(qkv, n_head);
  };
  ops.linear = [&calls](const Tensor& x, nn::Linear& layer) {
    ++calls["linear"];
    return layer.forward(x);
  };
  ops.linear_gelu = [&calls](const Tensor& x, nn::Linear& layer) {
    ++calls["linear_gelu"];
    return gelu(layer.forward(x));
  };
  ops.residual_layernorm = [&calls](const Tensor& r, const Tensor& d, nn::LayerNorm& ln) {
    ++calls["residual_layernorm"];
    Tensor x = add(r, d);
    Tensor y = ln.forward(x);
    return std::pair<Tensor, Tensor>{x, y};
  };
  ops.classifier_loss = [&calls](const Tensor& x, const Tensor& wte, int64_t V,
                                 const Tensor& targets) {
    ++calls["classifier_loss"];
    const Tensor logits = matmul(x, transpose(slice(wte, 0, 0, V), 0, 1));
    return cross_entropy(view(logits, {-1, V}), targets.reshape({-1}));
  };
  ops.description = "counting";
  return ops;
}

// Loss and every parameter's gradient of `model` on a fixed batch.
std::pair<Tensor, std::vector<Tensor>> loss_and_grads(GPT2& model) {
  const Batch b = fixed_batch(2, 7, model.config().vocab_size, 5);
  model.zero_grad();
  const Tensor loss = model.loss(b.inputs, b.targets);
  autograd::backward(loss);
  std::vector<Tensor> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().clone());
  return {loss.detach(), grads};
}

TEST(Ch09_ModelOps, EveryMemberIsUsedAndEqualsTheReference) {
  GPT2 ref(tiny_config()), fused(tiny_config());
  EXPECT_EQ(ref.ops().description, "reference (chapter 09 compositions)");
  std::map<std::string, int> calls;
  fused.set_ops(counting_ops(calls));
  EXPECT_EQ(fused.ops().description, "counting");
  const auto [loss_ref, grads_ref] = loss_and_grads(ref);
  const auto [loss, grads] = loss_and_grads(fused);
  const int L = static_cast<int>(tiny_config().n_layer);
  EXPECT_EQ(calls["attention"], L);
  EXPECT_EQ(calls["linear"], 3 * L);  // c_attn, attn.c_proj, mlp.c_proj
  EXPECT_EQ(calls["linear_gelu"], L);
  EXPECT_EQ(calls["residual_layernorm"], 2 * L);  // after attention, after the MLP (+ ln_f)
  EXPECT_EQ(calls["classifier_loss"], 1);
  // The same ops in the same order: the fused loop reorders nothing that rounds differently.
  EXPECT_TENSOR_NEAR(loss, loss_ref, 1e-6, 1e-6);
  ASSERT_EQ(grads.size(), grads_ref.size());
  for (std::size_t i = 0; i < grads.size(); ++i) {
    EXPECT_TENSOR_NEAR(grads[i], grads_ref[i], 1e-6, 1e-5) << "parameter " << i;
  }
  // forward() (the logits) uses the blocks' ops but never the classifier.
  calls.clear();
  const Batch b = fixed_batch(2, 7, tiny_config().vocab_size, 5);
  EXPECT_TENSOR_NEAR(fused.forward(b.inputs), ref.forward(b.inputs), 1e-6, 1e-5);
  EXPECT_EQ(calls["classifier_loss"], 0);
  EXPECT_EQ(calls["attention"], L);
}

TEST(Ch09_ModelOps, AttentionAloneKeepsBlockForwardAndBackToReference) {
  GPT2 ref(tiny_config()), model(tiny_config());
  std::map<std::string, int> calls;
  ModelOps ops = counting_ops(calls);
  ModelOps attention_only;
  attention_only.attention = ops.attention;
  model.set_ops(attention_only);
  const auto [loss_ref, grads_ref] = loss_and_grads(ref);
  EXPECT_TENSOR_NEAR(loss_and_grads(model).first, loss_ref, 1e-6, 1e-6);
  EXPECT_EQ(calls["attention"], static_cast<int>(tiny_config().n_layer));
  EXPECT_EQ(calls["linear"], 0);
  model.set_ops(model_ops("reference"));
  calls.clear();
  EXPECT_TENSOR_NEAR(loss_and_grads(model).first, loss_ref, 1e-6, 1e-6);
  EXPECT_EQ(calls["attention"], 0);
}

}  // namespace
}  // namespace tt::gpt2
