// Hugging Face interop of the LLaMA model (tt/llama.h): config.json and the model directory.
#include <filesystem>
#include <fstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "tt/checkpoint.h"
#include "tt/file.h"
#include "tt/llama.h"

namespace tt::llama {

namespace {

using json = nlohmann::json;

/// Reads key `key` of `j` into `out` when present and not null; a wrong type is an error
/// naming the key and the source.
template <typename T>
void get(const json& j, const char* key, T& out, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return;
  const json& v = j[key];
  bool ok = false;
  if constexpr (std::is_same_v<T, bool>) {
    ok = v.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    ok = v.is_number_integer();
  } else if constexpr (std::is_floating_point_v<T>) {
    ok = v.is_number();
  } else {
    ok = v.is_string();
  }
  TT_CHECK(ok, "config.json '", source, "': \"", key, "\" has the wrong type: ", v.dump());
  out = v.get<T>();
}

}  // namespace

LlamaConfig LlamaConfig::from_hf_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    TT_THROW("config.json '", source, "': not valid JSON: ", e.what());
  }
  TT_CHECK(j.is_object(), "config.json '", source, "': not a JSON object");
  std::string model_type = "llama", act = "silu";
  get(j, "model_type", model_type, source);
  TT_CHECK(model_type == "llama", "config.json '", source, "': model_type '", model_type,
           "' is not 'llama'");
  get(j, "hidden_act", act, source);
  TT_CHECK(act == "silu", "config.json '", source, "': hidden_act '", act,
           "' is not 'silu' (SwiGLU)");
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    bool bias = false;
    get(j, key, bias, source);
    TT_CHECK(!bias, "config.json '", source, "': \"", key, "\": true is not supported");
  }
  LlamaConfig c;
  get(j, "vocab_size", c.vocab_size, source);
  get(j, "hidden_size", c.dim, source);
  get(j, "num_hidden_layers", c.n_layers, source);
  get(j, "num_attention_heads", c.n_heads, source);
  c.n_kv_heads = c.n_heads;  // transformers' default when the key is absent
  get(j, "num_key_value_heads", c.n_kv_heads, source);
  get(j, "intermediate_size", c.ffn_dim, source);
  get(j, "max_position_embeddings", c.max_seq_len, source);
  get(j, "rope_theta", c.rope_theta, source);
  get(j, "rms_norm_eps", c.norm_eps, source);
  get(j, "tie_word_embeddings", c.tie_embeddings, source);
  get(j, "initializer_range", c.init_std, source);
  c.bos_token_id = -1;
  get(j, "bos_token_id", c.bos_token_id, source);
  if (j.contains("eos_token_id") && j["eos_token_id"].is_null()) c.eos_token_ids.clear();
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const json& e = j["eos_token_id"];
    c.eos_token_ids.clear();
    if (e.is_array()) {
      for (const json& id : e) {
        TT_CHECK(id.is_number_integer(), "config.json '", source,
                 "': \"eos_token_id\" holds a non-integer: ", e.dump());
        c.eos_token_ids.push_back(id.get<int64_t>());
      }
    } else {
      TT_CHECK(e.is_number_integer(), "config.json '", source,
               "': \"eos_token_id\" is not an integer or a list of them: ", e.dump());
      c.eos_token_ids.push_back(e.get<int64_t>());
    }
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    int64_t hd = 0;
    get(j, "head_dim", hd, source);
    TT_CHECK(c.n_heads > 0 && hd == c.dim / c.n_heads, "config.json '", source, "': head_dim ", hd,
             " differs from hidden_size / num_attention_heads (not supported)");
  }
  // transformers 4.x: "rope_theta" and "rope_scaling"; 5.x: one "rope_parameters" object with
  // "rope_theta", "rope_type" and the scaling's fields.
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    const json& r = j[key];
    TT_CHECK(r.is_object(), "config.json '", source, "': \"", key, "\" is not an object");
    get(r, "rope_theta", c.rope_theta, source);
    get(r, "type", c.rope_scaling.type, source);
    get(r, "rope_type", c.rope_scaling.type, source);
    get(r, "factor", c.rope_scaling.factor, source);
    get(r, "low_freq_factor", c.rope_scaling.low_freq_factor, source);
    get(r, "high_freq_factor", c.rope_scaling.high_freq_factor, source);
    get(r, "original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings,
        source);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    TT_THROW("config.json '", source, "': ", e.what());
  }
  return c;
}

