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
#if TT_SOLUTION
  // Pass 1: the row maximum (it ignores NaN, as std::fmax does; a NaN logit makes the sum, hence
  // the row, NaN), vectorized: max_ignoring_nan (tt/safe_exp.h).
  const T max = max_ignoring_nan(row, vocab_size);
  // loss = lse - z_t with lse = max + log(sum): z - max is exact for nearby values, lse is not
  // (at |z| ~ 1e4 a float lse is off by ~5e-4), so the shift stays in every formula.
  const T shifted_target = max - row[target];  // read before the row is overwritten
  // Pass 2: each exponential once (each <= 1: no overflow), kept in the row and summed. The
  // shift, then Eigen's SIMD exp over the whole row (safe_exp_inplace: 0 for a -inf logit), then
  // the sum in double over 4 partial sums in a fixed order: one chain of adds would wait on
  // each add's latency (scalar std::exp and one chain took 57 ms of a 1.47 s CPU mini step).
  for (int64_t v = 0; v < vocab_size; ++v) row[v] -= max;
  safe_exp_inplace(row, vocab_size);
  double part[4] = {0, 0, 0, 0};
  int64_t v = 0;
  for (; v + 4 <= vocab_size; v += 4) {
    for (int j = 0; j < 4; ++j) part[j] += static_cast<double>(row[v + j]);
  }
  for (; v < vocab_size; ++v) part[0] += static_cast<double>(row[v]);
  const double sum = (part[0] + part[1]) + (part[2] + part[3]);
  const T loss = shifted_target + static_cast<T>(std::log(sum));
  // Pass 3: the gradient, in place: scale * (softmax - onehot).
  const T p_scale = static_cast<T>(static_cast<double>(scale) / sum);
  for (int64_t i = 0; i < vocab_size; ++i) row[i] *= p_scale;
  row[target] -= scale;
  return loss;
#else
  (void)row;
  (void)vocab_size;
  (void)target;
  (void)scale;
  TT_TODO("ch10.7",
          "classifier_row_xent: returns logsumexp(row) - row[target] and overwrites row[0, V) "
          "with scale * (softmax(row) - onehot(target)); finite for logits of any magnitude "
          "(|z| up to 1e4 and beyond), target in [0, V)");
#endif
}

template float classifier_row_xent<float>(float*, int64_t, int64_t, float);
template double classifier_row_xent<double>(double*, int64_t, int64_t, double);

}  // namespace tt::cpu
