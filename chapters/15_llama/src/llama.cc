// The LLaMA model (tt/llama.h): modules, forward with and without the KV cache, and the loss.
#include "tt/llama.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <sstream>

#include "tt/autograd.h"
#include "tt/classifier_bf16.h"
#include "tt/dispatcher.h"
#include "tt/flash_attention_bf16.h"
#include "tt/functional.h"
#include "tt/mixed_precision.h"
#include "tt/ops_matmul.h"
#include "tt/ops_nn.h"

namespace tt::llama {

namespace {

std::string describe(const Tensor& t) {
  return t.defined() ? t.describe() : std::string("an undefined tensor");
}

std::shared_ptr<nn::Linear> normal_linear(int64_t in, int64_t out, double std, Generator& gen,
                                          TensorOptions options) {
  auto lin = std::make_shared<nn::Linear>(in, out, false, gen, options);
  nn::normal_(lin->weight, std, gen);
  return lin;
}

// One 2-D view [sum of rows, K] over the weights `ws` ([N_i, K] each, contiguous, one dtype and
// device), so that one GEMM computes all their outputs side by side. When they are not already
// consecutive rows of one storage, they are moved there: a new buffer receives their values and
// each parameter's TensorImpl is re-pointed at its rows (the same tensor objects, so the module,
// its state_dict and Module::to() keep seeing them; values unchanged).
Tensor packed_rows(const std::vector<Tensor>& ws) {
  const int64_t K = ws[0].size(1);
  int64_t rows = 0;
  bool adjacent = true;
  for (const Tensor& w : ws) {
    TT_CHECK(w.dim() == 2 && w.size(1) == K && w.is_contiguous() && w.dtype() == ws[0].dtype() &&
                 w.device() == ws[0].device(),
             "Llama: cannot pack weight ", w.describe(), " with ", ws[0].describe());
    adjacent =
        adjacent && w.storage() == ws[0].storage() && w.offset() == ws[0].offset() + rows * K;
    rows += w.size(0);
  }
  if (!adjacent) {
    const Tensor packed = empty({rows, K}, {ws[0].dtype(), ws[0].device()});
    int64_t r = 0;
    for (const Tensor& w : ws) {
      packed.slice(0, r, r + w.size(0)).copy_(w);
      TensorImpl& impl = *w.impl();
      impl.storage = packed.storage();
      impl.offset = packed.offset() + r * K;
      r += w.size(0);
    }
  }
  return Tensor(ws[0].storage(), {rows, K}, {K, 1}, ws[0].offset(), ws[0].dtype());
}

// out [M, N] (+)= a [M, K] w^T for w [N, K]: chapter 10's cuBLASLt GEMM "matmul_lt_gemm"
// (bfloat16 operands, float32 accumulation, out bfloat16 or float32; `accumulate` adds the
// product to out in the GEMM's epilogue, beta = 1: the residual connection).
void gemm_wt(const Tensor& out, const Tensor& a, const Tensor& w, bool accumulate) {
  call_kernel<GemmKernel>("matmul_lt_gemm", out.device(), out, a, w.transpose(0, 1), 1.0,
                          accumulate ? 1.0 : 0.0);
}

std::atomic<bool>& gemv_setting() {
  static std::atomic<bool> on{true};  // see set_decode_gemv
  return on;
}

std::atomic<bool>& step_setting() {
  static std::atomic<bool> on{true};  // see set_decode_step
  return on;
}

// The batch rows up to which decoding uses the GEMV: measured faster than cuBLASLt at 1 row
// (TinyLlama-1.1B's shape on an H100: 1.41 against 1.59 ms a step), much slower at 4 (each row
// multiplies every weight again out of shared memory), so batches go to cuBLASLt.
constexpr int64_t kGemvBatchRows = 1;

// The cache length from which decode steps attend through "llama_decode_attention" (one launch,
// the keys split over blocks and merged) instead of "llama_rope_append" then "kv_cache_attend".
// bench_decode on an H200, TinyLlama's attention over 22 layers: the one launch 0.152-0.163 ms
// against 0.134 at 130 cached positions (the merge's round trips are the longer chain), 0.196
// against 0.207 at 512, 0.349 against 0.763 at 2,048.
constexpr int64_t kDecodeAttentionMinCache = 512;

// The cache length up to which a one-row decode step runs as one launch ("llama_decode_step").
// tt_generate on an H200 (TinyLlama-1.1B's shape, CUDA graph, 256 new tokens; .devrun/s15h.sh,
// both paths in one process): 1.111 against 1.288 ms a step after a prompt of 128 (cache 384),
// but 1.555 against 1.535 after 1,536 (cache 1,792), although bench_decode's step at 1,600
// cached positions is 1.16x faster in one launch (1.24 against 1.44 ms; README, "The whole
// step in one launch").
constexpr int64_t kDecodeStepMaxCache = 1024;

// The weight bytes of a layer up to which the step runs as one launch: what it saves is a fixed
// cost per kernel, which weighs less as the layers grow. bench_decode on an H200, 130 cached
// positions: TinyLlama-1.1B's shape (88 MB a layer) 1.01 against 1.23 ms a step, LLaMA-2-7B's
// (405 MB a layer, 32 key/value heads) 4.89 against 4.70 (.devrun/s15i.sh).
constexpr int64_t kDecodeStepMaxLayerBytes = int64_t{128} << 20;

// A layer's weights as bfloat16 decoding reads them, in "llama_decode_step"'s order
// (kDecodeStepLayerTensors): the q/k/v rows packed, the input norm, o, the post-attention norm,
// the gate/up rows packed, down.
std::array<Tensor, kDecodeStepLayerTensors> decode_weights(LlamaDecoderLayer& layer) {
  LlamaAttention& attn = *layer.self_attn;
  LlamaMLP& mlp = *layer.mlp;
  return {packed_rows({attn.q_proj->weight, attn.k_proj->weight, attn.v_proj->weight}),
          layer.input_layernorm->weight,
          attn.o_proj->weight,
          layer.post_attention_layernorm->weight,
          packed_rows({mlp.gate_proj->weight, mlp.up_proj->weight}),
          mlp.down_proj->weight};
}

// Rows idx of a bfloat16 table [V, C] (C even): a gather moves bits, so the table is read as
// float32 pairs [V, C / 2] by chapter 06's embedding kernel (its index checks included).
Tensor embed_bf16(const Tensor& table, const Tensor& idx) {
  const int64_t V = table.size(0), C = table.size(1);
  TT_CHECK(C % 2 == 0, "Llama: bfloat16 inference needs an even hidden size, got ", C);
  const Tensor pairs(table.storage(), {V, C / 2}, {C / 2, 1}, table.offset() / 2, DType::kFloat32);
  const Tensor rows = embedding(pairs, reshape(idx, {idx.numel()}));
  return Tensor(rows.storage(), {idx.numel(), C}, {C, 1}, 2 * rows.offset(), DType::kBFloat16);
}

}  // namespace

void set_decode_gemv(bool on) {
  gemv_setting().store(on);
}

bool decode_gemv_enabled() {
  return gemv_setting().load();
}

void set_decode_step(bool on) {
  step_setting().store(on);
}

bool decode_step_enabled() {
  return step_setting().load();
}

void project_bf16(const Tensor& out, const Tensor& a, const Tensor& w, GemvPrologue prologue,
                  const Tensor& norm_weight, double eps, bool accumulate) {
  if (gemv_setting().load() && a.size(0) <= kGemvBatchRows &&
      call_kernel<DecodeGemvKernel>("llama_decode_gemv", out.device(), out, a, w, norm_weight, eps,
                                    prologue, accumulate)) {
    return;
  }
  Tensor x = a;
  if (prologue == GemvPrologue::kRmsNorm) x = rms_norm(a, norm_weight, eps);
  if (prologue == GemvPrologue::kSwiglu) {
    const int64_t F = a.size(1) / 2;
    x = empty({a.size(0), F}, {a.dtype(), a.device()});
    call_kernel<SwigluForwardKernel>("swiglu_forward", a.device(), x, a.slice(1, 0, F),
                                     a.slice(1, F, 2 * F));
  }
  gemm_wt(out, x, w, accumulate);
}

void LlamaConfig::validate() const {
  auto positive = [](const char* name, int64_t v) {
    TT_CHECK(v > 0, "LlamaConfig: ", name, " must be > 0, got ", v);
  };
  positive("vocab_size", vocab_size);
  positive("dim (hidden_size)", dim);
  positive("n_layers (num_hidden_layers)", n_layers);
  positive("n_heads (num_attention_heads)", n_heads);
  positive("n_kv_heads (num_key_value_heads)", n_kv_heads);
  positive("ffn_dim (intermediate_size)", ffn_dim);
  positive("max_seq_len (max_position_embeddings)", max_seq_len);
  TT_CHECK(dim % n_heads == 0, "LlamaConfig: n_heads = ", n_heads, " does not divide dim = ", dim);
  TT_CHECK(n_heads % n_kv_heads == 0, "LlamaConfig: n_kv_heads = ", n_kv_heads,
           " does not divide n_heads = ", n_heads);
  TT_CHECK(head_dim() % 2 == 0, "LlamaConfig: the head size dim / n_heads = ", head_dim(),
           " must be even (RoPE rotates pairs)");
  TT_CHECK(norm_eps >= 0 && std::isfinite(norm_eps), "LlamaConfig: norm_eps must be >= 0, got ",
           norm_eps);
  TT_CHECK(rope_theta > 1 && std::isfinite(rope_theta), "LlamaConfig: rope_theta must be > 1, got ",
           rope_theta);
  TT_CHECK(init_std >= 0, "LlamaConfig: init_std must be >= 0, got ", init_std);
  (void)rope_inv_freq(head_dim(), rope_theta, rope_scaling);  // validates the scaling
}

std::string LlamaConfig::str() const {
  std::ostringstream os;
  os << "V=" << vocab_size << " C=" << dim << " L=" << n_layers << " NH=" << n_heads
     << " NKV=" << n_kv_heads << " F=" << ffn_dim << " maxT=" << max_seq_len
     << " theta=" << rope_theta << " eps=" << norm_eps << (tie_embeddings ? " tied" : " untied");
  if (rope_scaling.type != "default") os << " rope_scaling=" << rope_scaling.type;
  return os.str();
}

RMSNorm::RMSNorm(int64_t dim, double eps_, TensorOptions options)
    : Module("LlamaRMSNorm"), eps(eps_) {
  weight = register_parameter("weight", ones({dim}, options));
}

Tensor RMSNorm::forward(const Tensor& x) {
  return rms_norm(x, weight, eps);
}

Tensor kv_cache_attend(const Tensor& q, const Tensor& k_new, const Tensor& v_new,
                       const Tensor& k_cache, const Tensor& v_cache,
                       const std::vector<int64_t>& start) {
  TT_CHECK(q.defined() && q.dim() == 4 && k_new.defined() && k_new.dim() == 4 && v_new.defined() &&
               v_new.shape() == k_new.shape() && k_cache.defined() && k_cache.dim() == 4 &&
               v_cache.defined() && v_cache.shape() == k_cache.shape() && k_new.size(1) > 0 &&
               q.size(1) % k_new.size(1) == 0 && q.size(0) == k_new.size(0) &&
               q.size(2) == k_new.size(2) && q.size(3) == k_new.size(3) &&
               k_cache.size(0) == q.size(0) && k_cache.size(1) == k_new.size(1) &&
               k_cache.size(3) == q.size(3),
           "kv_cache_attend: expected q [B, NH, Tq, hs], k_new and v_new [B, NKV, Tq, hs], caches "
           "[B, NKV, Tmax, hs], got q ",
           describe(q), ", k_new ", describe(k_new), ", v_new ", describe(v_new), ", k_cache ",
           describe(k_cache), ", v_cache ", describe(v_cache));
  for (const Tensor* t : {&k_new, &v_new, &k_cache, &v_cache}) {
    TT_CHECK(t->dtype() == q.dtype() && t->device() == q.device(),
             "kv_cache_attend: every tensor must have q's dtype and device (", q.describe(),
             "), got ", t->describe());
  }
  TT_CHECK(static_cast<int64_t>(start.size()) == q.size(0), "kv_cache_attend: start has ",
           start.size(), " values for a batch of ", q.size(0));
  for (std::size_t b = 0; b < start.size(); ++b) {
    TT_CHECK(start[b] >= 0 && start[b] + q.size(2) <= k_cache.size(2), "kv_cache_attend: row ", b,
             " appends positions [", start[b], ", ", start[b] + q.size(2),
             ") to a cache of max_len ", k_cache.size(2));
  }
  return kv_cache_attend(q, k_new, v_new, k_cache, v_cache,
                         from_vector(start, {static_cast<int64_t>(start.size())}).to(q.device()));
}

Tensor kv_cache_attend(const Tensor& q, const Tensor& k_new, const Tensor& v_new,
                       const Tensor& k_cache, const Tensor& v_cache, const Tensor& start) {
  TT_CHECK(q.defined() && q.dim() == 4 && start.defined() && start.dtype() == DType::kInt64 &&
               start.dim() == 1 && start.size(0) == q.size(0) && start.device() == q.device(),
           "kv_cache_attend: start must be int64 [B] on q's device, got ",
           start.defined() ? start.describe() : std::string("an undefined tensor"), " for q ",
           q.defined() ? q.describe() : std::string("an undefined tensor"));
  const Tensor out = empty(q.shape(), {q.dtype(), q.device()});
  call_kernel<KvCacheAttendKernel>("kv_cache_attend", q.device(), out, q.contiguous(),
                                   k_new.contiguous(), v_new.contiguous(), k_cache, v_cache, start);
  return out;
}

LlamaAttention::LlamaAttention(const LlamaConfig& c, Generator& gen, TensorOptions options)
    : Module("LlamaAttention"),
      n_heads(c.n_heads),
      n_kv_heads(c.n_kv_heads),
      head_dim(c.head_dim()) {
  q_proj = register_module("q_proj",
                           normal_linear(c.dim, c.n_heads * head_dim, c.init_std, gen, options));
  k_proj = register_module("k_proj",
                           normal_linear(c.dim, c.n_kv_heads * head_dim, c.init_std, gen, options));
  v_proj = register_module("v_proj",
                           normal_linear(c.dim, c.n_kv_heads * head_dim, c.init_std, gen, options));
  o_proj = register_module("o_proj",
                           normal_linear(c.n_heads * head_dim, c.dim, c.init_std, gen, options));
}

namespace {

/// Checks that idx is int64 token ids [B, T] on `device`; tt::Error naming `op` otherwise.
void check_ids(const char* op, const Tensor& idx, Device device) {
  TT_CHECK(
      idx.defined() && idx.dim() == 2 && idx.dtype() == DType::kInt64 && idx.device() == device, op,
      ": expected int64 token ids [B, T] on ", device.str(), ", got ", describe(idx));
}

/// x W_i^T of each of `layers` (bias-free): when `bf16`, linears_bf16 (tt/llama_ops.h: x cast
/// to bfloat16 once for all of them, their input gradients summed in float32; outputs of
/// `bf16_out`), else each layer's own forward.
std::vector<Tensor> project(bool bf16, const std::vector<nn::Linear*>& layers, const Tensor& x,
                            DType bf16_out = DType::kBFloat16) {
  if (bf16) return linears_bf16(x, layers, bf16_out);
  std::vector<Tensor> ys;
  for (nn::Linear* layer : layers) ys.push_back(layer->forward(x));
  return ys;
}

}  // namespace

Tensor LlamaAttention::attend(const Tensor& x, const Tensor& positions, const RopeTables& tables,
                              KVCache* cache, int64_t layer, const Tensor& start) {
  const int64_t B = x.size(0), T = x.size(1);
  // Mixed precision (what is rounded where): x cast to bfloat16 once for the q, k and v GEMMs
  // (linears_bf16, whose backward sums the three input gradients in float32); their bfloat16
  // outputs go to RoPE as they are (rotated in float32, rounded once) and, without a cache, to
  // attention in bfloat16 where the device's bf16 FlashAttention takes hs (the CPU emulation:
  // any); with a cache (or an hs it lacks) q, k, v are widened to the stream's dtype first.
  // o_proj writes the float32 stream directly (its GEMM's float32 result, not rounded).
  const bool bf16 = mixed_bf16;
  const DType stream = x.dtype();
  const DType att =
      bf16 && cache == nullptr && (x.device().is_cpu() || flash_attention_bf16_supports(head_dim))
          ? DType::kBFloat16
          : stream;
  // [B, T, H * hs] -> [B, H, T, hs] in att's dtype, as a strided view: rope reads it in place.
  auto heads = [&](const Tensor& y, int64_t h) {
    return transpose(view(tt::to_dtype(y, att), {B, T, h, head_dim}), 1, 2);
  };
  const std::vector<Tensor> qkv = project(bf16, {q_proj.get(), k_proj.get(), v_proj.get()}, x);
  const Tensor q = rope(heads(qkv[0], n_heads), tables, positions);
  const Tensor k = rope(heads(qkv[1], n_kv_heads), tables, positions);
  const Tensor v = contiguous(heads(qkv[2], n_kv_heads));
  Tensor y;
  if (cache != nullptr) {
    y = kv_cache_attend(q, k, v, cache->k[layer], cache->v[layer], start);
  } else {
    y = attention ? attention(q, k, v) : gqa_attention(q, k, v);
  }
  y = reshape(transpose(y, 1, 2), {B, T, n_heads * head_dim});
  return project(bf16, {o_proj.get()}, y, stream)[0];
}

LlamaMLP::LlamaMLP(const LlamaConfig& c, Generator& gen, TensorOptions options)
    : Module("LlamaMLP") {
  gate_proj =
      register_module("gate_proj", normal_linear(c.dim, c.ffn_dim, c.init_std, gen, options));
  up_proj = register_module("up_proj", normal_linear(c.dim, c.ffn_dim, c.init_std, gen, options));
  down_proj =
      register_module("down_proj", normal_linear(c.ffn_dim, c.dim, c.init_std, gen, options));
}

Tensor LlamaMLP::forward(const Tensor& x) {
  // Mixed precision: x cast to bfloat16 once for the gate and up GEMMs (their input gradients
  // summed in float32), SwiGLU on their bfloat16 outputs (computed in float32, rounded once),
  // down_proj writing the float32 stream directly.
  const DType stream = x.dtype();
  const std::vector<Tensor> gate_up = project(mixed_bf16, {gate_proj.get(), up_proj.get()}, x);
  const Tensor h = swiglu(gate_up[0], gate_up[1]);
  return project(mixed_bf16, {down_proj.get()}, h, stream)[0];
}

LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& c, Generator& gen, TensorOptions options)
    : Module("LlamaDecoderLayer") {
  self_attn = register_module("self_attn", std::make_shared<LlamaAttention>(c, gen, options));
  mlp = register_module("mlp", std::make_shared<LlamaMLP>(c, gen, options));
  input_layernorm =
      register_module("input_layernorm", std::make_shared<RMSNorm>(c.dim, c.norm_eps, options));
  post_attention_layernorm = register_module("post_attention_layernorm",
                                             std::make_shared<RMSNorm>(c.dim, c.norm_eps, options));
}

