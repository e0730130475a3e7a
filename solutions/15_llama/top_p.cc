// Top-p (nucleus) filtering of the logits before sampling (exercise ch15.5).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "tt/error.h"
#include "tt/generate.h"
#include "tt/todo.h"

namespace tt::llama {

void top_p_filter(std::vector<double>& logits, double top_p) {
  TT_CHECK(top_p > 0 && top_p <= 1, "top_p_filter: top_p must be in (0, 1], got ", top_p);
  double mx = -std::numeric_limits<double>::infinity();
  for (double v : logits) {
    TT_CHECK(!std::isnan(v), "top_p_filter: a logit is NaN");
    mx = std::max(mx, v);
  }
  TT_CHECK(std::isfinite(mx), "top_p_filter: no finite logit among ", logits.size());
#if TT_SOLUTION
  if (top_p >= 1) return;
  std::vector<std::size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
  double total = 0;
  for (double v : logits) total += std::exp(v - mx);
  double cum = 0;
  std::size_t keep = 0;
  while (keep < order.size()) {
    cum += std::exp(logits[order[keep]] - mx) / total;
    ++keep;
    if (cum >= top_p) break;
  }
  for (std::size_t i = keep; i < order.size(); ++i) {
    logits[order[i]] = -std::numeric_limits<double>::infinity();
  }
#else
  TT_TODO("ch15.5",
          "top_p_filter: keep the smallest set of tokens, in decreasing softmax probability "
          "(lower index first on ties), whose probabilities sum to >= top_p (always the most "
          "likely one); set every other logit to -inf");
#endif
}

}  // namespace tt::llama
