// The GPT-2 model (tt/gpt2.h): configuration checks, the module tree and its initialization,
// the forward pass around the blocks, and the loss. The attention and the block are exercises
// (solutions/09_gpt2/gpt2_blocks.cc).
#include <cmath>
#include <sstream>
#include <tuple>
#include <utility>

#include "tt/dispatcher.h"
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

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t n_head_, Generator& gen)
    : Module("CausalSelfAttention"), n_head(n_head_) {
  c_attn = register_module("c_attn", std::make_shared<nn::Linear>(n_embd, 3 * n_embd, true, gen));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(n_embd, n_embd, true, gen));
}

namespace {

// y = x W^T + b of `layer` through ops.linear when set.
Tensor linear(const ModelOps& ops, const Tensor& x, nn::Linear& layer) {
  return ops.linear ? ops.linear(x, layer) : layer.forward(x);
}

// gelu(x W^T + b) of `layer` through ops.linear_gelu when set.
Tensor linear_gelu(const ModelOps& ops, const Tensor& x, nn::Linear& layer) {
  return ops.linear_gelu ? ops.linear_gelu(x, layer) : gelu(layer.forward(x));
}

// {residual + delta, ln(residual + delta)} through ops.residual_layernorm when set.
std::pair<Tensor, Tensor> residual_layernorm(const ModelOps& ops, const Tensor& residual,
                                             const Tensor& delta, nn::LayerNorm& ln) {
  if (ops.residual_layernorm) return ops.residual_layernorm(residual, delta, ln);
  Tensor r = add(residual, delta);
  Tensor y = ln.forward(r);
  return {std::move(r), std::move(y)};
}

}  // namespace

Tensor CausalSelfAttention::forward(const Tensor& x) {
  if (!ops) return c_proj->forward(causal_self_attention(c_attn->forward(x), n_head));
  const Tensor qkv = linear(*ops, x, *c_attn);
  const Tensor y =
      ops->attention ? ops->attention(qkv, n_head) : causal_self_attention(qkv, n_head);
  return linear(*ops, y, *c_proj);
}

Block::Block(const GPT2Config& config, Generator& gen) : Module("Block") {
  const int64_t C = config.n_embd;
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(C));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(C, config.n_head, gen));
  ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(C));
  mlp = register_module("mlp", std::make_shared<nn::MLP>(C, 4 * C, C, gen));
}

GPT2::GPT2(const GPT2Config& config, uint64_t seed) : Module("GPT2"), config_(config) {
  config_.validate();
  const int64_t C = config_.n_embd;
  // The layers draw their default initialization from `gen`; init_gpt2_ then redraws every
  // tensor with GPT-2's scheme from the same generator (all deterministic in the seed).
  Generator gen(seed);
  wte = register_module("wte", std::make_shared<nn::Embedding>(config_.padded_vocab_size, C, gen));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(config_.block_size, C, gen));
  h = register_module("h", std::make_shared<nn::ModuleList>());
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    blocks_.push_back(h->push_back(std::make_shared<Block>(config_, gen)).get());
  }
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(C));
  nn::init_gpt2_(*this, config_.n_layer, gen);
  set_ops(reference_model_ops());
}

void GPT2::set_ops(ModelOps ops) {
  ops_ = std::make_shared<const ModelOps>(std::move(ops));
  for (Block* block : blocks_) block->attn->ops = ops_;
}

Tensor GPT2::parameter(const std::string& name) const {
  for (const auto& [n, t] : named_parameters()) {
    if (n == name) return t;
  }
  TT_THROW("GPT2::parameter: no parameter named '", name, "' (names look like wte.weight, ",
           "h.0.attn.c_attn.weight, ln_f.bias)");
}

Tensor GPT2::embed(const Tensor& idx) {
  TT_CHECK(idx.defined() && idx.dim() == 2 && idx.dtype() == DType::kInt64,
           "GPT2::forward: idx must be int64 [B, T], got ",
           idx.defined() ? idx.describe() : std::string("an undefined tensor"));
  const int64_t T = idx.size(1);
  TT_CHECK(T >= 1 && T <= config_.block_size, "GPT2::forward: sequence length T = ", T,
           " must be in [1, block_size = ", config_.block_size, "]");
  if (ops_->embed) return ops_->embed(idx, *wte, *wpe);
  const Tensor pos = arange(0, static_cast<double>(T), 1, {DType::kInt64, idx.device()});
  return add(wte->forward(idx), wpe->forward(pos));  // [B, T, C] + [T, C]
}

Tensor GPT2::hidden(const Tensor& idx) {
  return run_blocks(embed(idx), 0, config_.n_layer);
}

Tensor GPT2::run_blocks(const Tensor& x0, int64_t begin, int64_t end) {
  TT_CHECK(0 <= begin && begin < end && end <= config_.n_layer, "GPT2::run_blocks: blocks [", begin,
           ", ", end, ") of a model of ", config_.n_layer, " (needs 0 <= begin < end <= n_layer)");
  const ModelOps& ops = *ops_;
  const bool head = end == config_.n_layer;  // ln_f after the last block
  if (ops.residual_layernorm || ops.linear || ops.linear_gelu || ops.recompute) {
    return fused_blocks(x0, begin, end);
  }
  Tensor x = x0;
  for (int64_t l = begin; l < end; ++l) x = blocks_[static_cast<std::size_t>(l)]->forward(x);
  return head ? ln_f->forward(x) : x;
}