Tensor LlamaDecoderLayer::run(const Tensor& x, const Tensor& positions, const RopeTables& rope,
                              KVCache* cache, int64_t layer, const Tensor& start) {
  const Tensor h =
      add(x, self_attn->attend(input_layernorm->forward(x), positions, rope, cache, layer, start));
  return add(h, mlp->forward(post_attention_layernorm->forward(h)));
}

LlamaModel::LlamaModel(const LlamaConfig& c, Generator& gen, TensorOptions options)
    : Module("LlamaModel") {
  embed_tokens = register_module(
      "embed_tokens", std::make_shared<nn::Embedding>(c.vocab_size, c.dim, gen, options));
  nn::normal_(embed_tokens->weight, c.init_std, gen);
  layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t l = 0; l < c.n_layers; ++l) {
    layers->push_back(std::make_shared<LlamaDecoderLayer>(c, gen, options));
  }
  norm = register_module("norm", std::make_shared<RMSNorm>(c.dim, c.norm_eps, options));
}

Llama::Llama(const LlamaConfig& config, uint64_t seed, TensorOptions options)
    : Module("LlamaForCausalLM"), config_(config) {
  config_.validate();
  TT_CHECK(options.dtype == DType::kFloat32 || options.dtype == DType::kFloat64 ||
               options.dtype == DType::kBFloat16,
           "Llama: parameters must be float32, float64 or bfloat16, got ",
           dtype_name(options.dtype));
  Generator gen(seed);
  model = register_module("model", std::make_shared<LlamaModel>(config_, gen, options));
  if (!config_.tie_embeddings) {
    lm_head = register_module(
        "lm_head", normal_linear(config_.dim, config_.vocab_size, config_.init_std, gen, options));
  }
}

