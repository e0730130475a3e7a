/// @file sampling.h
/// @brief Text generation from a GPT-2: temperature and top-k sampling of the next token,
/// seeded, and the autoregressive loop (run under no_grad, so it records no graph).
#pragma once

#include <cstdint>
#include <vector>

#include "tt/generator.h"
#include "tt/gpt2.h"

namespace tt::gpt2 {

/// How the next token is drawn from the logits.
struct SamplingOptions {
  double temperature = 1.0;  ///< logits are divided by it; 0 means greedy (argmax)
  int64_t top_k = 0;         ///< keep only the k most likely tokens (0: all)
};

/// Draws one token from logits [V] (exercise ch09.3): with \f$ z_i = \ell_i / \tau \f$ over the
/// top-k logits (the others get probability 0),
/// \f$ p_i = e^{z_i - \max z} / \sum_j e^{z_j - \max z} \f$; a uniform u from `gen` picks
/// the first i whose cumulative probability exceeds u. temperature 0 returns the argmax (lowest
/// index on ties) without drawing. Logits may be on any device; -inf logits (masked tokens) get
/// probability 0. Throws tt::Error for an empty or non-float logits tensor, a NaN or +inf
/// logit, logits that are all -inf, a negative or non-finite temperature, or a negative top_k.
int64_t sample_token(const Tensor& logits, const SamplingOptions& options, Generator& gen);

/// Appends `max_new_tokens` (>= 0) sampled tokens to `prompt` (non-empty, every id in
/// [0, vocab_size); checked, naming the position) and returns the whole sequence. Each step feeds the last block_size tokens to the model under NoGradGuard, so
/// memory stays flat however many tokens are generated.
std::vector<int64_t> generate(GPT2& model, std::vector<int64_t> prompt, int64_t max_new_tokens,
                              const SamplingOptions& options, Generator& gen);

}  // namespace tt::gpt2
