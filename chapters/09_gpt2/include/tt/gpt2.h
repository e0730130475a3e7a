/// @file gpt2.h
/// @brief The GPT-2 model: configuration, named parameters (llm.c-compatible), forward pass
/// (causal self-attention, pre-norm blocks, GELU MLP, tied language-model head), the loss,
/// and the llm.c checkpoint importer/exporter.
///
/// Shapes: B batch, T sequence length, C channels, NH heads of size hs = C / NH, V vocabulary.
/// @code
///   idx [B, T] --wte--> tok [B, T, C]   + wpe[0..T) [T, C]          (embeddings)
///   x = tok + pos
///   for each of L blocks:                                           (pre-norm residuals)
///     x = x + attn_proj( attention( c_attn( ln_1(x) ) ) )
///     x = x + mlp_proj( gelu( c_fc( ln_2(x) ) ) )
///   logits [B, T, V] = ln_f(x) @ wte[0..V)^T                        (tied lm_head)
/// @endcode
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tt/gpt2_ops.h"
#include "tt/layers.h"
#include "tt/module.h"
#include "tt/tensor.h"

namespace tt::gpt2 {

/// Hyperparameters of a GPT-2 model (llm.c's header fields).
struct GPT2Config {
  int64_t block_size = 1024;          ///< maxT: longest sequence (rows of wpe)
  int64_t vocab_size = 50257;         ///< V: tokens the model predicts
  int64_t padded_vocab_size = 50304;  ///< Vp >= V: rows of wte (padded for fast kernels)
  int64_t n_layer = 12;               ///< L: transformer blocks
  int64_t n_head = 12;                ///< NH: attention heads
  int64_t n_embd = 768;               ///< C: channels (must be a multiple of n_head)

  /// Throws tt::Error naming the field when a size is not positive, C % NH != 0 or Vp < V.
  void validate() const;
  /// "L=12 NH=12 C=768 V=50257 Vp=50304 maxT=1024".
  std::string str() const;
};

/// Causal self-attention of qkv [B, T, 3C] (q | k | v along the last dim) with `n_head` heads,
/// before the output projection; returns y [B, T, C] (exercise ch09.1):
/// \f[ y_h = \mathrm{softmax}\!\left(\frac{q_h k_h^\top}{\sqrt{hs}} + M\right) v_h, \qquad
///     M_{ij} = -\infty \text{ for } j > i, \f]
/// heads split from and merged back into C. Throws tt::Error when qkv is not [B, T, 3C] with C
/// divisible by n_head.
Tensor causal_self_attention(const Tensor& qkv, int64_t n_head);

/// The attention layer: c_attn (C -> 3C), causal_self_attention, c_proj (C -> C).
class CausalSelfAttention : public nn::Module {
 public:
  /// Layers for C = n_embd channels in n_head heads, weights drawn from `gen` (GPT2 redraws
  /// them with its own initialization).
  CausalSelfAttention(int64_t n_embd, int64_t n_head, Generator& gen);
  /// c_proj(causal_self_attention(c_attn(x), n_head)) for x [B, T, C], each step through
  /// `ops` when it provides one (ops->linear, ops->attention), else the reference.
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<nn::Linear> c_attn;  ///< [3C, C]: rows q | k | v
  std::shared_ptr<nn::Linear> c_proj;  ///< [C, C]: output projection (a residual projection)
  int64_t n_head;                      ///< number of heads
  /// The operations to use (GPT2::set_ops hands its set down); null: the reference ones.
  std::shared_ptr<const ModelOps> ops;
};

/// A pre-norm transformer block.
class Block : public nn::Module {
 public:
  /// The block of a model with `config`, weights drawn from `gen`.
  Block(const GPT2Config& config, Generator& gen);
  /// x + attn(ln_1(x)), then x + mlp(ln_2(x)) (exercise ch09.2): each sub-layer reads a
  /// normalized copy of the residual stream and adds its output back to it.
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<nn::LayerNorm> ln_1;        ///< before attention
  std::shared_ptr<CausalSelfAttention> attn;  ///< attention
  std::shared_ptr<nn::LayerNorm> ln_2;        ///< before the MLP
  std::shared_ptr<nn::MLP> mlp;               ///< c_fc (C -> 4C), GELU, c_proj (4C -> C)
};

/// A GPT-2 language model (an nn::Module): named parameters wte.weight, wpe.weight,
/// h.0.ln_1.weight, h.0.attn.c_attn.weight, ..., ln_f.bias, in llm.c's order by layer.
/// lm_head is wte.weight itself (tied), so it is not a separate parameter.
class GPT2 : public nn::Module {
 public:
  /// A model with GPT-2's initialization drawn from Generator(seed) (nn::init_gpt2_):
  /// N(0, 0.02) for matrices and embeddings, N(0, 0.02 / sqrt(2L)) for the residual projections
  /// (c_proj), zero biases, unit LayerNorm weights. float32 on the CPU; to(device) moves it.
  explicit GPT2(const GPT2Config& config, uint64_t seed = 1337);

