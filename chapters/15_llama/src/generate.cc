// KV-cache generation (tt/generate.h): prefill, decode steps, sampling, timing.
#include "tt/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "tt/autograd.h"
#include "tt/cuda_probe.h"
#include "tt/dispatcher.h"
#include "tt/functional.h"
#include "tt/sampling.h"

#if TT_WITH_CUDA
#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#endif

namespace tt::llama {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0, Device device) {
  if (device.is_cuda()) {
    // Wait for the device so that the time covers the work, not only its launch.
    (void)Tensor(zeros({1}, {DType::kFloat32, device})).to(Device::cpu());
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The decode step of a CachedModel with forward_static, replayed as a CUDA graph (see
/// GenerateOptions::cuda_graph).
class GraphedDecode {
 public:
  GraphedDecode(const CachedModel& model, KVCache& cache, int64_t B)
      : model_(model), cache_(cache), B_(B) {
    TT_CHECK(model.device.is_cuda() && model.forward_static,
             "generate: cuda_graph needs a LLaMA (forward_static) on a CUDA device, got a model "
             "on ",
             model.device.str(), model.forward_static ? "" : " without forward_static");
    // One buffer, so that a step copies its inputs to the device in one transfer.
    inputs_ = zeros({3 * B}, {DType::kInt64, model.device});
    idx_ = inputs_.slice(0, 0, B).view({B, 1});
    pos_ = inputs_.slice(0, B, 2 * B).view({B, 1});
    start_ = inputs_.slice(0, 2 * B, 3 * B);
  }
  /// logits [B, 1, V] of tokens next[b] at positions start[b] (checked by the caller).
  Tensor step(const std::vector<int64_t>& next, const std::vector<int64_t>& start) {
    std::vector<int64_t> host = next;
    host.insert(host.end(), start.begin(), start.end());
    host.insert(host.end(), start.begin(), start.end());
    inputs_.copy_(from_vector(host, {3 * B_}));
#if TT_WITH_CUDA
    // Indices checked on the device: a host check would wait for the GPU inside the capture.
    cuda::IndexChecksGuard checks(cuda::IndexChecks::kDevice);
    if (steps_++ == 0) return model_.forward_static(idx_, pos_, cache_, start_);  // warm-up
    if (!graph_) {
      graph_ = std::make_unique<cuda::CudaGraph>(model_.device.index);
      graph_->capture([&] { logits_ = model_.forward_static(idx_, pos_, cache_, start_); });
    }
    graph_->replay();
    return logits_;
#else
    (void)model_, (void)cache_;
    TT_THROW("generate: cuda_graph needs a CUDA build (step ", steps_, ")");
#endif
  }

 private:
  const CachedModel& model_;
  KVCache& cache_;
  int64_t B_;
  Tensor inputs_, idx_, pos_, start_, logits_;
  int64_t steps_ = 0;
#if TT_WITH_CUDA
  std::unique_ptr<cuda::CudaGraph> graph_;
#endif
};

/// The greedy token of every row of logits [B, V] on CUDA through "argmax_rows" (B indices
/// copied to the host), with sample_next's errors: NaN and +inf cannot be picked, nor a row of
/// -inf only. Empty when this path does not apply (not greedy, not CUDA float32).
std::vector<int64_t> greedy_on_device(const Tensor& logits, const SamplerOptions& options) {
  if (options.temperature != 0 || !logits.device().is_cuda() || logits.dtype() != DType::kFloat32 ||
      !KernelRegistry::instance().has("argmax_rows", DeviceType::kCUDA)) {
    return {};
  }
  const Tensor rows = logits.contiguous();
  const int64_t B = rows.size(0);
  const Tensor indices = empty({B}, {DType::kInt64, rows.device()});
  const Tensor values = empty({B}, {DType::kFloat32, rows.device()});
  call_kernel<ArgmaxRowsKernel>("argmax_rows", rows.device(), indices, values, rows);
  const std::vector<float> v = values.to(Device::cpu()).to_vector<float>();
  for (int64_t b = 0; b < B; ++b) {
    TT_CHECK(std::isfinite(v[b]), "generate: the largest logit of row ", b, " is ", v[b],
             " (logits ", logits.describe(),
             "): NaN and +inf cannot be sampled from, and a row "
             "of -inf has no token");
  }
  return indices.to(Device::cpu()).to_vector<int64_t>();
}

}  // namespace

double GenerateResult::decode_tokens_per_second() const {
  const int64_t after_first = new_tokens - static_cast<int64_t>(tokens.size());
  return decode_seconds > 0 && after_first > 0 ? static_cast<double>(after_first) / decode_seconds
                                               : 0.0;
}

int64_t sample_next(const Tensor& logits, const SamplerOptions& options, Generator& gen) {
  TT_CHECK(
      logits.defined() && logits.dim() == 1 && logits.numel() > 0 && is_floating(logits.dtype()),
      "sample_next: logits must be a non-empty 1-D float tensor [V], got ",
      logits.defined() ? logits.describe() : std::string("an undefined tensor"));
  TT_CHECK(std::isfinite(options.temperature) && options.temperature >= 0,
           "sample_next: temperature must be finite and >= 0, got ", options.temperature);
  TT_CHECK(options.top_k >= 0, "sample_next: top_k must be >= 0, got ", options.top_k);
  TT_CHECK(options.top_p > 0 && options.top_p <= 1, "sample_next: top_p must be in (0, 1], got ",
           options.top_p);
  gpt2::SamplingOptions base{options.temperature, options.top_k};
  if (options.temperature == 0 || options.top_p >= 1) return gpt2::sample_token(logits, base, gen);
  std::vector<double> z = logits.to(Device::cpu()).to(DType::kFloat64).to_vector<double>();
  for (double& v : z) v /= options.temperature;
  const auto V = static_cast<int64_t>(z.size());
  if (options.top_k > 0 && options.top_k < V) {
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(),
                     std::greater<double>());
    const double kth = sorted[options.top_k - 1];
    for (double& v : z) {
      if (v < kth) v = -std::numeric_limits<double>::infinity();
    }
  }
  top_p_filter(z, options.top_p);
  return gpt2::sample_token(from_vector(z, {V}), {1.0, 0}, gen);
}

CachedModel cached_model(Llama& model) {
  CachedModel m;
  m.forward = [&model](const Tensor& idx, KVCache& cache, const std::vector<int64_t>& start) {
    return model.forward_cached(idx, cache, start);
  };
  m.make_cache = [&model](int64_t batch, int64_t max_len) {
    return model.make_cache(batch, max_len);
  };
  m.forward_static = [&model](const Tensor& idx, const Tensor& positions, KVCache& cache,
                              const Tensor& start) {
    return model.forward_static(idx, positions, cache, start);
  };
  m.vocab_size = model.config().vocab_size;
  m.max_seq_len = model.config().max_seq_len;
  m.device = model.device();
  return m;
}

CachedModel cached_model(gpt2::GPT2& model) {
  CachedModel m;
  m.forward = [&model](const Tensor& idx, KVCache& cache, const std::vector<int64_t>& start) {
    return gpt2_forward_cached(model, idx, cache, start);
  };
  m.make_cache = [&model](int64_t batch, int64_t max_len) {
    return gpt2_cache(model, batch, max_len);
  };
  m.vocab_size = model.config().vocab_size;
  m.max_seq_len = model.config().block_size;
  m.device = model.device();
  return m;
}

GenerateResult generate(Llama& model, const std::vector<std::vector<int64_t>>& prompts,
                        const GenerateOptions& options, Generator& gen) {
  return generate(cached_model(model), prompts, options, gen);
}

GenerateResult generate(const CachedModel& model, const std::vector<std::vector<int64_t>>& prompts,
                        const GenerateOptions& options, Generator& gen) {
  TT_CHECK(!prompts.empty(), "generate: no prompts");
  TT_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ",
           options.max_new_tokens);
  const int64_t V = model.vocab_size;
  const auto B = static_cast<int64_t>(prompts.size());
  int64_t longest = 0;
  for (int64_t b = 0; b < B; ++b) {
    TT_CHECK(!prompts[b].empty(), "generate: prompt ", b, " is empty");
    for (std::size_t i = 0; i < prompts[b].size(); ++i) {
      TT_CHECK(prompts[b][i] >= 0 && prompts[b][i] < V, "generate: prompt ", b, "[", i,
               "] = ", prompts[b][i], " is not a token id in [0, vocab_size = ", V, ")");
    }
    longest = std::max(longest, static_cast<int64_t>(prompts[b].size()));
  }
  GenerateResult result;
  result.tokens.assign(static_cast<std::size_t>(B), {});
  if (options.max_new_tokens == 0) return result;
  const int64_t max_len = longest + options.max_new_tokens;
  TT_CHECK(max_len <= model.max_seq_len, "generate: the longest prompt (", longest,
           ") + max_new_tokens (", options.max_new_tokens,
           ") exceeds max_seq_len = ", model.max_seq_len);
  autograd::NoGradGuard no_grad;
  const Device device = model.device;
  const auto t0 = std::chrono::steady_clock::now();
  KVCache cache = model.make_cache(B, max_len);
  // Prefill: prompts right-padded with token 0; the padding's keys are overwritten by the
  // decode steps before any query can see them.
  std::vector<int64_t> ids(static_cast<std::size_t>(B * longest), 0);
  for (int64_t b = 0; b < B; ++b)
    std::copy(prompts[b].begin(), prompts[b].end(), ids.begin() + b * longest);
  const Tensor logits0 = model.forward(from_vector(ids, {B, longest}).to(device), cache,
                                       std::vector<int64_t>(static_cast<std::size_t>(B), 0));
  std::vector<int64_t> length(static_cast<std::size_t>(B)), next(static_cast<std::size_t>(B));
  std::vector<bool> done(static_cast<std::size_t>(B), false);
  auto emit = [&](int64_t b, int64_t token) {
    result.tokens[b].push_back(token);
    ++result.new_tokens;
    next[b] = token;
    const bool stop = std::find(options.stop_tokens.begin(), options.stop_tokens.end(), token) !=
                      options.stop_tokens.end();
    if (stop || static_cast<int64_t>(result.tokens[b].size()) == options.max_new_tokens) {
      done[b] = true;
    }
  };
  for (int64_t b = 0; b < B; ++b) {
    length[b] = static_cast<int64_t>(prompts[b].size());
    emit(b, sample_next(logits0.select(0, b).select(0, length[b] - 1), options.sampling, gen));
  }
  result.prefill_seconds = seconds_since(t0, device);
  std::unique_ptr<GraphedDecode> graphed;
  if (options.cuda_graph) graphed = std::make_unique<GraphedDecode>(model, cache, B);
  const auto t1 = std::chrono::steady_clock::now();
  while (std::find(done.begin(), done.end(), false) != done.end()) {
    // Every row steps (finished rows too, their output ignored): one batch shape per step.
    const Tensor logits = graphed
                              ? graphed->step(next, length)
                              : model.forward(from_vector(next, {B, 1}).to(device), cache, length);
    ++result.decode_steps;
    const std::vector<int64_t> greedy = greedy_on_device(logits.select(1, 0), options.sampling);
    for (int64_t b = 0; b < B; ++b) {
      ++length[b];
      if (done[b]) continue;
      emit(b, greedy.empty() ? sample_next(logits.select(0, b).select(0, 0), options.sampling, gen)
                             : greedy[b]);
    }
  }
  result.decode_seconds = seconds_since(t1, device);
  return result;
}