Tensor Llama::head_weight() const {
  return lm_head ? lm_head->weight : model->embed_tokens->weight;
}

const RopeTables& Llama::rope_for(const Tensor& like) {
  const DType dtype = like.dtype() == DType::kBFloat16 ? DType::kFloat32 : like.dtype();
  if (!rope_.cos.defined() || rope_.cos.dtype() != dtype || rope_.cos.device() != like.device()) {
    rope_ = rope_tables(config_.max_seq_len, config_.head_dim(), config_.rope_theta,
                        config_.rope_scaling, {dtype, like.device()});
  }
  return rope_;
}

DType Llama::dtype() const {
  return model->embed_tokens->weight.dtype();
}

Llama& Llama::to_dtype(DType dtype) {
  TT_CHECK(dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kBFloat16,
           "Llama::to_dtype: parameters must be float32, float64 or bfloat16, got ",
           dtype_name(dtype));
  for (const Tensor& p : parameters()) {  // each once (a tied weight is one tensor)
    if (p.dtype() == dtype) continue;
    const Tensor converted = p.to(dtype).contiguous();
    TensorImpl& impl = *p.impl();
    impl.storage = converted.storage();
    impl.strides = converted.strides();
    impl.offset = converted.offset();
    impl.dtype = dtype;
    p.set_grad(Tensor());
  }
  return *this;
}

