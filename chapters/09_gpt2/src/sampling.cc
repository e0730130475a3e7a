// ============================================================================================
// YOUR EXERCISE FILE for chapter 09_gpt2. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch09
// Generated from solutions/09_gpt2/sampling.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Sampling the next token (exercise ch09.3) and the generation loop (tt/sampling.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tt/autograd.h"
#include "tt/functional.h"
#include "tt/safe_exp.h"
#include "tt/sampling.h"
#include "tt/todo.h"

namespace tt::gpt2 {

int64_t sample_token(const Tensor& logits, const SamplingOptions& options, Generator& gen) {
  TT_CHECK(
      logits.defined() && logits.dim() == 1 && logits.numel() > 0 && is_floating(logits.dtype()),
      "sample_token: logits must be a non-empty 1-D float tensor [V], got ",
      logits.defined() ? logits.describe() : std::string("an undefined tensor"));
  TT_CHECK(std::isfinite(options.temperature) && options.temperature >= 0,
           "sample_token: temperature must be finite and >= 0, got ", options.temperature);
  TT_CHECK(options.top_k >= 0, "sample_token: top_k must be >= 0, got ", options.top_k);
  // NaN and +inf have no probability; -inf is probability 0 (a masked token), but not for all.
  const std::vector<double> l = logits.to(Device::cpu()).to(DType::kFloat64).to_vector<double>();
  bool any_finite = false;
  for (std::size_t i = 0; i < l.size(); ++i) {
    TT_CHECK(!std::isnan(l[i]) && l[i] != INFINITY, "sample_token: logits[", i, "] = ", l[i],
             " (logits ", logits.describe(), "): NaN and +inf cannot be sampled from");
    any_finite = any_finite || std::isfinite(l[i]);
  }
  TT_CHECK(any_finite, "sample_token: every logit is -inf (logits ", logits.describe(), ")");
  (void)gen;
  TT_TODO("ch09.3",
          "sample_token: an index into the logits l [V]; temperature 0: the first argmax; else "
          "index i with probability proportional to exp((l_i - max) / temperature) among the "
          "top_k largest logits (0 or >= V: all; ties at the k-th all kept), drawn by one "
          "gen.next_uniform() against the cumulative sum in index order");
}

std::vector<int64_t> generate(GPT2& model, std::vector<int64_t> prompt, int64_t max_new_tokens,
                              const SamplingOptions& options, Generator& gen) {
  TT_CHECK(!prompt.empty(), "generate: the prompt must hold at least one token");
  TT_CHECK(max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  const int64_t V = model.config().vocab_size;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    TT_CHECK(prompt[i] >= 0 && prompt[i] < V, "generate: prompt[", i, "] = ", prompt[i],
             " is not a token id in [0, vocab_size = ", V, ")");
  }
  autograd::NoGradGuard no_grad;
  const int64_t window = model.config().block_size;
  for (int64_t n = 0; n < max_new_tokens; ++n) {
    const auto len = static_cast<int64_t>(prompt.size());
    const int64_t t = std::min(len, window);
    const std::vector<int64_t> context(prompt.end() - t, prompt.end());
    const Tensor idx = from_vector(context, {1, t}).to(model.device());
    const Tensor logits = model.forward(idx);  // [1, t, V]
    prompt.push_back(sample_token(logits.select(0, 0).select(0, t - 1), options, gen));
  }
  return prompt;
}

}  // namespace tt::gpt2
