/// @file llama.h
/// @brief A LLaMA-family decoder (chapter 15): RMSNorm, RoPE, SwiGLU MLP and grouped-query
/// attention, with Hugging Face's parameter names, config.json and safetensors files, and a
/// preallocated KV cache for inference.
///
/// The module tree mirrors transformers' LlamaForCausalLM, so named_parameters() are the names
/// of its state dict (no mapping table):
///
/// | parameter | shape |
/// |---|---|
/// | model.embed_tokens.weight | [V, C] |
/// | model.layers.L.input_layernorm.weight | [C] |
/// | model.layers.L.self_attn.q_proj.weight | [NH * hs, C] |
/// | model.layers.L.self_attn.k_proj.weight, v_proj.weight | [NKV * hs, C] |
/// | model.layers.L.self_attn.o_proj.weight | [C, NH * hs] |
/// | model.layers.L.post_attention_layernorm.weight | [C] |
/// | model.layers.L.mlp.gate_proj.weight, up_proj.weight | [F, C] |
/// | model.layers.L.mlp.down_proj.weight | [C, F] |
/// | model.norm.weight | [C] |
/// | lm_head.weight (absent when tied to embed_tokens) | [V, C] |
///
/// A block: h = x + o_proj(attn(rope(q), rope(k), v)) on input_layernorm(x), then
/// y = h + down_proj(silu(gate_proj(n)) * up_proj(n)) with n = post_attention_layernorm(h).
///
/// **bfloat16 inference.** A Llama built (or loaded) with bfloat16 parameters runs forward,
/// forward_cached and forward_static on CUDA through a path of its own, made for decoding, which
/// is a bandwidth problem (every weight is read once per step): the q/k/v and the gate/up weights
/// are packed into one buffer each on first use (one GEMM each: chapter 10's cuBLASLt
/// "matmul_lt_gemm", bfloat16 operands, float32 accumulation), o_proj and down_proj add into the
/// bfloat16 residual stream in their GEMM's epilogue (beta = 1), RMSNorm, RoPE, SwiGLU and the KV
/// cache (bfloat16) compute in float32, and the logits come out of the last GEMM in float32. There
/// is no autograd graph: loss() refuses bfloat16, and the CPU has no bfloat16 kernels.
///
/// **bfloat16 mixed-precision training.** A float32 Llama with set_mixed_precision(true) trains
/// under chapter 11's policy (tt/mixed_precision.h), on the CPU (emulated) and on CUDA: the
/// parameters stay float32 (the masters, which a MasterWeightAdamW updates, writing the bfloat16
/// copies the GEMMs read: tt/master_weights.h); the residual stream, the embedding, RMSNorm,
/// RoPE, SwiGLU and the loss's softmax are float32; the q/k/v/o and gate/up/down projections are
/// linear_bf16 (bfloat16 inputs and outputs, float32 accumulation, float32 weight gradients),
/// attention is gqa_attention on bfloat16 q, k, v, and the head and loss are
/// classifier_loss_bf16. Each dtype change is chapter 11's differentiable tt::to_dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tt/layers.h"
#include "tt/llama_ops.h"
#include "tt/module.h"
#include "tt/safetensors.h"
#include "tt/tensor.h"

namespace tt::llama {

/// The shape of a LLaMA model. The comments give the key of Hugging Face's config.json.
struct LlamaConfig {
  int64_t vocab_size = 32000;   ///< V ("vocab_size")
  int64_t dim = 4096;           ///< C ("hidden_size")
  int64_t n_layers = 32;        ///< L ("num_hidden_layers")
  int64_t n_heads = 32;         ///< NH ("num_attention_heads")
  int64_t n_kv_heads = 32;      ///< NKV ("num_key_value_heads"), divides NH
  int64_t ffn_dim = 11008;      ///< F ("intermediate_size")
  int64_t max_seq_len = 2048;   ///< longest position ("max_position_embeddings")
  double rope_theta = 10000.0;  ///< RoPE base ("rope_theta")
  RopeScaling rope_scaling;     ///< ("rope_scaling"; null is type "default")
  double norm_eps = 1e-6;       ///< RMSNorm epsilon ("rms_norm_eps")
  bool tie_embeddings = false;  ///< lm_head shares embed_tokens ("tie_word_embeddings")
  double init_std = 0.02;       ///< std of the normal init ("initializer_range")
  int64_t bos_token_id = 1;     ///< ("bos_token_id"; -1 if null)
  std::vector<int64_t> eos_token_ids = {2};  ///< ("eos_token_id": a number or a list)

