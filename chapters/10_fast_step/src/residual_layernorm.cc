// ============================================================================================
// YOUR EXERCISE FILE for chapter 10_fast_step. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch10
// Generated from solutions/10_fast_step/residual_layernorm.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 10 exercise ch10.8: the row cores of the fused residual + LayerNorm on the CPU
// (tt/fused_ops.h). The glue around them (checks, chunks of rows over threads, the sums of the
// weight and bias gradients over chunks, the autograd Function) is in fused_ops.cc.
#include <cmath>
#include <cstdint>

#include "tt/fused_ops.h"
#include "tt/todo.h"

namespace tt::cpu {

template <typename T>
void residual_layernorm_forward_row(const T* a, const T* d, const T* w, const T* b, T* r, T* y,
                                    T* mean, T* rstd, int64_t C, T eps) {
  (void)a, (void)d, (void)w, (void)b, (void)r, (void)y, (void)mean, (void)rstd, (void)C, (void)eps;
  TT_TODO(
      "ch10.8",
      "residual_layernorm_forward_row: r = a + d, then y = (r - mean) * rstd * w + b with the "
      "row mean, the biased variance and rstd = 1 / sqrt(var + eps); writes r, y, *mean, *rstd");
}

template <typename T>
void residual_layernorm_backward_row(const T* dr_in, const T* dy, const T* r, const T* w, T mean,
                                     T rstd, T* dr, T* dw_acc, T* db_acc, int64_t C) {
  (void)dr_in, (void)dy, (void)r, (void)w, (void)mean, (void)rstd, (void)dr, (void)dw_acc,
      (void)db_acc, (void)C;
  TT_TODO("ch10.8",
          "residual_layernorm_backward_row: dr = dr_in + the LayerNorm input gradient of dy "
          "(rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w); adds dy * xhat to dw_acc "
          "and dy to db_acc");
}

template void residual_layernorm_forward_row<float>(const float*, const float*, const float*,
                                                    const float*, float*, float*, float*, float*,
                                                    int64_t, float);
template void residual_layernorm_forward_row<double>(const double*, const double*, const double*,
                                                     const double*, double*, double*, double*,
                                                     double*, int64_t, double);
template void residual_layernorm_backward_row<float>(const float*, const float*, const float*,
                                                     const float*, float, float, float*, float*,
                                                     float*, int64_t);
template void residual_layernorm_backward_row<double>(const double*, const double*, const double*,
                                                      const double*, double, double, double*,
                                                      double*, double*, int64_t);

}  // namespace tt::cpu