Tensor Llama::run_bf16(const Tensor& idx, const Tensor& positions, KVCache& cache,
                       const Tensor& start, bool fresh) {
  TT_CHECK(device().is_cuda(), "Llama: bfloat16 parameters run on CUDA only (inference), got a ",
           "model on ", device().str(), "; use float32 on the CPU");
  const LlamaConfig& c = config_;
  const int64_t B = idx.size(0), T = idx.size(1), M = B * T, hs = c.head_dim();
  const int64_t NH = c.n_heads, NKV = c.n_kv_heads, W = (NH + 2 * NKV) * hs, F = c.ffn_dim;
  const TensorOptions bf16{DType::kBFloat16, device()};
  Tensor x = embed_bf16(model->embed_tokens->weight, idx);  // [M, C], the residual stream
  const RopeTables& tables = rope_for(x);
  const Tensor logits = empty({M, c.vocab_size}, {DType::kFloat32, device()});
  // One row's decode step into a cache of up to kDecodeStepMaxCache positions, layers of up to
  // kDecodeStepMaxLayerBytes: the whole step in one launch where the kernel takes it.
  const int64_t layer_bytes = 2 * (W * c.dim + c.dim * NH * hs + 3 * F * c.dim);
  if (T == 1 && B <= kGemvBatchRows && cache.max_len() <= kDecodeStepMaxCache &&
      layer_bytes <= kDecodeStepMaxLayerBytes && gemv_setting().load() && step_setting().load()) {
    std::vector<Tensor> weights;
    for (std::size_t l = 0; l < model->layers->size(); ++l) {
      const auto w = decode_weights(model->layers->at<LlamaDecoderLayer>(l));
      weights.insert(weights.end(), w.begin(), w.end());
    }
    if (call_kernel<DecodeStepKernel>("llama_decode_step", device(), logits, x, weights,
                                      model->norm->weight, head_weight(), c.norm_eps, tables.cos,
                                      tables.sin, positions, start, cache.k, cache.v)) {
      return logits.view({B, T, c.vocab_size});
    }
  }
  // A decode step into a long cache attends through llama_decode_attention (with its split
  // counters: zeros, and each launch leaves them zeros).
  const bool decode_attention = T == 1 && cache.max_len() >= kDecodeAttentionMinCache;
  const Tensor counters = decode_attention ? zeros({B * NKV}, {DType::kInt64, device()}) : Tensor();
  for (std::size_t l = 0; l < model->layers->size(); ++l) {
    const auto w = decode_weights(model->layers->at<LlamaDecoderLayer>(l));
    const double eps = c.norm_eps;
    const Tensor qkv = empty({B, T, W}, bf16);
    project_bf16(qkv.view({M, W}), x, w[0], GemvPrologue::kRmsNorm, w[1], eps, false);
    // RoPE, the append and the attention in one launch where the kernel takes it.
    Tensor y;  // [B, NH, T, hs], allocated by the path that writes it
    bool fused = false;
    if (decode_attention) {
      y = empty({B, NH, T, hs}, bf16);
      fused = call_kernel<DecodeAttentionKernel>("llama_decode_attention", device(), y, qkv,
                                                 tables.cos, tables.sin, positions, start,
                                                 cache.k[l], cache.v[l], counters);
    }
    if (!fused) {
      const Tensor q = empty({B, NH, T, hs}, bf16);
      call_kernel<RopeAppendKernel>("llama_rope_append", device(), q, qkv, tables.cos, tables.sin,
                                    positions, start, cache.k[l], cache.v[l]);
      if (fresh && T > 1 && flash_attention_bf16_supports(hs)) {
        // A prompt into an empty cache: causal attention over its own keys, i.e. chapter 11's
        // bf16 FlashAttention on the cache's first T rows (GQA through gqa_attention).
        y = gqa_attention(q, cache.k[l].slice(2, 0, T), cache.v[l].slice(2, 0, T));
      } else {
        if (!y.defined()) y = empty({B, NH, T, hs}, bf16);
        call_kernel<KvCacheAttendKernel>("kv_cache_attend", device(), y, q, Tensor(), Tensor(),
                                         cache.k[l], cache.v[l], start);
      }
    }
    project_bf16(x, y.transpose(1, 2).contiguous().view({M, NH * hs}), w[2], GemvPrologue::kNone,
                 Tensor(), 0, true);
    const Tensor gate_up = empty({M, 2 * F}, bf16);
    project_bf16(gate_up, x, w[4], GemvPrologue::kRmsNorm, w[3], eps, false);
    project_bf16(x, gate_up, w[5], GemvPrologue::kSwiglu, Tensor(), 0, true);
  }
  project_bf16(logits, x, head_weight(), GemvPrologue::kRmsNorm, model->norm->weight, c.norm_eps,
               false);
  return logits.view({B, T, c.vocab_size});
}

