// Tests of the LLaMA model (tt/llama.h) on the CPU: the parameter names of Hugging Face, the
// config.json round trip, causality, the loss and its gradients, and save/load of a model
// directory.
#include <algorithm>
#include <cmath>
#include <set>

#include "ch15_test_util.h"
#include "tt/functional.h"
#include "tt/llama.h"
#include "tt/temp_dir.h"

namespace tt {
namespace {

using llama::Llama;
using llama::LlamaConfig;

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.contiguous().to(DType::kFloat64).to_vector<double>();
  const std::vector<double> y = b.contiguous().to(DType::kFloat64).to_vector<double>();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

Tensor random_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> ids(static_cast<std::size_t>(B * T));
  for (auto& id : ids) id = static_cast<int64_t>(gen.next_u64() % static_cast<uint64_t>(V));
  return from_vector(ids, {B, T});
}

TEST(Ch15_Llama, ParameterNamesAreHuggingFaces) {
  Llama model(ch15::tiny_config());
  std::set<std::string> names;
  for (const auto& [name, t] : model.named_parameters()) names.insert(name);
  for (const char* n :
       {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
        "model.layers.0.self_attn.o_proj.weight", "model.layers.1.mlp.gate_proj.weight",
        "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight",
        "model.layers.1.input_layernorm.weight", "model.layers.1.post_attention_layernorm.weight",
        "model.norm.weight", "lm_head.weight"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_EQ(names.size(), 2u + 2 * 9 + 1);
  const LlamaConfig c = ch15::tiny_config();
  EXPECT_EQ(model.model->layers->at<llama::LlamaDecoderLayer>(0).self_attn->k_proj->weight.shape(),
            Shape({c.n_kv_heads * c.head_dim(), c.dim}));
  LlamaConfig tied = c;
  tied.tie_embeddings = true;
  Llama tied_model(tied);
  EXPECT_EQ(tied_model.lm_head, nullptr);
  EXPECT_TRUE(tied_model.head_weight().is_same(tied_model.model->embed_tokens->weight));
}

TEST(Ch15_Llama, ConfigJsonRoundTripsAndReadsTransformersKeys) {
  LlamaConfig c = ch15::tiny_config();
  c.rope_scaling.type = "llama3";
  c.rope_scaling.factor = 8;
  c.eos_token_ids = {2, 7};
  const LlamaConfig back = LlamaConfig::from_hf_json(c.to_hf_json(), "mem");
  EXPECT_EQ(back.str(), c.str());
  EXPECT_EQ(back.eos_token_ids, c.eos_token_ids);
  EXPECT_EQ(back.rope_scaling.factor, 8);
  // What transformers writes for LlamaConfig() with a few fields changed (no
  // num_key_value_heads: it defaults to num_attention_heads).
  const LlamaConfig hf = LlamaConfig::from_hf_json(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 160,
          "num_hidden_layers": 3, "num_attention_heads": 8, "vocab_size": 100,
          "max_position_embeddings": 256, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
          "tie_word_embeddings": true, "rope_scaling": null, "eos_token_id": 2,
          "torch_dtype": "float32", "transformers_version": "4.57.0", "model_type": "llama"})",
      "mem");
  EXPECT_EQ(hf.n_kv_heads, 8);
  EXPECT_EQ(hf.rope_theta, 500000.0);
  EXPECT_TRUE(hf.tie_embeddings);
  EXPECT_EQ(hf.eos_token_ids, std::vector<int64_t>({2}));
  // transformers 5's form: the RoPE settings in one "rope_parameters" object; a null EOS.
  const LlamaConfig v5 = LlamaConfig::from_hf_json(
      R"({"hidden_size": 64, "num_attention_heads": 8, "eos_token_id": null,
          "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}})",
      "mem");
  EXPECT_EQ(v5.rope_theta, 500000.0);
  EXPECT_EQ(v5.rope_scaling.type, "default");
  EXPECT_TRUE(v5.eos_token_ids.empty());
  EXPECT_TT_ERROR(LlamaConfig::from_hf_json(R"({"model_type": "gpt2"})", "x.json"), "x.json",
                  "gpt2");
  EXPECT_TT_ERROR(LlamaConfig::from_hf_json(R"({"hidden_size": "big"})", "x.json"), "hidden_size");
  EXPECT_TT_ERROR(
      LlamaConfig::from_hf_json(R"({"num_attention_heads": 8, "num_key_value_heads": 3})", "x"),
      "n_kv_heads");
  EXPECT_TT_ERROR(LlamaConfig::from_hf_json(R"({"attention_bias": true})", "x"), "attention_bias");
}

TEST(Ch15_Llama, ForwardIsCausalAndTheLossIsNearLogV) {
  Llama model(ch15::tiny_config());
  const Tensor idx = random_ids(2, 9, 96, 1);
  const Tensor logits = model.forward(idx);
  ASSERT_EQ(logits.shape(), Shape({2, 9, 96}));
  // Changing token 6 changes nothing before position 6.
  std::vector<int64_t> ids = idx.to_vector<int64_t>();
  ids[6] = (ids[6] + 1) % 96;
  const Tensor other = model.forward(from_vector(ids, {2, 9}));
  EXPECT_TENSOR_NEAR(other.slice(1, 0, 6), logits.slice(1, 0, 6), 0, 0);
  EXPECT_GT(max_abs_diff(other.slice(1, 6, 9), logits.slice(1, 6, 9)), 1e-6);
}

TEST(Ch15_Llama, LossGradientsAreFiniteAndMatchFiniteDifferencesInFloat64) {
  LlamaConfig c = ch15::tiny_config();
  c.n_layers = 1;
  c.vocab_size = 16;
  c.dim = 8;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.ffn_dim = 12;
  Llama model(c, 7, {DType::kFloat64});
  const Tensor idx = random_ids(2, 5, 16, 2);
  const Tensor targets = random_ids(2, 5, 16, 3);
  const Tensor loss = model.loss(idx, targets);
  EXPECT_NEAR(loss.item(), std::log(16.0), 0.5);
  autograd::backward(loss);
  // Central differences on a few entries of every parameter.
  for (const auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    for (int64_t i : {int64_t{0}, p.numel() / 2, p.numel() - 1}) {
      autograd::NoGradGuard no_grad;
      const Tensor flat = p.view({p.numel()});
      const double x0 = flat.select(0, i).item();
      const double eps = 1e-6;
      flat.select(0, i).fill_(x0 + eps);
      const double up = model.loss(idx, targets).item();
      flat.select(0, i).fill_(x0 - eps);
      const double down = model.loss(idx, targets).item();
      flat.select(0, i).fill_(x0);
      const double numeric = (up - down) / (2 * eps);
      const double analytic = p.grad().view({p.numel()}).select(0, i).item();
      EXPECT_NEAR(analytic, numeric, 1e-7 + 1e-5 * std::abs(numeric)) << name << "[" << i << "]";
    }
  }
}

TEST(Ch15_Llama, SaveHfAndLoadHfRoundTripTheLogits) {
  const testing::TempDir dir;
  for (bool tied : {false, true}) {
    LlamaConfig c = ch15::tiny_config();
    c.tie_embeddings = tied;
    Llama model(c, 11);
    llama::save_hf(model, dir.str());
    const auto back = llama::load_hf(dir.str());
    const Tensor idx = random_ids(1, 7, 96, 4);
    EXPECT_TENSOR_NEAR(back->forward(idx), model.forward(idx), 0, 0) << "tied " << tied;
    // BF16 storage: logits close, not equal.
    llama::save_hf(model, dir.str(), safetensors::StoreAs::kBF16);
    EXPECT_TENSOR_NEAR(llama::load_hf(dir.str())->forward(idx), model.forward(idx), 2e-2, 0);
  }
}

TEST(Ch15_Llama, Bf16ParametersAreTheRoundedFloat32OnesAndRunOnCudaOnly) {
  const testing::TempDir dir;
  const LlamaConfig c = ch15::tiny_config();
  Llama f32(c, 11), bf(c, 11, {DType::kBFloat16});
  EXPECT_EQ(bf.dtype(), DType::kBFloat16);
  // The same draws, rounded to nearest even; load_hf(dir, bfloat16) rounds the F32 file alike.
  llama::save_hf(f32, dir.str());
  const auto loaded = llama::load_hf(dir.str(), DType::kBFloat16);
  // to_dtype converts in place: the same tensor objects, now bfloat16.
  Llama converted(c, 11);
  const Tensor q =
      converted.model->layers->at<llama::LlamaDecoderLayer>(0).self_attn->q_proj->weight;
  converted.to_dtype(DType::kBFloat16);
  EXPECT_EQ(q.dtype(), DType::kBFloat16);
  const nn::StateDict a = f32.state_dict(), b = bf.state_dict(), l = loaded->state_dict(),
                      v = converted.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TENSOR_NEAR(b[i].second, a[i].second.to(DType::kBFloat16), 0, 0) << a[i].first;
    EXPECT_TENSOR_NEAR(l[i].second, b[i].second, 0, 0) << a[i].first;
    EXPECT_TENSOR_NEAR(v[i].second, b[i].second, 0, 0) << a[i].first;
    EXPECT_EQ(v[i].second.dtype(), DType::kBFloat16) << a[i].first;
  }
  // Inference only, on CUDA.
  const Tensor idx = random_ids(1, 5, 96, 4);
  EXPECT_TT_ERROR(bf.forward(idx), "bfloat16", "CUDA", "cpu");
  EXPECT_TT_ERROR(bf.loss(idx, idx), "Llama::loss", "bfloat16", "inference");
}

TEST(Ch15_Llama, LoadHfNamesAMissingTensor) {
  const testing::TempDir dir;
  Llama model(ch15::tiny_config());
  nn::StateDict state = model.state_dict();
  state.erase(std::remove_if(state.begin(), state.end(),
                             [](const nn::NamedTensor& t) {
                               return t.first == "model.layers.1.mlp.up_proj.weight";
                             }),
              state.end());
  llama::save_hf(model, dir.str());
  safetensors::save(dir.file("model.safetensors"), state);
  EXPECT_TT_ERROR(llama::load_hf(dir.str()), "model.safetensors",
                  "model.layers.1.mlp.up_proj.weight");
}

}  // namespace
}  // namespace tt