std::vector<int64_t> generate_greedy_nocache(Llama& model, std::vector<int64_t> prompt,
                                             int64_t max_new_tokens) {
  TT_CHECK(!prompt.empty() && max_new_tokens >= 0,
           "generate_greedy_nocache: expected a non-empty prompt and max_new_tokens >= 0");
  autograd::NoGradGuard no_grad;
  std::vector<int64_t> out;
  Generator unused(0);
  for (int64_t n = 0; n < max_new_tokens; ++n) {
    const auto T = static_cast<int64_t>(prompt.size());
    const Tensor logits = model.forward(from_vector(prompt, {1, T}).to(model.device()));
    const int64_t token =
        gpt2::sample_token(logits.select(0, 0).select(0, T - 1), {0.0, 0}, unused);
    prompt.push_back(token);
    out.push_back(token);
  }
  return out;
}

}  // namespace tt::llama

namespace tt::llama {

KVCache gpt2_cache(const gpt2::GPT2& model, int64_t batch, int64_t max_len) {
  const gpt2::GPT2Config& c = model.config();
  TT_CHECK(batch > 0 && max_len > 0 && max_len <= c.block_size,
           "gpt2_cache: expected batch > 0 and 0 < max_len <= block_size = ", c.block_size,
           ", got batch ", batch, " and max_len ", max_len);
  const TensorOptions o{model.wte->weight.dtype(), model.device()};
  KVCache cache;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    cache.k.push_back(zeros({batch, c.n_head, max_len, c.n_embd / c.n_head}, o));
    cache.v.push_back(zeros({batch, c.n_head, max_len, c.n_embd / c.n_head}, o));
  }
  return cache;
}

