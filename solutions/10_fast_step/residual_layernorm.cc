// Chapter 10 exercise ch10.8: the row cores of the fused residual + LayerNorm on the CPU
// (tt/fused_ops.h). The glue around them (checks, chunks of rows over threads, the sums of the
// weight and bias gradients over chunks, the autograd Function) is in fused_ops.cc.
#include <cmath>
#include <cstdint>

#include "tt/fused_ops.h"
#include "tt/todo.h"

namespace tt::cpu {
#if TT_SOLUTION
namespace {

/// Partial sums per row sum (a multiple of every vector width).
constexpr int64_t kLanes = 16;

/// Calls f(i, l) for every i in [0, C), l = i mod kLanes, in blocks of kLanes elements (a loop
/// of fixed length that the compiler vectorizes).
template <typename F>
void for_lanes(int64_t C, F&& f) {
  int64_t i = 0;
  for (; i + kLanes <= C; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) f(i + l, l);
  }
  for (int64_t l = 0; i < C; ++i, ++l) f(i, l);
}

/// The kLanes partial sums added pairwise, in a fixed order.
template <typename T>
T lane_total(T (&part)[kLanes]) {
  for (int64_t width = kLanes / 2; width >= 1; width /= 2) {
    for (int64_t l = 0; l < width; ++l) part[l] += part[l + width];
  }
  return part[0];
}

}  // namespace
#endif

template <typename T>
void residual_layernorm_forward_row(const T* a, const T* d, const T* w, const T* b, T* r, T* y,
                                    T* mean, T* rstd, int64_t C, T eps) {
#if TT_SOLUTION
  // One read of a and d: r is written and summed in the same sweep. Each sum runs in kLanes
  // partial sums (element i into lane i mod kLanes: for_lanes), added pairwise at the end: one
  // chain of C adds would wait on each add's latency, kLanes chains fill a vector register. The
  // order is fixed, so the result depends on no thread count and no instruction set.
  T s[kLanes] = {};
  for_lanes(C, [&](int64_t i, int64_t l) {
    r[i] = a[i] + d[i];
    s[l] += r[i];
  });
  const T mu = lane_total(s) / static_cast<T>(C);
  T q[kLanes] = {};  // the variance from r - mean: no cancellation, unlike E[r^2] - E[r]^2
  for_lanes(C, [&](int64_t i, int64_t l) { q[l] += (r[i] - mu) * (r[i] - mu); });
  const T rs = T(1) / std::sqrt(lane_total(q) / static_cast<T>(C) + eps);
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
  // The two sums in kLanes partial sums each, as in the forward.
  T sum_g[kLanes] = {}, sum_gx[kLanes] = {};
  for_lanes(C, [&](int64_t i, int64_t l) {
    const T g = dy[i] * w[i];
    sum_g[l] += g;
    sum_gx[l] += g * ((r[i] - mean) * rstd);
  });
  const T mean_g = lane_total(sum_g) / static_cast<T>(C);
  const T mean_gx = lane_total(sum_gx) / static_cast<T>(C);
  // Two loops, each with few enough pointers for the compiler to check them for overlap and
  // vectorize (one loop of three outputs and five inputs stayed scalar).
  for (int64_t i = 0; i < C; ++i) {
    const T xhat = (r[i] - mean) * rstd;
    dr[i] = dr_in[i] + rstd * (dy[i] * w[i] - mean_g - xhat * mean_gx);
  }
  for (int64_t i = 0; i < C; ++i) {
    dw_acc[i] += dy[i] * ((r[i] - mean) * rstd);
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
