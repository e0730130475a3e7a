// The GPT-2 model (tt/gpt2.h): configuration checks, parameter creation and initialization,
// the forward pass around the blocks, the loss, and device moves. The attention and the block
// are exercises (solutions/08_gpt2/gpt2_blocks.cc).
#include <cmath>
#include <sstream>

#include "tt/functional.h"
#include "tt/gpt2.h"

namespace tt::gpt2 {

void GPT2Config::validate() const {
  auto positive = [](int64_t v, const char* what) {
    TT_CHECK(v > 0, "GPT2Config: ", what, " must be positive, got ", v);
  };
  positive(block_size, "block_size (maxT)");
  positive(vocab_size, "vocab_size (V)");
  positive(padded_vocab_size, "padded_vocab_size (Vp)");
  positive(n_layer, "n_layer (L)");
  positive(n_head, "n_head (NH)");
  positive(n_embd, "n_embd (C)");
  TT_CHECK(n_embd % n_head == 0, "GPT2Config: n_embd (C) = ", n_embd,
           " is not divisible by n_head (NH) = ", n_head);
  TT_CHECK(padded_vocab_size >= vocab_size,
           "GPT2Config: padded_vocab_size (Vp) = ", padded_vocab_size,
           " is smaller than vocab_size (V) = ", vocab_size);
}

std::string GPT2Config::str() const {
  std::ostringstream os;
  os << "L=" << n_layer << " NH=" << n_head << " C=" << n_embd << " V=" << vocab_size
     << " Vp=" << padded_vocab_size << " maxT=" << block_size;
  return os.str();
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  TT_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: x ",
           x.describe(), " does not fit weight ", weight.describe(),
           " (expected x [..., in] and weight [out, in])");
  return add(matmul(x, transpose(weight, 0, 1)), bias);
}

GPT2::GPT2(const GPT2Config& config, uint64_t seed) : config_(config) {
  config_.validate();
  Generator gen(seed);
  const int64_t C = config_.n_embd;
  const double std = 0.02;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  auto add_param = [&](std::string name, const Shape& shape, double scale, double fill) {
    Tensor t = scale > 0 ? mul(randn(shape, gen), scale) : full(shape, fill);
    t.set_requires_grad(true);
    params_.push_back({std::move(name), t});
  };
  add_param("wte.weight", {config_.padded_vocab_size, C}, std, 0);
  add_param("wpe.weight", {config_.block_size, C}, std, 0);
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    add_param(h + "ln_1.weight", {C}, 0, 1.0);
    add_param(h + "ln_1.bias", {C}, 0, 0.0);
    add_param(h + "attn.c_attn.weight", {3 * C, C}, std, 0);
    add_param(h + "attn.c_attn.bias", {3 * C}, 0, 0.0);
    add_param(h + "attn.c_proj.weight", {C, C}, residual_std, 0);
    add_param(h + "attn.c_proj.bias", {C}, 0, 0.0);
    add_param(h + "ln_2.weight", {C}, 0, 1.0);
    add_param(h + "ln_2.bias", {C}, 0, 0.0);
    add_param(h + "mlp.c_fc.weight", {4 * C, C}, std, 0);
    add_param(h + "mlp.c_fc.bias", {4 * C}, 0, 0.0);
    add_param(h + "mlp.c_proj.weight", {C, 4 * C}, residual_std, 0);
    add_param(h + "mlp.c_proj.bias", {C}, 0, 0.0);
  }
  add_param("ln_f.weight", {C}, 0, 1.0);
  add_param("ln_f.bias", {C}, 0, 0.0);
  bind_blocks();
}

void GPT2::bind_blocks() {
  wte_ = parameter("wte.weight");
  wpe_ = parameter("wpe.weight");
  ln_f_weight_ = parameter("ln_f.weight");
  ln_f_bias_ = parameter("ln_f.bias");
  blocks_.clear();
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    blocks_.push_back({parameter(h + "ln_1.weight"), parameter(h + "ln_1.bias"),
                       parameter(h + "attn.c_attn.weight"), parameter(h + "attn.c_attn.bias"),
                       parameter(h + "attn.c_proj.weight"), parameter(h + "attn.c_proj.bias"),
                       parameter(h + "ln_2.weight"), parameter(h + "ln_2.bias"),
                       parameter(h + "mlp.c_fc.weight"), parameter(h + "mlp.c_fc.bias"),
                       parameter(h + "mlp.c_proj.weight"), parameter(h + "mlp.c_proj.bias")});
  }
}

const Tensor& GPT2::parameter(const std::string& name) const {
  for (const auto& p : params_) {
    if (p.name == name) return p.tensor;
  }
  TT_THROW("GPT2::parameter: no parameter named '", name, "' (names look like wte.weight, ",
           "h.0.attn.c_attn.weight, ln_f.bias)");
}

int64_t GPT2::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p.tensor.numel();
  return n;
}

Tensor GPT2::forward(const Tensor& idx) const {
  TT_CHECK(idx.dim() == 2 && idx.dtype() == DType::kInt64,
           "GPT2::forward: idx must be int64 [B, T], got ", idx.describe());
  const int64_t T = idx.size(1);
  TT_CHECK(T <= config_.block_size, "GPT2::forward: sequence length T = ", T,
           " exceeds block_size = ", config_.block_size);
  const Tensor pos = arange(0, static_cast<double>(T), 1, {DType::kInt64, idx.device()});
  Tensor x = add(embedding(wte_, idx), embedding(wpe_, pos));  // [B, T, C] + [T, C]
  for (const auto& block : blocks_) x = block_forward(block, x, config_.n_head);
  x = layernorm(x, ln_f_weight_, ln_f_bias_);
  // The head is tied to the token embedding; padded rows of wte (>= V) are not predicted.
  const Tensor head = config_.padded_vocab_size == config_.vocab_size
                          ? wte_
                          : slice(wte_, 0, 0, config_.vocab_size);
  return matmul(x, transpose(head, 0, 1));
}

Tensor GPT2::loss(const Tensor& idx, const Tensor& targets) const {
  TT_CHECK(targets.shape() == idx.shape(), "GPT2::loss: targets ", targets.describe(),
           " must have the shape of idx ", idx.describe());
  const Tensor logits = forward(idx);
  return cross_entropy(view(logits, {-1, config_.vocab_size}), targets.reshape({-1}));
}

void GPT2::to(Device device) {
  for (auto& p : params_) {
    if (p.tensor.device() == device) continue;
    Tensor moved = p.tensor.to(device);
    p.tensor.storage()->swap(*moved.storage());
    p.tensor.set_grad(Tensor());
  }
}

Device GPT2::device() const {
  return wte_.device();
}

void GPT2::zero_grad() const {
  for (const auto& p : params_) p.tensor.set_grad(Tensor());
}

}  // namespace tt::gpt2
