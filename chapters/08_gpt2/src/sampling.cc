// ============================================================================================
// YOUR EXERCISE FILE for chapter 08_gpt2. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch08
// Generated from solutions/08_gpt2/sampling.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Sampling the next token (exercise ch08.7) and the generation loop (tt/sampling.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tt/autograd.h"
#include "tt/functional.h"
#include "tt/sampling.h"
#include "tt/todo.h"

namespace tt::gpt2 {

int64_t sample_token(const Tensor& logits, const SamplingOptions& options, Generator& gen) {
  TT_CHECK(
      logits.defined() && logits.dim() == 1 && logits.numel() > 0 && is_floating(logits.dtype()),
      "sample_token: logits must be a non-empty 1-D float tensor [V], got ",
      logits.defined() ? logits.describe() : std::string("an undefined tensor"));
  TT_CHECK(options.temperature >= 0, "sample_token: temperature must be >= 0, got ",
           options.temperature);
  TT_CHECK(options.top_k >= 0, "sample_token: top_k must be >= 0, got ", options.top_k);
  (void)gen;
  TT_TODO("ch08.7",
          "top-k/temperature sampling: copy the logits to the CPU, argmax when temperature is "
          "0, else keep the top_k largest, p_i = exp((l_i - max) / temperature), draw "
          "u = gen.next_uniform() * sum(p) and return the first i whose cumulative p exceeds u");
}

std::vector<int64_t> generate(GPT2& model, std::vector<int64_t> prompt, int64_t max_new_tokens,
                              const SamplingOptions& options, Generator& gen) {
  TT_CHECK(!prompt.empty(), "generate: the prompt must hold at least one token");
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
