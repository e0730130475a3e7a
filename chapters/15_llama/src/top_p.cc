// ============================================================================================
// YOUR EXERCISE FILE for chapter 15_llama. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch15
// Generated from solutions/15_llama/top_p.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
  TT_TODO("ch15.5",
          "top_p_filter: keep the smallest set of tokens, in decreasing softmax probability "
          "(lower index first on ties), whose probabilities sum to >= top_p (always the most "
          "likely one); set every other logit to -inf");
}

}  // namespace tt::llama