  /// hs = C / NH.
  int64_t head_dim() const { return dim / n_heads; }
  /// Throws tt::Error naming the field: every size positive, NH divides C, NKV divides NH, hs
  /// even, eps >= 0, theta > 1.
  void validate() const;
  /// One line, e.g. "V=32000 C=4096 L=32 NH=32 NKV=8 F=11008 ...".
  std::string str() const;
  /// Parses Hugging Face's config.json of a LlamaForCausalLM ("model_type" "llama",
  /// "hidden_act" "silu", no attention or MLP bias, "head_dim" absent or C / NH); unknown keys
  /// are ignored, a wrong type or value is an error naming the key and `source`.
  static LlamaConfig from_hf_json(const std::string& text, const std::string& source);
  /// The config.json transformers writes for this shape (LlamaForCausalLM, float32).
  std::string to_hf_json() const;
};

/// LLaMA's RMSNorm as a module: weight [dim] (ones at init), tt::rms_norm.
class RMSNorm : public nn::Module {
 public:
  /// weight = ones([dim]) in `options`.
  RMSNorm(int64_t dim, double eps, TensorOptions options = {});
  /// rms_norm(x, weight, eps).
  Tensor forward(const Tensor& x) override;
  double eps;     ///< added to mean(x^2)
  Tensor weight;  ///< [dim]
};

/// A preallocated KV cache: per layer, keys and values [B, NKV, max_len, hs] (the model's dtype).
/// Row b holds the keys of its positions [0, length of row b); the caller tracks the lengths
/// (forward_cached's `start`).
struct KVCache {
  std::vector<Tensor> k;  ///< per layer [B, NKV, max_len, hs]
  std::vector<Tensor> v;  ///< per layer [B, NKV, max_len, hs]
  /// B.
  int64_t batch() const { return k.empty() ? 0 : k[0].size(0); }
  /// Positions each row can hold.
  int64_t max_len() const { return k.empty() ? 0 : k[0].size(2); }
};

/// "kv_cache_attend" kernels: append k_new, v_new [B, NKV, Tq, hs] to the caches [B, NKV,
/// Tmax, hs] at positions start[b] to start[b] + Tq - 1 of row b, then out [B, NH, Tq, hs] =
/// causal attention of q [B, NH, Tq, hs] (query i of row b at position start[b] + i) over the
/// cached keys and values [0, start[b] + i] of its key/value head, scale 1/sqrt(hs) (CUDA also
/// takes bfloat16, computed in float32: the scores and the softmax in float32). start is
/// int64 [B]: on the CPU for the CPU kernel; on the GPU (or the CPU, then copied) for CUDA.
/// CUDA also takes undefined k_new and v_new: attend only, the step's keys and values being in
/// the caches already ("llama_rope_append").
using KvCacheAttendKernel = void(const Tensor& out, const Tensor& q, const Tensor& k_new,
                                 const Tensor& v_new, const Tensor& k_cache, const Tensor& v_cache,
                                 const Tensor& start);

/// "llama_rope_append" kernel (CUDA; float32, float64, bfloat16 computed in float32): from the
/// packed projection qkv [B, T, (NH + 2 NKV) hs] (contiguous), q [B, NH, T, hs] = RoPE of the q
/// heads at positions [B, T] with tables cos, sin [P, hs/2] (float32 for bfloat16), and the RoPE
/// of the k heads and the v heads written to rows start[b] + t of the caches [B, NKV, Tmax, hs]
/// (start int64 [B] on the device, not checked against Tmax: the caller does). One launch where
/// rope, rope and the cache append were three: the bfloat16 decode path then attends through
/// "kv_cache_attend" with undefined k_new and v_new.
using RopeAppendKernel = void(const Tensor& q, const Tensor& qkv, const Tensor& cos,
                              const Tensor& sin, const Tensor& positions, const Tensor& start,
                              const Tensor& k_cache, const Tensor& v_cache);

/// "llama_decode_attention" kernel (CUDA, bfloat16 decoding, one new token per row): what
/// "llama_rope_append" then "kv_cache_attend" compute, in one launch. From the packed projection
/// qkv [B, 1, (NH + 2 NKV) hs]: the RoPE of the k heads (at positions [B, 1], tables cos, sin
/// [P, hs/2] float32) and the v heads written to row start[b] of the caches [B, NKV, Tmax, hs],
/// and out [B, NH, 1, hs] = softmax(q k^T / sqrt(hs)) v over rows [0, start[b]] of the query's
/// key/value head, q the RoPE of the q heads rounded to bfloat16. The keys are split in blocks of
/// 32 that run in parallel and are merged by log-sum-exp (FlashDecoding); `counters` int64 [>= B
/// NKV] must be zeros, and the kernel leaves them zeros. Returns false, launching nothing, for
/// what it does not take (T != 1, hs not a multiple of 8 or over 128, NH / NKV over 16, caches not
/// 16-byte aligned); throws tt::Error naming the tensors for shapes, dtypes or devices that do not
/// fit. start is not read on the host: the caller guarantees start[b] < Tmax.
using DecodeAttentionKernel = bool(const Tensor& out, const Tensor& qkv, const Tensor& cos,
                                   const Tensor& sin, const Tensor& positions, const Tensor& start,
                                   const Tensor& k_cache, const Tensor& v_cache,
                                   const Tensor& counters);

/// What the decode GEMV ("llama_decode_gemv") applies to its input rows before the product.
enum class GemvPrologue {
  kNone,     ///< the rows of a as they are
  kRmsNorm,  ///< RMSNorm of each row of a with `norm_weight` and `eps` (the block's input norm)
  kSwiglu,   ///< silu(a[m, k]) * a[m, K + k] of a [M, 2K] (the packed gate/up output)
};

/// "llama_decode_gemv" kernel (CUDA, bfloat16 decoding): out [M, N] = x w^T, plus out's old
/// values with `accumulate` (the residual connection), for w [N, K] and x = the prologue of a,
/// rounded to bfloat16 as the separate kernel would store it; out bfloat16, or float32 for the
/// head (RMSNorm prologue, no accumulation). Float32 sums. One kernel where cuBLASLt would need a
/// separate RMSNorm or SwiGLU launch before it; a persistent grid streaming the weights with two
/// chunks in flight per warp, launched as a programmatic dependent launch on Hopper (see
/// llama_cuda.cu). Returns false, launching nothing, for what it does not take (M > 4,
/// (M + 1) K float32 values over 96 KiB of shared memory, K not a multiple of 8, w, a or the
/// norm weight not 16-byte aligned); throws tt::Error naming the tensors for shapes, dtypes or
/// devices that do not fit.
using DecodeGemvKernel = bool(const Tensor& out, const Tensor& a, const Tensor& w,
                              const Tensor& norm_weight, double eps, GemvPrologue prologue,
                              bool accumulate);

/// Weights per layer in "llama_decode_step"'s `weights`: the packed q/k/v rows [(NH + 2 NKV) hs,
/// C], the input norm [C], o [C, NH hs], the post-attention norm [C], the packed gate/up rows
/// [2F, C] and down [C, F], in this order.
inline constexpr std::size_t kDecodeStepLayerTensors = 6;

/// "llama_decode_step" kernel (CUDA, bfloat16 decoding of one token of one row): a whole decode
/// step of the model in one launch, logits [1, V] (float32) = the head of RMSNorm(x) after every
/// layer: qkv = RMSNorm(x) Wqkv^T; RoPE, the append at row start[0] of the layer's caches [1, NKV,
/// Tmax, hs] and the attention, as "llama_decode_attention"; x += y Wo^T; x += SwiGLU(RMSNorm(x)
/// Wgu^T) Wdown^T. x [1, C] (the embedded token, the residual stream) is updated in place.
/// `weights` holds kDecodeStepLayerTensors tensors per layer; cos, sin, positions and start as
/// for "llama_decode_attention". A persistent cooperative kernel, one block per multiprocessor
/// with a grid barrier between its phases, every weight streamed through a ring in shared memory
/// whose loads run ahead of the barriers (llama_cuda.cu). Equals "llama_decode_gemv" and
/// "llama_decode_attention" phase by phase up to the RMSNorm's order of summation. Returns false,
/// launching nothing, for what it does not take (more than one row, more than 48 layers, sizes
/// the GEMV or the attention kernel decline, unaligned tensors, rings and input row over the
/// device's shared memory, a device without cooperative launches); throws tt::Error naming the
/// layer and tensor for shapes, dtypes or devices that do not fit. The environment's
/// TT_DECODE_STEP_TRACE makes each eager launch print its time per phase to stderr.
using DecodeStepKernel = bool(const Tensor& logits, const Tensor& x,
                              const std::vector<Tensor>& weights, const Tensor& final_norm,
                              const Tensor& head, double eps, const Tensor& cos, const Tensor& sin,
                              const Tensor& positions, const Tensor& start,
                              const std::vector<Tensor>& k_cache,
                              const std::vector<Tensor>& v_cache);

/// Whether bfloat16 decoding of one row runs the whole step as one "llama_decode_step" launch
/// where it applies (the decode GEMV on, set_decode_gemv; a cache of up to 1,024 positions and
/// layers of up to 128 MiB of weights, beyond which the launch per projection and attention was as
/// fast or faster), instead of a launch per projection and attention. On by default: on an H200 (TinyLlama-1.1B's shape, batch 1, CUDA
/// graph, a prompt of 128 + 256 new tokens) a step took 1.11 ms against 1.29 ms
/// (`tt_generate --gemv step,on` compares them; README, "The whole step in one launch").
void set_decode_step(bool on);
/// The setting of set_decode_step.
bool decode_step_enabled();

/// Whether bfloat16 decoding of one row (batch 1, the bandwidth-bound case) uses
/// "llama_decode_gemv" where it applies, instead of the RMSNorm and SwiGLU kernels followed by
/// cuBLASLt GEMMs; larger batches always take cuBLASLt. On by default: on an H100
/// (TinyLlama-1.1B's shape, batch 1, CUDA graph) a step took 1.41 ms with it against 1.59 ms
/// with cuBLASLt (`tt_generate --gemv on,off` compares them; README, "Decoding is a bandwidth
/// problem").
void set_decode_gemv(bool on);
/// The setting of set_decode_gemv.
bool decode_gemv_enabled();

/// One projection of bfloat16 decoding, as `Llama` runs it: out [M, N] (+ out's old values with
/// `accumulate`) = prologue(a) w^T for w [N, K], prologue one of GemvPrologue (RMSNorm with
/// `norm_weight` and `eps`, or SwiGLU of a [M, 2K]). Through "llama_decode_gemv" when it is on
/// (set_decode_gemv), M is 1 and the kernel takes the shapes; else the prologue's own kernel
/// ("rms_norm", "swiglu_forward") then chapter 10's cuBLASLt GEMM with the residual as beta = 1.
void project_bf16(const Tensor& out, const Tensor& a, const Tensor& w, GemvPrologue prologue,
                  const Tensor& norm_weight, double eps, bool accumulate);

namespace cpu {
/// The CPU "kv_cache_attend" (exercise ch15.4): contiguous tensors of one dtype (float32 or
/// float64), start[b] + Tq <= Tmax (checked, naming b).
void kv_cache_attend(const Tensor& out, const Tensor& q, const Tensor& k_new, const Tensor& v_new,
                     const Tensor& k_cache, const Tensor& v_cache, const Tensor& start);
}  // namespace cpu

/// Appends and attends through the device's "kv_cache_attend" kernel (no autograd: inference);
/// validates shapes, dtypes and devices, naming them, and every start[b] + Tq <= Tmax.
Tensor kv_cache_attend(const Tensor& q, const Tensor& k_new, const Tensor& v_new,
                       const Tensor& k_cache, const Tensor& v_cache,
                       const std::vector<int64_t>& start);

/// The same with start as an int64 tensor [B] on the model's device (the CPU for CPU tensors),
/// whose values are NOT read on the host: the caller guarantees start[b] + Tq <= Tmax. What a
/// CUDA graph captures (the values change between replays).
Tensor kv_cache_attend(const Tensor& q, const Tensor& k_new, const Tensor& v_new,
                       const Tensor& k_cache, const Tensor& v_cache, const Tensor& start);

/// The causal attention of a LLaMA block's training path (no cache): q [B, NH, T, hs] after
/// RoPE, k, v [B, NKV, T, hs] (k after RoPE) -> [B, NH, T, hs]. Empty: gqa_attention.
using AttentionFn = std::function<Tensor(const Tensor& q, const Tensor& k, const Tensor& v)>;

/// Attention of a LLaMA block: q_proj, k_proj, v_proj, o_proj (no bias), RoPE on q and k.
class LlamaAttention : public nn::Module {
 public:
  /// Projections initialised N(0, init_std).
  LlamaAttention(const LlamaConfig& config, Generator& gen, TensorOptions options);
  /// x [B, T, C] at positions [B, T] -> [B, T, C]; with `cache` (and its layer `layer`), the
  /// keys and values are appended at start[b] (int64 [B] on x's device) and the queries attend
  /// the cache.
  Tensor attend(const Tensor& x, const Tensor& positions, const RopeTables& rope,
                KVCache* cache = nullptr, int64_t layer = 0, const Tensor& start = Tensor());
  std::shared_ptr<nn::Linear> q_proj;  ///< [NH * hs, C]
  std::shared_ptr<nn::Linear> k_proj;  ///< [NKV * hs, C]
  std::shared_ptr<nn::Linear> v_proj;  ///< [NKV * hs, C]
  std::shared_ptr<nn::Linear> o_proj;  ///< [C, NH * hs]
  int64_t n_heads;                     ///< NH
  int64_t n_kv_heads;                  ///< NKV
  int64_t head_dim;                    ///< hs
  /// Chapter 11's mixed precision (see Llama::set_mixed_precision): q, k, v from one
  /// linears_bf16 (x cast once, bfloat16 outputs), RoPE on them in bfloat16, attention in
  /// bfloat16 without a cache (with one, generation, widened to the cache's dtype), o_proj
  /// writing x's dtype (float32) directly.
  bool mixed_bf16 = false;
  /// The attention without a cache (Llama::set_attention); empty: gqa_attention.
  AttentionFn attention;
};

/// The SwiGLU MLP: down_proj(silu(gate_proj(x)) * up_proj(x)).
class LlamaMLP : public nn::Module {
 public:
  /// Projections initialised N(0, init_std).
  LlamaMLP(const LlamaConfig& config, Generator& gen, TensorOptions options);
  /// x [..., C] -> [..., C].
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Linear> gate_proj;  ///< [F, C]
  std::shared_ptr<nn::Linear> up_proj;    ///< [F, C]
  std::shared_ptr<nn::Linear> down_proj;  ///< [C, F]
  /// Chapter 11's mixed precision (see Llama::set_mixed_precision): gate and up from one
  /// linears_bf16 (x cast once), SwiGLU in bfloat16 (computed in float32), down_proj writing
  /// x's dtype (float32) directly.
  bool mixed_bf16 = false;
};

/// One pre-norm block.
class LlamaDecoderLayer : public nn::Module {
 public:
  /// Builds the block of `config`.
  LlamaDecoderLayer(const LlamaConfig& config, Generator& gen, TensorOptions options);
  /// x [B, T, C] -> [B, T, C] (see LlamaAttention::attend for the cache arguments).
  Tensor run(const Tensor& x, const Tensor& positions, const RopeTables& rope,
             KVCache* cache = nullptr, int64_t layer = 0, const Tensor& start = Tensor());
  std::shared_ptr<LlamaAttention> self_attn;          ///< attention
  std::shared_ptr<LlamaMLP> mlp;                      ///< MLP
  std::shared_ptr<RMSNorm> input_layernorm;           ///< before attention
  std::shared_ptr<RMSNorm> post_attention_layernorm;  ///< before the MLP
};

/// The decoder without its head (Hugging Face's LlamaModel).
class LlamaModel : public nn::Module {
 public:
  /// Builds the decoder of `config`.
  LlamaModel(const LlamaConfig& config, Generator& gen, TensorOptions options);
  std::shared_ptr<nn::Embedding> embed_tokens;  ///< [V, C]
  std::shared_ptr<nn::ModuleList> layers;       ///< L LlamaDecoderLayer
  std::shared_ptr<RMSNorm> norm;                ///< final norm
};

/// LlamaForCausalLM.
class Llama : public nn::Module {
 public:
  /// A model of `config` (validated) with parameters N(0, init_std) drawn from a generator
  /// seeded with `seed` (norm weights 1), in `options` (float32 or float64; move to CUDA with
  /// to()). bfloat16: the float32 model's values rounded to nearest even, for inference on CUDA
  /// (see the file comment).
  explicit Llama(const LlamaConfig& config, uint64_t seed = 1337, TensorOptions options = {});
  /// The config.
  const LlamaConfig& config() const { return config_; }
  /// Where the parameters are.
  Device device() const { return model->embed_tokens->weight.device(); }
  /// The parameters' dtype.
  DType dtype() const;
  /// Converts every parameter to `dtype` (float32, float64 or bfloat16) IN PLACE, on its device:
  /// the same tensor objects (as Module::to(Device)), their gradients dropped. Returns *this.
  Llama& to_dtype(DType dtype);
  /// logits [B, T, V] of idx [B, T] (int64) at positions 0 to T - 1 (bfloat16 parameters: float32
  /// logits from the cached path with a cache of T positions, no autograd graph).
  Tensor forward(const Tensor& idx) override;
  /// Mean cross-entropy of forward(idx) against targets [B, T] (kIgnoreIndex skipped). Throws
  /// tt::Error for bfloat16 parameters (inference only). Under mixed precision: the head and the
  /// loss of chapter 11's classifier_loss_bf16 (float32 loss, targets in [0, V)).
  Tensor loss(const Tensor& idx, const Tensor& targets);
  /// loss() of tokens idx [B, T] at positions [B, T] (int64 on the model's device, each in
  /// [0, max_seq_len): RoPE's angles), e.g. a shard of longer sequences (chapter 16's context
  /// parallelism gives each rank the global positions of its shard). Throws tt::Error naming
  /// the tensors when the shapes differ.
  Tensor loss_at(const Tensor& idx, const Tensor& positions, const Tensor& targets);
  /// Every layer's attention without a cache (forward, loss, loss_at) becomes `fn` (empty:
  /// gqa_attention again): chapter 16 passes ring attention over a context-parallel group.
  /// Returns *this.
  Llama& set_attention(AttentionFn fn);
  /// logits [B, Tq, V] of idx [B, Tq] where row b's tokens are at positions start[b] to
  /// start[b] + Tq - 1, their keys and values appended to `cache` (no autograd graph). The
  /// logits have the parameters' dtype, float32 for bfloat16 parameters. In bfloat16, a prompt
  /// into an empty cache (every start 0, Tq > 1: the prefill) attends through chapter 11's bf16
  /// FlashAttention instead of the cache kernel (head sizes 32, 64 and 128).
  Tensor forward_cached(const Tensor& idx, KVCache& cache, const std::vector<int64_t>& start);
  /// forward_cached without any host work: idx [B, Tq], positions [B, Tq] and start [B] (int64,
  /// on the model's device) are read by the kernels only, and nothing is checked against the
  /// cache or max_seq_len (the caller does it). What a CUDA graph of a decode step captures.
  Tensor forward_static(const Tensor& idx, const Tensor& positions, KVCache& cache,
                        const Tensor& start);
  /// A zeroed cache for `batch` rows of `max_len` positions (<= max_seq_len) in the model's
  /// dtype and device.
  KVCache make_cache(int64_t batch, int64_t max_len) const;
  /// The output projection's weight [V, C] (embed_tokens' when tied).
  Tensor head_weight() const;
  /// Turns chapter 11's bfloat16 mixed-precision training on or off (see the file comment) for
  /// float32 parameters (tt::Error naming the dtype otherwise): forward and loss run bfloat16
  /// GEMMs and attention; train with a MasterWeightAdamW (make_master_weight_adamw) so that the
  /// GEMMs read the copies its step writes. Returns *this.
  Llama& set_mixed_precision(bool on);
  /// Whether set_mixed_precision(true) is in effect.
  bool mixed_precision() const { return mixed_bf16_; }