Tensor Llama::positions_for(int64_t B, int64_t T, const std::vector<int64_t>& start) const {
  std::vector<int64_t> p(static_cast<std::size_t>(B * T));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = start.empty() ? 0 : start[b];
    TT_CHECK(s >= 0 && s + T <= config_.max_seq_len, "Llama: row ", b, " has positions [", s, ", ",
             s + T, ") beyond max_seq_len = ", config_.max_seq_len);
    for (int64_t t = 0; t < T; ++t) p[b * T + t] = s + t;
  }
  return from_vector(p, {B, T}).to(device());
}

Tensor Llama::hidden(const Tensor& idx, const Tensor& positions, KVCache* cache,
                     const Tensor& start) {
  Tensor x = model->embed_tokens->forward(idx);
  const RopeTables& tables = rope_for(x);
  for (std::size_t l = 0; l < model->layers->size(); ++l) {
    x = model->layers->at<LlamaDecoderLayer>(l).run(x, positions, tables, cache,
                                                    static_cast<int64_t>(l), start);
  }
  return model->norm->forward(x);
}

Tensor Llama::run(const Tensor& idx, const Tensor& positions, KVCache* cache, const Tensor& start) {
  return matmul(hidden(idx, positions, cache, start), transpose(head_weight(), 0, 1));
}

