/// @file generate.h
/// @brief Inference with a KV cache (chapter 15): batched prompts of different lengths are
/// prefilled in one forward, then decoded one token per row per step, each step appending to
/// a preallocated cache; greedy, temperature, top-k and top-p sampling from a seeded generator;
/// stop tokens; time to first token and decode tokens/s.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tt/generator.h"
#include "tt/gpt2.h"
#include "tt/llama.h"

namespace tt::llama {

/// How the next token is drawn. The logits are divided by the temperature, the top_k largest
/// kept, then the smallest set of most likely tokens whose probability reaches top_p.
struct SamplerOptions {
  double temperature = 1.0;  ///< 0: greedy (argmax, lowest index on ties), no draw
  int64_t top_k = 0;         ///< 0: all tokens
  double top_p = 1.0;        ///< in (0, 1]; 1: no nucleus filtering
};

/// Top-p (nucleus) filtering of logits (exercise ch15.5): with p = softmax(logits), keeps the
/// smallest set of tokens, taken in decreasing probability (lower index first on ties), whose
/// probabilities sum to at least `top_p`, and sets every other logit to -inf. The most likely
/// token is always kept; top_p >= 1 keeps every token with a finite logit. Throws tt::Error for
/// top_p outside (0, 1] or logits without a finite value.
void top_p_filter(std::vector<double>& logits, double top_p);

/// "argmax_rows" kernel (CUDA): indices[r] = the first index of the largest value of row r of
/// float32 logits [R, V] (a NaN counts as the largest: the first NaN), values[r] = that value
/// (int64 and float32 [R], on the logits' device). generate()'s greedy steps on CUDA pick every
/// row's token with it and copy R indices to the host instead of R rows of V logits.
using ArgmaxRowsKernel = void(const Tensor& indices, const Tensor& values, const Tensor& logits);

/// Draws the next token from logits [V] (any float dtype and device): temperature, then top-k,
/// then top_p_filter, then chapter 09's sample_token on what is left (one gen.next_uniform()).
int64_t sample_next(const Tensor& logits, const SamplerOptions& options, Generator& gen);

/// What generate() does.
struct GenerateOptions {
  int64_t max_new_tokens = 64;  ///< per row, >= 0
  SamplerOptions sampling;      ///< how each token is drawn
  /// A row ends after emitting one of these (kept in its output).
  std::vector<int64_t> stop_tokens;
  /// Replay the decode step as a CUDA graph (a LLaMA on CUDA: CachedModel::forward_static):
  /// the first step runs eagerly, the second is captured, every later one is a replay of fixed
  /// device buffers of tokens, positions and start, copied in before it. Same tokens.
  bool cuda_graph = false;
};

/// The result of generate().
struct GenerateResult {
  std::vector<std::vector<int64_t>> tokens;  ///< per row: the new tokens only
  double prefill_seconds = 0;                ///< time to first token (prefill + first sample)
  double decode_seconds = 0;                 ///< the decode steps
  int64_t decode_steps = 0;                  ///< forward_cached calls after the prefill
  int64_t new_tokens = 0;                    ///< tokens emitted over all rows
  /// New tokens after the first, per second of decoding (0 without decode steps).
  double decode_tokens_per_second() const;
};

/// A decoder that generate() can drive: a cached forward and how to make its cache.
struct CachedModel {
  /// logits [B, Tq, V] of idx [B, Tq] at positions start[b] to start[b] + Tq - 1, appending the
  /// keys and values to the cache (no autograd graph).
  std::function<Tensor(const Tensor& idx, KVCache& cache, const std::vector<int64_t>& start)>
      forward;
  /// A cache of `batch` rows of `max_len` positions.
  std::function<KVCache(int64_t batch, int64_t max_len)> make_cache;
  /// Llama::forward_static (null for a model without one): what GenerateOptions::cuda_graph
  /// captures.
  std::function<Tensor(const Tensor& idx, const Tensor& positions, KVCache& cache,
                       const Tensor& start)>
      forward_static;
  int64_t vocab_size = 0;   ///< V: ids in [0, V)
  int64_t max_seq_len = 0;  ///< positions the model has
  Device device;            ///< where idx must be
};

/// The CachedModel of a Llama (forward_cached, make_cache).
CachedModel cached_model(Llama& model);

/// GPT-2 (chapter 09) with a KV cache: logits [B, Tq, V] of idx [B, Tq] at positions start[b] +
/// t (wpe rows), through the model's own modules (ln_1, c_attn, c_proj, ln_2, mlp, ln_f and the
/// tied head), each block's keys and values appended to `cache` (from gpt2_cache()). Equals
/// GPT2::forward on the whole sequence up to rounding. No autograd graph.
Tensor gpt2_forward_cached(gpt2::GPT2& model, const Tensor& idx, KVCache& cache,
                           const std::vector<int64_t>& start);

/// A zeroed cache for GPT-2: per block [batch, NH, max_len, hs] (max_len <= block_size).
KVCache gpt2_cache(const gpt2::GPT2& model, int64_t batch, int64_t max_len);

/// The CachedModel of a GPT-2 (gpt2_forward_cached, gpt2_cache).
CachedModel cached_model(gpt2::GPT2& model);

/// Generates from `prompts` (each non-empty, ids in [0, V)) with a cache of max prompt length
/// + max_new_tokens positions: one padded prefill (row b's first token is sampled from its
/// logits at position len_b - 1), then decode steps of one token per row at row b's own
/// position until every row has max_new_tokens or has emitted a stop token. Rows are sampled
/// in order from `gen`, so a seed gives one result. Runs under no_grad.
GenerateResult generate(const CachedModel& model, const std::vector<std::vector<int64_t>>& prompts,
                        const GenerateOptions& options, Generator& gen);

/// generate(cached_model(model), ...).
GenerateResult generate(Llama& model, const std::vector<std::vector<int64_t>>& prompts,
                        const GenerateOptions& options, Generator& gen);

/// Greedy generation by full recomputation (no cache): each step runs forward() on the whole
/// sequence. The reference of the cache's tests.
std::vector<int64_t> generate_greedy_nocache(Llama& model, std::vector<int64_t> prompt,
                                             int64_t max_new_tokens);

}  // namespace tt::llama