  /// The configuration.
  const GPT2Config& config() const { return config_; }
  /// The parameter called `name`; throws tt::Error when there is none.
  Tensor parameter(const std::string& name) const;
  /// Device of the parameters.
  Device device() const { return wte->weight.device(); }

  /// Makes the forward pass and the loss use `ops` (e.g. model_ops("fast")); an empty member
  /// keeps the reference composition for that operation. The blocks' attention layers share
  /// the set. Parameters are unchanged, so the set may be switched at any time.
  void set_ops(ModelOps ops);
  /// The operations in use (reference_model_ops() until set_ops is called).
  const ModelOps& ops() const { return *ops_; }

  /// Logits [B, T, V] for int64 tokens idx [B, T] (T <= block_size, tokens < Vp). With a
  /// mixed-precision set (bfloat16 hidden states) only under autograd::NoGradGuard: the logits
  /// are then computed in float32 from the converted hidden states (training uses loss()).
  Tensor forward(const Tensor& idx) override;
  /// ln_f of the last block's output, [B, T, C]: the input of the language-model head.
  /// With ops().residual_layernorm, ops().linear or ops().linear_gelu set, the blocks run as
  /// one llm.c-style loop (each residual add fused with the next LayerNorm, the last with
  /// ln_f) instead of Block::forward; otherwise Block::forward, then ln_f.
  Tensor hidden(const Tensor& idx);
  /// Blocks [begin, end) on the residual stream x [B, T, C] (embed()'s output for begin = 0),
  /// run as hidden() runs them; with end = n_layer followed by ln_f (hidden(idx) is
  /// run_blocks(embed(idx), 0, n_layer)), otherwise the residual stream after block end - 1,
  /// which the next pipeline stage continues from (chapter 14). Throws tt::Error unless
  /// 0 <= begin < end <= n_layer.
  Tensor run_blocks(const Tensor& x, int64_t begin, int64_t end);
  /// Mean cross-entropy of forward(idx) against int64 targets [B, T] (a 0-d tensor), through
  /// ops().classifier_loss on hidden(idx) when set (the logits need not exist then).
  Tensor loss(const Tensor& idx, const Tensor& targets);

  /// The input of the first block for int64 tokens idx [B, T]: wte(idx) + wpe(0..T), [B, T, C],
  /// through ops().embed when set (chapter 13's vocab-parallel embedding); throws tt::Error for
  /// another idx or T > block_size. A pipeline's first stage runs it.
  Tensor embed(const Tensor& idx);
  /// Logits [B, T, V] of hidden states h [B, T, C] (ln_f's output): the tied head (see
  /// forward()).
  Tensor logits(const Tensor& h);
  /// Mean cross-entropy of the head on hidden states h [B, T, C] (ln_f's output) against int64
  /// targets [B, T], through ops().classifier_loss when set: loss(idx, targets) is
  /// loss_from_hidden(hidden(idx), targets). A pipeline's last stage runs it.
  Tensor loss_from_hidden(const Tensor& h, const Tensor& targets);

