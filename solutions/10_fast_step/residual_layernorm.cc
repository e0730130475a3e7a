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
#if TT_SOLUTION
  // One read of a and d: r is written and summed in the same sweep.
  T s = 0;
  for (int64_t i = 0; i < C; ++i) {
    r[i] = a[i] + d[i];
    s += r[i];
  }
  const T mu = s / static_cast<T>(C);
  T q = 0;  // the variance from r - mean: no cancellation, unlike E[r^2] - E[r]^2
  for (int64_t i = 0; i < C; ++i) q += (r[i] - mu) * (r[i] - mu);
  const T rs = T(1) / std::sqrt(q / static_cast<T>(C) + eps);
  for (int64_t i = 0; i < C; ++i) y[i] = (r[i] - mu) * rs * w[i] + b[i];
  *mean = mu;
  *rstd = rs;
#else
  (void)a, (void)d, (void)w, (void)b, (void)r, (void)y, (void)mean, (void)rstd, (void)C, (void)eps;
  TT_TODO(
      "ch10.8",
      "residual_layernorm_forward_row: r = a + d, then y = (r - mean) * rstd * w + b with the "
      "row mean, the biased variance and rstd = 1 / sqrt(var + eps); writes r, y, *mean, *rstd");
#endif
}

template <typename T>
void residual_layernorm_backward_row(const T* dr_in, const T* dy, const T* r, const T* w, T mean,
                                     T rstd, T* dr, T* dw_acc, T* db_acc, int64_t C) {
#if TT_SOLUTION
  // With xhat = (r - mean) rstd and g = dy w: the LayerNorm input gradient is
  // rstd (g - mean(g) - xhat mean(g xhat)); the residual's own gradient dr_in adds to it.
  T sum_g = 0, sum_gx = 0;
  for (int64_t i = 0; i < C; ++i) {
    const T g = dy[i] * w[i];
    sum_g += g;
    sum_gx += g * ((r[i] - mean) * rstd);
  }
  const T mean_g = sum_g / static_cast<T>(C), mean_gx = sum_gx / static_cast<T>(C);
  for (int64_t i = 0; i < C; ++i) {
    const T xhat = (r[i] - mean) * rstd;
    dr[i] = dr_in[i] + rstd * (dy[i] * w[i] - mean_g - xhat * mean_gx);
    dw_acc[i] += dy[i] * xhat;
    db_acc[i] += dy[i];
  }
#else
  (void)dr_in, (void)dy, (void)r, (void)w, (void)mean, (void)rstd, (void)dr, (void)dw_acc,
      (void)db_acc, (void)C;
  TT_TODO("ch10.8",
          "residual_layernorm_backward_row: dr = dr_in + the LayerNorm input gradient of dy "
          "(rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w); adds dy * xhat to dw_acc "
          "and dy to db_acc");
#endif
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