Tensor GPT2::fused_blocks(const Tensor& x0, int64_t begin, int64_t end) {
  // llm.c's order: every residual add is fused with the LayerNorm that reads its result next
  // (ln_2 of the same block, ln_1 of the next one, ln_f after the last), so the residual
  // stream is read once per add. The same function as Block::forward on each block, then ln_f.
  // A range that stops before the last block (a pipeline stage) returns the residual stream
  // itself: its last add is still computed by the fused operation (with the next block's ln_1,
  // whose output is not used), so the stream is bit for bit what one process computes.
  const ModelOps& ops = *ops_;
  Tensor x = x0;
  Tensor ln = blocks_[static_cast<std::size_t>(begin)]->ln_1->forward(x);
  for (int64_t l = begin; l < end; ++l) {
    Block& block = *blocks_[static_cast<std::size_t>(l)];
    std::tie(x, ln) = residual_layernorm(ops, x, block.attn->forward(ln), *block.ln_2);
    const auto mlp = [&ops, &block](const Tensor& h) {
      return linear(ops, linear_gelu(ops, h, *block.mlp->c_fc), *block.mlp->c_proj);
    };
    const Tensor m = ops.recompute ? ops.recompute(mlp, ln) : mlp(ln);
    if (l + 1 == end && end < config_.n_layer && !ops.residual_layernorm) return add(x, m);
    nn::LayerNorm& next =
        l + 1 < config_.n_layer ? *blocks_[static_cast<std::size_t>(l) + 1]->ln_1 : *ln_f;
    std::tie(x, ln) = residual_layernorm(ops, x, m, next);
  }
  return end == config_.n_layer ? ln : x;
}

Tensor GPT2::forward(const Tensor& idx) {
  return logits(hidden(idx));
}

Tensor GPT2::logits(const Tensor& h) {
  Tensor x = h;
  // A mixed-precision set (chapter 11) ends the blocks in bfloat16: the logits are computed in
  // the head's float32 (a plain conversion: training goes through classifier_loss instead).
  if (x.dtype() != wte->weight.dtype()) {
    TT_CHECK(!x.requires_grad(), "GPT2::forward: the hidden states are ", dtype_name(x.dtype()),
             " (a mixed-precision ModelOps set) and the head is ", dtype_name(wte->weight.dtype()),
             ": logits with gradients go through loss() (ModelOps::classifier_loss); call "
             "forward under autograd::NoGradGuard");
    x = x.to(wte->weight.dtype());
  }
  // The head is tied to the token embedding; padded rows of wte (>= V) are never predicted.
  const Tensor& w = wte->weight;
  const Tensor head =
      config_.padded_vocab_size == config_.vocab_size ? w : slice(w, 0, 0, config_.vocab_size);
  return matmul(x, transpose(head, 0, 1));
}

Tensor GPT2::loss(const Tensor& idx, const Tensor& targets) {
  TT_CHECK(targets.defined() && targets.shape() == idx.shape(), "GPT2::loss: targets ",
           targets.defined() ? targets.describe() : std::string("(undefined)"),
           " must have the shape of idx ", idx.describe());
  return loss_from_hidden(hidden(idx), targets);
}

Tensor GPT2::loss_from_hidden(const Tensor& h, const Tensor& targets) {
  TT_CHECK(h.defined() && h.dim() == 3 && targets.defined() && targets.dim() == 2,
           "GPT2::loss_from_hidden: hidden states ",
           h.defined() ? h.describe() : std::string("(undefined)"), " and targets ",
           targets.defined() ? targets.describe() : std::string("(undefined)"),
           " must be [B, T, C] and [B, T]");
  // A classifier_loss hook may be given this rank's part of the tokens (chapter 13's sequence
  // parallelism: h is [B, T / tp, C] or [B / tp, T, C]) and checks the shapes itself.
  if (ops_->classifier_loss) {
    return ops_->classifier_loss(h, wte->weight, config_.vocab_size, targets);
  }
  TT_CHECK(h.size(0) == targets.size(0) && h.size(1) == targets.size(1),
           "GPT2::loss_from_hidden: hidden states ", h.describe(), " and targets ",
           targets.describe(), " must be [B, T, C] and [B, T]");
  return cross_entropy(view(logits(h), {-1, config_.vocab_size}), targets.reshape({-1}));
}

std::vector<std::string> missing_training_kernels(DeviceType device) {
  static const char* const kOps[] = {"embedding_forward",
                                     "embedding_backward",
                                     "add",
                                     "mul",
                                     "mul_scalar",
                                     "sum",
                                     "matmul",
                                     "layernorm_forward",
                                     "layernorm_backward",
                                     "gelu_forward",
                                     "gelu_backward",
                                     "softmax_forward",
                                     "softmax_backward",
                                     "masked_fill_forward",
                                     "masked_fill_backward",
                                     "cross_entropy_forward",
                                     "cross_entropy_backward",
                                     "adamw_step",
                                     "sum_of_squares",
                                     "scale_"};
  std::vector<std::string> missing;
  for (const char* op : kOps) {
    if (!KernelRegistry::instance().has(op, device)) missing.emplace_back(op);
  }
  return missing;
}

}  // namespace tt::gpt2
