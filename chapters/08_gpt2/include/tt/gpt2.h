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

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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

/// One parameter with its name ("wte.weight", "h.3.attn.c_attn.weight", ...).
struct NamedTensor {
  std::string name;  ///< dotted name, as in GPT-2's PyTorch/HF checkpoints
  Tensor tensor;     ///< the parameter (a leaf that requires grad)
};

/// The parameters of one transformer block (PyTorch Linear layout: weight [out, in]).
struct BlockParams {
  Tensor ln_1_weight;     ///< [C]
  Tensor ln_1_bias;       ///< [C]
  Tensor attn_weight;     ///< c_attn: [3C, C], rows q | k | v
  Tensor attn_bias;       ///< [3C]
  Tensor proj_weight;     ///< attention output projection c_proj: [C, C]
  Tensor proj_bias;       ///< [C]
  Tensor ln_2_weight;     ///< [C]
  Tensor ln_2_bias;       ///< [C]
  Tensor fc_weight;       ///< mlp.c_fc: [4C, C]
  Tensor fc_bias;         ///< [4C]
  Tensor fc_proj_weight;  ///< mlp.c_proj: [C, 4C]
  Tensor fc_proj_bias;    ///< [C]
};

/// y = x @ weight^T + bias for x [..., in], weight [out, in], bias [out] (PyTorch's F.linear),
/// differentiable. The transposed weight is a view; the matmul reads it column-major.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

/// Causal self-attention of qkv [B, T, 3C] (q | k | v along the last dim) with `n_head` heads,
/// before the output projection; returns y [B, T, C] (exercise ch08.5):
/// \f[ y_h = \mathrm{softmax}\!\left(\frac{q_h k_h^\top}{\sqrt{hs}} + M\right) v_h, \qquad
///     M_{ij} = -\infty \text{ for } j > i, \f]
/// heads split from and merged back into C. Throws tt::Error when 3C is not divisible into
/// n_head heads.
Tensor causal_self_attention(const Tensor& qkv, int64_t n_head);

/// One pre-norm transformer block on x [B, T, C] (exercise ch08.6):
/// \f$ x \mathrel{+}= \mathrm{proj}(\mathrm{attn}(\mathrm{ln_1}(x))) \f$, then
/// \f$ x \mathrel{+}= \mathrm{fc\_proj}(\mathrm{gelu}(\mathrm{fc}(\mathrm{ln_2}(x)))) \f$.
Tensor block_forward(const BlockParams& p, const Tensor& x, int64_t n_head);

/// A GPT-2 language model. Parameters are created on the CPU in float32; to(device) moves them.
class GPT2 {
 public:
  /// A model with GPT-2's initialization, seeded: N(0, 0.02) for matrices and embeddings,
  /// N(0, 0.02 / sqrt(2L)) for the two residual projections, zero biases, unit LayerNorm
  /// weights.
  GPT2(const GPT2Config& config, uint64_t seed = 1337);

  /// The configuration.
  const GPT2Config& config() const { return config_; }
  /// Every parameter with its name, in llm.c's order by layer (wte, wpe, h.0.ln_1.weight, ...,
  /// ln_f.bias). lm_head is not listed: it is wte (tied weights).
  const std::vector<NamedTensor>& named_parameters() const { return params_; }
  /// The parameter called `name`; throws tt::Error listing a few names when there is none.
  const Tensor& parameter(const std::string& name) const;
  /// Total number of parameter elements (wte counted once).
  int64_t num_parameters() const;
  /// The parameters of block `l`.
  const BlockParams& block(int64_t l) const { return blocks_.at(static_cast<std::size_t>(l)); }

  /// Logits [B, T, V] for int64 tokens idx [B, T] (T <= block_size, tokens < V).
  Tensor forward(const Tensor& idx) const;
  /// Mean cross-entropy of forward(idx) against int64 targets [B, T] (a 0-d tensor).
  Tensor loss(const Tensor& idx, const Tensor& targets) const;

  /// Moves every parameter to `device` in place (the tensors keep their identity).
  void to(Device device);
  /// Device of the parameters.
  Device device() const;
  /// Clears every parameter's gradient.
  void zero_grad() const;

 private:
  void bind_blocks();
  GPT2Config config_;
  std::vector<NamedTensor> params_;
  std::vector<BlockParams> blocks_;
  Tensor wte_, wpe_, ln_f_weight_, ln_f_bias_;
};

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

/// The file layout of a model with `config` (exercise ch08.9): one slot per parameter, in our
/// named_parameters() order, with offsets following llm.c's order wte (Vp*C), wpe (maxT*C),
/// ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb (each
/// stacked over L layers), lnfw, lnfb.
std::vector<LlmcSlot> llmc_layout(const GPT2Config& config);

/// Number of floats the parameters of `config` take in an llm.c file.
int64_t llmc_num_floats(const GPT2Config& config);

/// Reads the header of an llm.c model file and checks it: magic, version 3 (fp32), positive
/// sizes, and that the file length is exactly the header plus the parameters. Throws tt::Error
/// naming the file and what is wrong.
GPT2Config read_llmc_header(const std::string& path);

/// Loads an llm.c float32 model file (e.g. gpt2_124M.bin) into a new model.
GPT2 load_llmc(const std::string& path);

/// Writes `model` as an llm.c float32 model file (version 3) that llm.c can load.
void save_llmc(const GPT2& model, const std::string& path);

}  // namespace tt::gpt2
