// ============================================================================================
// YOUR EXERCISE FILE for chapter 10_fast_step. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch10
// Generated from solutions/10_fast_step/fused_classifier_cpu.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Exercise ch10.7: one row of the fused classifier. The row holds the logits of one token; this
// function turns it, in place, into the gradient of that token's cross-entropy, and returns the
// loss. The chunk loop, the GEMMs around it and the parallel loop over rows are given
// (fused_classifier.cc).
#include <cmath>
#include <cstdint>

#include "tt/fused_classifier.h"
#include "tt/safe_exp.h"
#include "tt/todo.h"

namespace tt::cpu {

template <typename T>
T classifier_row_xent(T* row, int64_t vocab_size, int64_t target, T scale) {
  (void)row;
  (void)vocab_size;
  (void)target;
  (void)scale;
  TT_TODO("ch10.7",
          "classifier_row_xent: returns logsumexp(row) - row[target] and overwrites row[0, V) "
          "with scale * (softmax(row) - onehot(target)); finite for logits of any magnitude "
          "(|z| up to 1e4 and beyond), target in [0, V)");
}

template float classifier_row_xent<float>(float*, int64_t, int64_t, float);
template double classifier_row_xent<double>(double*, int64_t, int64_t, double);

}  // namespace tt::cpu