std::string LlamaConfig::to_hf_json() const {
  json j = {{"architectures", json::array({"LlamaForCausalLM"})},
            {"model_type", "llama"},
            {"attention_bias", false},
            {"attention_dropout", 0.0},
            {"mlp_bias", false},
            {"hidden_act", "silu"},
            {"vocab_size", vocab_size},
            {"hidden_size", dim},
            {"num_hidden_layers", n_layers},
            {"num_attention_heads", n_heads},
            {"num_key_value_heads", n_kv_heads},
            {"head_dim", head_dim()},
            {"intermediate_size", ffn_dim},
            {"max_position_embeddings", max_seq_len},
            {"rope_theta", rope_theta},
            {"rms_norm_eps", norm_eps},
            {"tie_word_embeddings", tie_embeddings},
            {"initializer_range", init_std},
            {"pretraining_tp", 1},
            {"use_cache", true},
            {"torch_dtype", "float32"}};
  j["bos_token_id"] = bos_token_id >= 0 ? json(bos_token_id) : json(nullptr);
  if (eos_token_ids.size() == 1) {
    j["eos_token_id"] = eos_token_ids[0];
  } else if (eos_token_ids.empty()) {
    j["eos_token_id"] = nullptr;
  } else {
    j["eos_token_id"] = eos_token_ids;
  }
  if (rope_scaling.type == "default") {
    j["rope_scaling"] = nullptr;
  } else {
    json r = {{"rope_type", rope_scaling.type}, {"factor", rope_scaling.factor}};
    if (rope_scaling.type == "llama3") {
      r["low_freq_factor"] = rope_scaling.low_freq_factor;
      r["high_freq_factor"] = rope_scaling.high_freq_factor;
      r["original_max_position_embeddings"] = rope_scaling.original_max_position_embeddings;
    }
    j["rope_scaling"] = r;
  }
  return j.dump(2) + "\n";
}

std::unique_ptr<Llama> load_hf(const std::string& dir, DType dtype) {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  TT_CHECK(
      !fs::exists(root / "model.safetensors.index.json") || fs::exists(root / "model.safetensors"),
      "load_hf: '", dir,
      "' holds a sharded model (model.safetensors.index.json); merge the shards into one "
      "model.safetensors first");
  const std::string config_path = (root / "config.json").string();
  const LlamaConfig config =
      LlamaConfig::from_hf_json(read_whole_file(config_path, "config.json"), config_path);
  auto model = std::make_unique<Llama>(config, 1337, TensorOptions{dtype, Device::cpu()});
  const std::string weights = (root / "model.safetensors").string();
  nn::StateDict file = safetensors::load(weights);
  std::vector<std::string> ignore;
  for (const auto& [name, t] : file) {
    if (name.ends_with("rotary_emb.inv_freq") ||
        (config.tie_embeddings && name == "lm_head.weight")) {
      ignore.push_back(name);
    }
  }
  safetensors::load_into(model->state_dict(), file, weights, true, ignore);
  return model;
}

void save_hf(const Llama& model, const std::string& dir, safetensors::StoreAs store) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  const std::string text = model.config().to_hf_json();
  ckpt::write_file_atomic(
      (fs::path(dir) / "config.json").string(),
      std::vector<std::byte>(reinterpret_cast<const std::byte*>(text.data()),
                             reinterpret_cast<const std::byte*>(text.data()) + text.size()));
  safetensors::save((fs::path(dir) / "model.safetensors").string(), model.state_dict(), store,
                    {{"format", "pt"}});
}

}  // namespace tt::llama