  std::shared_ptr<nn::Embedding> wte;   ///< token embedding [Vp, C], also the lm_head
  std::shared_ptr<nn::Embedding> wpe;   ///< position embedding [maxT, C]
  std::shared_ptr<nn::ModuleList> h;    ///< the L blocks
  std::shared_ptr<nn::LayerNorm> ln_f;  ///< final LayerNorm

 private:
  /// Blocks [begin, end) (and ln_f when end = n_layer) through the ops, llm.c's loop (see
  /// hidden() and run_blocks()).
  Tensor fused_blocks(const Tensor& x, int64_t begin, int64_t end);

  GPT2Config config_;
  std::vector<Block*> blocks_;
  std::shared_ptr<const ModelOps> ops_;
};

/// The kernels a GPT-2 training step calls (forward, backward, AdamW, clipping) that have no
/// registration for `device`: empty when the model can train there. train_gpt2 uses it to pick
/// a device ("auto" falls back to the CPU while the CUDA chapters lack some kernels).
std::vector<std::string> missing_training_kernels(DeviceType device);

// ----- llm.c checkpoints -----------------------------------------------------------------------

/// Magic number of llm.c's model files (the first int32 of the header).
inline constexpr int32_t kLlmcMagic = 20240326;
/// Header version of float32 model files (version 5 holds bfloat16, not supported here).
inline constexpr int32_t kLlmcVersionFp32 = 3;
/// Number of int32 slots of the header.
inline constexpr int64_t kLlmcHeaderInts = 256;

/// Where one parameter lives in an llm.c file: llm.c stores each parameter kind stacked over
/// layers (all L ln_1 weights, then all L ln_1 biases, ...), so the per-layer tensor
/// "h.l.<kind>" starts at the kind's offset plus l times its size.
struct LlmcSlot {
  std::string name;    ///< our parameter name, e.g. "h.1.mlp.c_fc.bias"
  int64_t offset = 0;  ///< first element, counted in floats after the header
  Shape shape;         ///< shape of our tensor
};

/// The file layout of a model with `config` (exercise ch09.5): one slot per parameter, in our
/// named_parameters() order, with offsets following llm.c's order wte (Vp*C), wpe (maxT*C),
/// ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb (each
/// stacked over L layers), lnfw, lnfb.
std::vector<LlmcSlot> llmc_layout(const GPT2Config& config);

/// Number of floats the parameters of `config` take in an llm.c file. Throws tt::Error when
/// the count does not fit int64 (sizes from a hostile header).
int64_t llmc_num_floats(const GPT2Config& config);

/// Checks the header of an llm.c model file of `bytes.size()` bytes (only the first 1024 bytes
/// are read): magic, version 3 (fp32), positive sizes, and that the length is exactly the
/// header plus the parameters. Throws tt::Error naming `source` and what is wrong.
GPT2Config parse_llmc_header(std::span<const std::byte> bytes, const std::string& source);

/// parse_llmc_header() of the file at `path` (memory-mapped: nothing is read into memory).
GPT2Config read_llmc_header(const std::string& path);

/// A new model (on the CPU) from the bytes of an llm.c float32 model file; the header is
/// checked (parse_llmc_header) before anything is allocated.
std::unique_ptr<GPT2> parse_llmc(std::span<const std::byte> bytes, const std::string& source);

/// Loads an llm.c float32 model file (e.g. gpt2_124M.bin) into a new model (on the CPU).
std::unique_ptr<GPT2> load_llmc(const std::string& path);

/// The bytes of `model` as an llm.c float32 model file (version 3).
std::vector<std::byte> serialize_llmc(const GPT2& model);

/// Writes `model` as an llm.c float32 model file (version 3) that llm.c can load.
void save_llmc(const GPT2& model, const std::string& path);

}  // namespace tt::gpt2