Llama& Llama::set_mixed_precision(bool on) {
  TT_CHECK(!on || dtype() == DType::kFloat32,
           "Llama::set_mixed_precision: bfloat16 mixed precision trains float32 parameters (the "
           "master weights), got ",
           dtype_name(dtype()), " parameters");
  mixed_bf16_ = on;
  for (std::size_t l = 0; l < model->layers->size(); ++l) {
    LlamaDecoderLayer& layer = model->layers->at<LlamaDecoderLayer>(l);
    layer.self_attn->mixed_bf16 = on;
    layer.mlp->mixed_bf16 = on;
  }
  return *this;
}

Tensor Llama::forward(const Tensor& idx) {
  check_ids("Llama::forward", idx, device());
  if (dtype() == DType::kBFloat16) {  // inference: a cache of T positions, filled from 0
    KVCache cache = make_cache(idx.size(0), idx.size(1));
    return forward_cached(idx, cache, std::vector<int64_t>(static_cast<std::size_t>(idx.size(0))));
  }
  return run(idx, positions_for(idx.size(0), idx.size(1), {}), nullptr, Tensor());
}

Tensor Llama::loss(const Tensor& idx, const Tensor& targets) {
  check_ids("Llama::loss", idx, device());
  return loss_at(idx, positions_for(idx.size(0), idx.size(1), {}), targets);
}