  std::shared_ptr<LlamaModel> model;    ///< the decoder ("model.*")
  std::shared_ptr<nn::Linear> lm_head;  ///< null when tied ("lm_head.weight")

 private:
  Tensor run(const Tensor& idx, const Tensor& positions, KVCache* cache, const Tensor& start);
  Tensor hidden(const Tensor& idx, const Tensor& positions, KVCache* cache, const Tensor& start);
  Tensor run_bf16(const Tensor& idx, const Tensor& positions, KVCache& cache, const Tensor& start,
                  bool fresh);
  Tensor positions_for(int64_t B, int64_t T, const std::vector<int64_t>& start) const;
  const RopeTables& rope_for(const Tensor& like);
  LlamaConfig config_;
  RopeTables rope_;
  bool mixed_bf16_ = false;
};

// ----- Hugging Face files ---------------------------------------------------------------------

/// Loads a directory written by transformers' save_pretrained (or save_hf): config.json and
/// model.safetensors (one file; a sharded model's index is refused with a message). Tensors
/// are converted to `dtype` (float32, float64 or bfloat16 for inference on CUDA: F32 is rounded
/// to nearest even, BF16 kept as stored, F16 through float32) and checked all or nothing against
/// the model's names and shapes; "lm_head.weight" is ignored for a tied model,
/// "*.rotary_emb.inv_freq" buffers always.
std::unique_ptr<Llama> load_hf(const std::string& dir, DType dtype = DType::kFloat32);

/// Writes config.json and model.safetensors (metadata {"format": "pt"}, as transformers
/// expects) into `dir` (created if missing), the tensors stored per `store`.
void save_hf(const Llama& model, const std::string& dir,
             safetensors::StoreAs store = safetensors::StoreAs::kF32);

}  // namespace tt::llama