Tensor gpt2_forward_cached(gpt2::GPT2& model, const Tensor& idx, KVCache& cache,
                           const std::vector<int64_t>& start) {
  const gpt2::GPT2Config& c = model.config();
  TT_CHECK(idx.defined() && idx.dim() == 2 && idx.dtype() == DType::kInt64 &&
               idx.device() == model.device(),
           "gpt2_forward_cached: expected int64 token ids [B, T] on ", model.device().str(),
           ", got ", idx.defined() ? idx.describe() : std::string("an undefined tensor"));
  const int64_t B = idx.size(0), T = idx.size(1), C = c.n_embd, NH = c.n_head, hs = C / NH;
  TT_CHECK(static_cast<int64_t>(cache.k.size()) == c.n_layer && cache.batch() == B &&
               static_cast<int64_t>(start.size()) == B,
           "gpt2_forward_cached: a cache of ", cache.k.size(), " layers and batch ", cache.batch(),
           " and ", start.size(), " start positions do not fit ", c.n_layer, " layers and idx ",
           idx.describe());
  autograd::NoGradGuard no_grad;
  std::vector<int64_t> pos(static_cast<std::size_t>(B * T));
  for (int64_t b = 0; b < B; ++b) {
    TT_CHECK(start[b] >= 0 && start[b] + T <= c.block_size, "gpt2_forward_cached: row ", b,
             " has positions [", start[b], ", ", start[b] + T, ") beyond block_size ",
             c.block_size);
    for (int64_t t = 0; t < T; ++t) pos[b * T + t] = start[b] + t;
  }
  Tensor x =
      add(model.wte->forward(idx), model.wpe->forward(from_vector(pos, {B, T}).to(model.device())));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    gpt2::Block& block = model.h->at<gpt2::Block>(static_cast<std::size_t>(l));
    const Tensor qkv = block.attn->c_attn->forward(block.ln_1->forward(x));  // [B, T, 3C]
    auto head = [&](int64_t i) {  // q, k or v as [B, NH, T, hs]
      return contiguous(transpose(view(slice(qkv, 2, i * C, (i + 1) * C), {B, T, NH, hs}), 1, 2));
    };
    Tensor y = kv_cache_attend(head(0), head(1), head(2), cache.k[l], cache.v[l], start);
    y = reshape(transpose(y, 1, 2), {B, T, C});
    x = add(x, block.attn->c_proj->forward(y));
    x = add(x, block.mlp->forward(block.ln_2->forward(x)));
  }
  x = model.ln_f->forward(x);
  const Tensor& w = model.wte->weight;
  return matmul(x, transpose(slice(w, 0, 0, c.vocab_size), 0, 1));
}

}  // namespace tt::llama