Tensor Llama::loss_at(const Tensor& idx, const Tensor& positions, const Tensor& targets) {
  TT_CHECK(dtype() != DType::kBFloat16,
           "Llama::loss: bfloat16 parameters are for inference only (forward, forward_cached, "
           "generate on CUDA); train in float32 (chapter 11's mixed precision keeps float32 "
           "master weights)");
  check_ids("Llama::loss", idx, device());
  TT_CHECK(targets.defined() && targets.shape() == idx.shape() && positions.defined() &&
               positions.shape() == idx.shape() && positions.dtype() == DType::kInt64 &&
               positions.device() == idx.device(),
           "Llama::loss: targets and positions (int64, on idx's device) must have the shape of "
           "idx ",
           idx.describe(), ", got targets ", describe(targets), " and positions ",
           describe(positions));
  const Tensor x = hidden(idx, positions, nullptr, Tensor());
  if (mixed_bf16_) {
    return classifier_loss_bf16(tt::to_dtype(x, DType::kBFloat16), head_weight(),
                                config_.vocab_size, targets);
  }
  const Tensor logits = matmul(x, transpose(head_weight(), 0, 1));
  const int64_t n = idx.size(0) * idx.size(1);
  return cross_entropy(reshape(logits, {n, config_.vocab_size}), reshape(targets, {n}));
}

Llama& Llama::set_attention(AttentionFn fn) {
  for (std::size_t l = 0; l < model->layers->size(); ++l) {
    model->layers->at<LlamaDecoderLayer>(l).self_attn->attention = fn;
  }
  return *this;
}

Tensor Llama::forward_cached(const Tensor& idx, KVCache& cache, const std::vector<int64_t>& start) {
  check_ids("Llama::forward_cached", idx, device());
  TT_CHECK(static_cast<int64_t>(cache.k.size()) == config_.n_layers &&
               cache.batch() == idx.size(0) && static_cast<int64_t>(start.size()) == idx.size(0),
           "Llama::forward_cached: a cache of ", cache.k.size(), " layers and batch ",
           cache.batch(), " and ", start.size(), " start positions do not fit ", config_.n_layers,
           " layers and idx ", idx.describe());
  for (std::size_t b = 0; b < start.size(); ++b) {
    TT_CHECK(start[b] >= 0 && start[b] + idx.size(1) <= cache.max_len(),
             "Llama::forward_cached: row ", b, " appends positions [", start[b], ", ",
             start[b] + idx.size(1), ") to a cache of max_len ", cache.max_len());
  }
  autograd::NoGradGuard no_grad;
  const Tensor positions = positions_for(idx.size(0), idx.size(1), start);
  const Tensor start_t = from_vector(start, {idx.size(0)}).to(device());
  if (dtype() == DType::kBFloat16) {
    const bool fresh = std::all_of(start.begin(), start.end(), [](int64_t s) { return s == 0; });
    return run_bf16(idx, positions, cache, start_t, fresh);
  }
  return run(idx, positions, &cache, start_t);
}

Tensor Llama::forward_static(const Tensor& idx, const Tensor& positions, KVCache& cache,
                             const Tensor& start) {
  autograd::NoGradGuard no_grad;
  if (dtype() == DType::kBFloat16) return run_bf16(idx, positions, cache, start, false);
  return run(idx, positions, &cache, start);
}

KVCache Llama::make_cache(int64_t batch, int64_t max_len) const {
  TT_CHECK(batch > 0 && max_len > 0 && max_len <= config_.max_seq_len,
           "Llama::make_cache: expected batch > 0 and 0 < max_len <= max_seq_len = ",
           config_.max_seq_len, ", got batch ", batch, " and max_len ", max_len);
  KVCache c;
  const TensorOptions o{model->embed_tokens->weight.dtype(), device()};
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    c.k.push_back(zeros({batch, config_.n_kv_heads, max_len, config_.head_dim()}, o));
    c.v.push_back(zeros({batch, config_.n_kv_heads, max_len, config_.head_dim()}, o));
  }
  return c;
}

}  // namespace tt::llama
