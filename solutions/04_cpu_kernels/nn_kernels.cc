// Chapter 04 exercises ch04.10 - ch04.16: the CPU kernels of the neural-network ops.
//
// Every kernel writes into tensors its caller allocated (contiguous, except the mask of
// masked_fill, which may be a broadcast view). Parallel loops use `schedule(static)` over a
// fixed partition and each output element is produced by exactly one iteration in a fixed
// order, so the results do not depend on the number of threads.
//
// Exceptions must never leave an OpenMP parallel region (that calls std::terminate): every
// check (dtype, index range) runs before the parallel loop.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "tt/eigen.h"
#include "tt/ops_nn.h"
#include "tt/safe_exp.h"
#include "tt/todo.h"

namespace tt::cpu {

namespace {

/// A contiguous tensor seen as [outer, n, inner] around `dim`: element (o, i, k) is at
/// (o * n + i) * inner + k. A "row" is the n elements (o, :, k), `inner` apart.
struct DimLayout {
  int64_t outer = 1;  ///< product of the sizes before dim
  int64_t n = 1;      ///< size of dim
  int64_t inner = 1;  ///< product of the sizes after dim (the stride of dim)
  /// Number of rows.
  int64_t rows() const { return outer * inner; }
  /// Offset of the first element of row r.
  int64_t row_start(int64_t r) const { return (r / inner) * n * inner + r % inner; }
};

inline DimLayout dim_layout(const Tensor& t, int64_t dim) {
  const int64_t d = wrap_dim(dim, t.dim(), "softmax");
  DimLayout l;
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i < d) l.outer *= t.size(i);
    if (i > d) l.inner *= t.size(i);
  }
  l.n = t.dim() == 0 ? 1 : t.size(d);
  return l;
}

/// Columns per block of the column-parallel reductions (embedding and layernorm weight
/// gradients): 64 floats = one 256-byte stretch per row.
constexpr int64_t kColumnBlock = 64;

/// Throws tt::Error naming `op` when an entry of int64 `indices` is outside [0, size) and is not
/// `allowed` (the ignore index of cross-entropy).
inline void check_indices(const char* op, const Tensor& indices, int64_t size,
                          std::optional<int64_t> allowed, const char* what) {
  TT_CHECK(indices.dtype() == DType::kInt64, op, ": ", what, " must be int64, got ",
           indices.describe());
  const int64_t* idx = indices.data<int64_t>();
  for (int64_t i = 0; i < indices.numel(); ++i) {
    TT_CHECK((idx[i] >= 0 && idx[i] < size) || idx[i] == allowed, op, ": ", what, "[", i,
             "] = ", idx[i], " is out of range [0, ", size, ") (", what, " shape ", indices.shape(),
             ", dtype ", dtype_name(indices.dtype()), ")");
  }
}

}  // namespace

// ----- softmax / log_softmax ---------------------------------------------------------------------

#if TT_SOLUTION
namespace {
// Softmax and log-softmax of every row. The row maximum m is subtracted before exp, so
// exp never overflows (the largest term is exp(0) = 1) and the sum is at least 1. safe_exp
// (tt/safe_exp.h) makes a -inf (masked) entry exactly 0 on every CPU.
template <typename T, bool kLog>
void softmax_rows(const Tensor& out, const Tensor& x, int64_t dim) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  const DimLayout l = dim_layout(x, dim);
  const T* px = x.data<T>();
  T* po = out.data<T>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < l.rows(); ++r) {
    const T* xr = px + l.row_start(r);
    T* yr = po + l.row_start(r);
    const int64_t s = l.inner;
    double sum = 0;
    if (s == 1 && l.n > 0) {
      // A contiguous, non-empty row (softmax over the last dim): Eigen's max and exp run on
      // SIMD lanes; the sum stays one double accumulator in element order.
      const Eigen::Map<const Array> xv(xr, l.n);
      Eigen::Map<Array> yv(yr, l.n);
      const T m = xv.template maxCoeff<Eigen::PropagateNaN>();
      yv = xv - m;
      safe_exp_inplace(yr, l.n);
      for (int64_t i = 0; i < l.n; ++i) sum += yr[i];
      if constexpr (kLog) {
        yv = xv - (m + static_cast<T>(std::log(sum)));
      } else {
        yv *= static_cast<T>(1.0 / sum);
      }
      continue;
    }
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < l.n; ++i) m = std::max(m, xr[i * s]);
    if constexpr (kLog) {
      for (int64_t i = 0; i < l.n; ++i) sum += safe_exp(xr[i * s] - m);
      const T lse = m + static_cast<T>(std::log(sum));
      for (int64_t i = 0; i < l.n; ++i) yr[i * s] = xr[i * s] - lse;
    } else {
      for (int64_t i = 0; i < l.n; ++i) {
        const T e = safe_exp(xr[i * s] - m);
        yr[i * s] = e;
        sum += e;
      }
      const T inv = static_cast<T>(1.0 / sum);
      for (int64_t i = 0; i < l.n; ++i) yr[i * s] *= inv;
    }
  }
}

// dx of softmax (y = out): dx_i = y_i (dy_i - sum_j dy_j y_j); of log-softmax:
// dx_i = dy_i - exp(y_i) sum_j dy_j.
template <typename T, bool kLog>
void softmax_backward_rows(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim) {
  const DimLayout l = dim_layout(out, dim);
  const T* pdy = dout.data<T>();
  const T* py = out.data<T>();
  T* pdx = dx.data<T>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < l.rows(); ++r) {
    const int64_t start = l.row_start(r), s = l.inner;
    const T* dy = pdy + start;
    const T* y = py + start;
    T* d = pdx + start;
    double acc = 0;
    for (int64_t i = 0; i < l.n; ++i) acc += kLog ? dy[i * s] : dy[i * s] * y[i * s];
    const T dot = static_cast<T>(acc);
    for (int64_t i = 0; i < l.n; ++i) {
      d[i * s] = kLog ? dy[i * s] - safe_exp(y[i * s]) * dot : y[i * s] * (dy[i * s] - dot);
    }
  }
}
}  // namespace
#endif

void softmax_forward(const Tensor& out, const Tensor& x, int64_t dim) {
#if TT_SOLUTION
  dispatch_floating(x.dtype(), "softmax_forward",
                    [&]<typename T>() { softmax_rows<T, false>(out, x, dim); });
#else
  TT_TODO(
      "ch04.10",
      "cpu::softmax_forward: out = exp(x) / sum of exp(x) along dim (x and out contiguous, any shape and dim), finite for any finite x however large");
#endif
}

void log_softmax_forward(const Tensor& out, const Tensor& x, int64_t dim) {
#if TT_SOLUTION
  dispatch_floating(x.dtype(), "log_softmax_forward",
                    [&]<typename T>() { softmax_rows<T, true>(out, x, dim); });
#else
  TT_TODO(
      "ch04.10",
      "cpu::log_softmax_forward: out = x - log(sum of exp(x)) along dim, finite where softmax underflows to 0");
#endif
}

void softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim) {
#if TT_SOLUTION
  dispatch_floating(out.dtype(), "softmax_backward",
                    [&]<typename T>() { softmax_backward_rows<T, false>(dx, dout, out, dim); });
#else
  TT_TODO(
      "ch04.11",
      "cpu::softmax_backward: dx = the vector-Jacobian product of softmax along dim with dout, from the forward output out alone");
#endif
}

void log_softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim) {
#if TT_SOLUTION
  dispatch_floating(out.dtype(), "log_softmax_backward",
                    [&]<typename T>() { softmax_backward_rows<T, true>(dx, dout, out, dim); });
#else
  TT_TODO(
      "ch04.11",
      "cpu::log_softmax_backward: dx = the vector-Jacobian product of log_softmax along dim with dout, from the forward output out alone");
#endif
}

TT_REGISTER_KERNEL("softmax_forward", DeviceType::kCPU, softmax_forward);
TT_REGISTER_KERNEL("softmax_backward", DeviceType::kCPU, softmax_backward);
TT_REGISTER_KERNEL("log_softmax_forward", DeviceType::kCPU, log_softmax_forward);
TT_REGISTER_KERNEL("log_softmax_backward", DeviceType::kCPU, log_softmax_backward);

// ----- layernorm ---------------------------------------------------------------------------------

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& weight, const Tensor& bias, double eps) {
#if TT_SOLUTION
  dispatch_floating(x.dtype(), "layernorm_forward", [&]<typename T>() {
    const int64_t C = x.size(-1), rows = x.numel() / C;
    const T* px = x.data<T>();
    const T* w = weight.data<T>();
    const T* b = bias.data<T>();
    T* po = out.data<T>();
    T* pm = mean.data<T>();
    T* pr = rstd.data<T>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = px + r * C;
      double sum = 0;
      for (int64_t i = 0; i < C; ++i) sum += xr[i];
      const double mu = sum / C;
      double var = 0;  // two passes: no cancellation, unlike E[x^2] - E[x]^2
      for (int64_t i = 0; i < C; ++i) var += (xr[i] - mu) * (xr[i] - mu);
      const T m = static_cast<T>(mu);
      const T rs = static_cast<T>(1.0 / std::sqrt(var / C + eps));
      T* yr = po + r * C;
      for (int64_t i = 0; i < C; ++i) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
      pm[r] = m;
      pr[r] = rs;
    }
  });
#else
  TT_TODO(
      "ch04.12",
      "cpu::layernorm_forward: per row of the last dim (size C): out = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(biased variance + eps), mean and rstd stored per row; accurate when |mean| >> std");
#endif
}

void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                        const Tensor& dout, const Tensor& x, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd) {
#if TT_SOLUTION
  dispatch_floating(x.dtype(), "layernorm_backward", [&]<typename T>() {
    const int64_t C = x.size(-1), rows = x.numel() / C;
    const T* px = x.data<T>();
    const T* pdy = dout.data<T>();
    const T* w = weight.data<T>();
    const T* pm = mean.data<T>();
    const T* pr = rstd.data<T>();
    T* pdx = dx.data<T>();
    // dx: rows in parallel.
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = px + r * C;
      const T* dy = pdy + r * C;
      const T m = pm[r], rs = pr[r];
      double sum_g = 0, sum_gx = 0;
      for (int64_t i = 0; i < C; ++i) {
        const T g = dy[i] * w[i];
        sum_g += g;
        sum_gx += g * ((xr[i] - m) * rs);
      }
      const T mean_g = static_cast<T>(sum_g / C), mean_gx = static_cast<T>(sum_gx / C);
      T* d = pdx + r * C;
      for (int64_t i = 0; i < C; ++i) {
        d[i] = rs * (dy[i] * w[i] - mean_g - (xr[i] - m) * rs * mean_gx);
      }
    }
    // dweight, dbias: sums over rows. Column blocks in parallel, rows in order inside a block,
    // so every sum has the same order whatever the thread count.
    T* dw = dweight.data<T>();
    T* db = dbias.data<T>();
    const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t c0 = blk * kColumnBlock, c1 = std::min(C, c0 + kColumnBlock);
      double acc_w[kColumnBlock] = {}, acc_b[kColumnBlock] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const T m = pm[r], rs = pr[r];
        for (int64_t c = c0; c < c1; ++c) {
          const T dy = pdy[r * C + c];
          acc_w[c - c0] += dy * ((px[r * C + c] - m) * rs);
          acc_b[c - c0] += dy;
        }
      }
      for (int64_t c = c0; c < c1; ++c) {
        dw[c] = static_cast<T>(acc_w[c - c0]);
        db[c] = static_cast<T>(acc_b[c - c0]);
      }
    }
  });
#else
  TT_TODO(
      "ch04.13",
      "cpu::layernorm_backward: dx, dweight and dbias of layernorm for dout, from x, weight and the forward's mean and rstd; the same bits for any thread count");
#endif
}

TT_REGISTER_KERNEL("layernorm_forward", DeviceType::kCPU, layernorm_forward);
TT_REGISTER_KERNEL("layernorm_backward", DeviceType::kCPU, layernorm_backward);

// ----- gelu --------------------------------------------------------------------------------------

#if TT_SOLUTION
namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluCoeff = 0.044715;
/// Elements per parallel chunk of the GELU kernels (a fixed partition).
constexpr int64_t kGeluChunk = 4096;
}  // namespace
#endif

void gelu_forward(const Tensor& out, const Tensor& x) {
#if TT_SOLUTION
  dispatch_floating(x.dtype(), "gelu_forward", [&]<typename T>() {
    using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T beta = static_cast<T>(kSqrt2OverPi), kappa = static_cast<T>(kGeluCoeff);
    const int64_t n = x.numel(), chunks = (n + kGeluChunk - 1) / kGeluChunk;
    // Eigen arrays over fixed chunks: the whole expression, tanh included, runs on SIMD lanes.
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t b = c * kGeluChunk, len = std::min(kGeluChunk, n - b);
      const Eigen::Map<const Array> v(px + b, len);
      Eigen::Map<Array>(po + b, len) = T(0.5) * v * (T(1) + (beta * (v + kappa * v.cube())).tanh());
    }
  });
#else
  TT_TODO(
      "ch04.14",
      "cpu::gelu_forward: out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) elementwise (GPT-2's tanh approximation)");
#endif
}

void gelu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) {
#if TT_SOLUTION
  dispatch_floating(x.dtype(), "gelu_backward", [&]<typename T>() {
    using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
    const T* px = x.data<T>();
    const T* pdy = dout.data<T>();
    T* pdx = dx.data<T>();
    const T beta = static_cast<T>(kSqrt2OverPi), kappa = static_cast<T>(kGeluCoeff);
    const int64_t n = x.numel(), chunks = (n + kGeluChunk - 1) / kGeluChunk;
#pragma omp parallel
    {
      Array u_buf(kGeluChunk), e_buf(kGeluChunk);  // this thread's u and e of one chunk
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t b = c * kGeluChunk, len = std::min(kGeluChunk, n - b);
        const Eigen::Map<const Array> v(px + b, len), dy(pdy + b, len);
        auto u = u_buf.head(len);
        auto e = e_buf.head(len);
        u = beta * (v + kappa * v.cube());
        // 1 + tanh(u) and 1 - tanh(u)^2 from e = exp(-2|u|) in (0, 1], not from tanh(u): where
        // tanh(u) ~ -1 (x below about -4.8) 1 + tanh(u) cancels, and a SIMD tanh that saturates
        // to exactly -1 (Eigen's does past |u| = 7.9) makes the tail 0 or not depending on the
        // instruction set. Here no term cancels or overflows, on every CPU.
        e = T(-2) * u.abs();
        safe_exp_inplace(e.data(), len);
        Eigen::Map<Array>(pdx + b, len) =
            dy * (T(0.5) * (u < T(0)).select(T(2) * e / (T(1) + e), T(2) / (T(1) + e)) +
                  T(0.5) * v * (T(4) * e / ((T(1) + e) * (T(1) + e))) * beta *
                      (T(1) + T(3) * kappa * v.square()));
      }
    }
  });
#else
  TT_TODO(
      "ch04.14",
      "cpu::gelu_backward: dx = dout * gelu'(x) elementwise, gelu' the derivative of the tanh approximation");
#endif
}

TT_REGISTER_KERNEL("gelu_forward", DeviceType::kCPU, gelu_forward);
TT_REGISTER_KERNEL("gelu_backward", DeviceType::kCPU, gelu_backward);

// ----- embedding ---------------------------------------------------------------------------------

void embedding_forward(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t V = weight.size(0), C = weight.size(1);
  check_indices("embedding_forward", indices, V, std::nullopt, "indices");
  const int64_t* idx = indices.data<int64_t>();
  const std::size_t row_bytes = static_cast<std::size_t>(C) * dtype_size(weight.dtype());
  const auto* w = static_cast<const char*>(weight.data_ptr());
  auto* o = static_cast<char*>(out.data_ptr());
  const int64_t n = indices.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(o + i * row_bytes, w + idx[i] * row_bytes, row_bytes);
  }
}

void embedding_backward(const Tensor& dweight, const Tensor& dout, const Tensor& indices) {
#if TT_SOLUTION
  const int64_t V = dweight.size(0), C = dweight.size(1);
  check_indices("embedding_backward", indices, V, std::nullopt, "indices");
  dispatch_floating(dweight.dtype(), "embedding_backward", [&]<typename T>() {
    const int64_t* idx = indices.data<int64_t>();
    const T* dy = dout.data<T>();
    T* dw = dweight.data<T>();
    std::fill(dw, dw + V * C, T(0));
    // Two tokens with the same index write the same row: parallelizing over tokens would race.
    // Instead each thread owns a block of columns and walks all tokens in order.
    const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock, n = indices.numel();
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t c0 = blk * kColumnBlock, c1 = std::min(C, c0 + kColumnBlock);
      for (int64_t i = 0; i < n; ++i) {
        T* row = dw + idx[i] * C;
        const T* g = dy + i * C;
        for (int64_t c = c0; c < c1; ++c) row[c] += g[c];
      }
    }
  });
#else
  TT_TODO(
      "ch04.15",
      "cpu::embedding_backward: dweight[v, :] = the sum of dout[i, :] over every i with indices[i] == v (zeros for unused rows); throws naming an index out of [0, V); the same bits for any thread count");
#endif
}

TT_REGISTER_KERNEL("embedding_forward", DeviceType::kCPU, embedding_forward);
TT_REGISTER_KERNEL("embedding_backward", DeviceType::kCPU, embedding_backward);

// ----- cross-entropy -----------------------------------------------------------------------------

#if TT_SOLUTION
namespace {
// Number of rows whose target is not ignore_index.
int64_t count_targets(const Tensor& targets, int64_t ignore_index) {
  const int64_t* t = targets.data<int64_t>();
  return std::count_if(t, t + targets.numel(), [&](int64_t v) { return v != ignore_index; });
}
}  // namespace
#endif

void cross_entropy_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets, int64_t ignore_index) {
#if TT_SOLUTION
  const int64_t N = logits.size(0), V = logits.size(1);
  check_indices("cross_entropy", targets, V, ignore_index, "targets");
  dispatch_floating(logits.dtype(), "cross_entropy_forward", [&]<typename T>() {
    const T* x = logits.data<T>();
    const int64_t* t = targets.data<int64_t>();
    T* plse = lse.data<T>();
    using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
    std::vector<double> row_loss(N);
#pragma omp parallel
    {
      Array e(V);  // this thread's exp(x - max) of one row (SIMD exp, -inf -> 0: safe_exp.h)
#pragma omp for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        const T* xr = x + n * V;
        const Eigen::Map<const Array> xv(xr, V);
        const T m = xv.template maxCoeff<Eigen::PropagateNaN>();
        e = xv - m;
        safe_exp_inplace(e.data(), V);
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += e[v];
        const double l = m + std::log(sum);
        plse[n] = static_cast<T>(l);
        row_loss[n] = t[n] == ignore_index ? 0.0 : l - xr[t[n]];  // -log softmax(x)[t]
      }
    }
    double total = 0;  // rows in order: the same sum for any thread count
    for (int64_t n = 0; n < N; ++n) total += row_loss[n];
    // 0 / 0 = NaN when every row is ignored, like PyTorch.
    loss.data<T>()[0] =
        static_cast<T>(total / static_cast<double>(count_targets(targets, ignore_index)));
  });
#else
  TT_TODO(
      "ch04.16",
      "cpu::cross_entropy_forward: lse[n] = log sum exp(logits[n, :]); loss = mean over the rows whose target is not ignore_index of lse[n] - logits[n, target[n]] (NaN if none); logits [N, V]; throws naming a target out of [0, V)");
#endif
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits,
                            const Tensor& targets, const Tensor& lse, int64_t ignore_index) {
#if TT_SOLUTION
  const int64_t N = logits.size(0), V = logits.size(1);
  check_indices("cross_entropy_backward", targets, V, ignore_index, "targets");
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&]<typename T>() {
    const T* x = logits.data<T>();
    const int64_t* t = targets.data<int64_t>();
    const T* plse = lse.data<T>();
    T* dx = dlogits.data<T>();
    const T scale = static_cast<T>(dloss.data<T>()[0] /
                                   static_cast<double>(count_targets(targets, ignore_index)));
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      T* d = dx + n * V;
      if (t[n] == ignore_index) {
        std::fill(d, d + V, T(0));
        continue;
      }
      const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> xv(x + n * V, V);
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> dv(d, V);
      dv = xv - plse[n];
      safe_exp_inplace(d, V);  // softmax, exactly 0 for a -inf logit
      dv *= scale;
      d[t[n]] -= scale;  // softmax - one-hot
    }
  });
#else
  TT_TODO(
      "ch04.16",
      "cpu::cross_entropy_backward: dlogits = dloss * d loss / d logits (zeros on ignored rows), from the forward's lse; throws naming a target out of [0, V)");
#endif
}

TT_REGISTER_KERNEL("cross_entropy_forward", DeviceType::kCPU, cross_entropy_forward);
TT_REGISTER_KERNEL("cross_entropy_backward", DeviceType::kCPU, cross_entropy_backward);

// ----- masked fill -------------------------------------------------------------------------------

namespace {
// Calls f(i, masked) for every element i of x's (contiguous) shape, masked = mask element != 0.
// The mask has x's shape but any strides (0 where it is broadcast, e.g. a [T, T] causal mask
// expanded to [B, nh, T, T]): rows of the last dim are walked with the mask's strides.
template <typename F>
void for_each_masked(const Tensor& x, const Tensor& mask, F f) {
  TT_CHECK(mask.dtype() == DType::kInt64, "masked_fill: mask must be int64, got ", mask.describe());
  const int64_t* pm = mask.data<int64_t>();
  const int64_t nd = x.dim(), L = nd == 0 ? 1 : x.size(-1), rows = L == 0 ? 0 : x.numel() / L;
  const int64_t ms = nd == 0 ? 0 : mask.stride(-1);
  const Shape& shape = x.shape();
  const Strides& mstrides = mask.strides();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t moff = 0;  // mask offset of row r: unravel r over the leading dims
    for (int64_t d = nd - 2, rem = r; d >= 0; --d) {
      moff += (rem % shape[d]) * mstrides[d];
      rem /= shape[d];
    }
    for (int64_t i = 0; i < L; ++i) f(r * L + i, pm[moff + i * ms] != 0);
  }
}
}  // namespace

void masked_fill_forward(const Tensor& out, const Tensor& x, const Tensor& mask, double value) {
  dispatch_floating(x.dtype(), "masked_fill_forward", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T v = static_cast<T>(value);
    for_each_masked(x, mask, [&](int64_t i, bool masked) { po[i] = masked ? v : px[i]; });
  });
}

void masked_fill_backward(const Tensor& dx, const Tensor& dout, const Tensor& mask) {
  dispatch_floating(dout.dtype(), "masked_fill_backward", [&]<typename T>() {
    const T* dy = dout.data<T>();
    T* d = dx.data<T>();
    for_each_masked(dout, mask, [&](int64_t i, bool masked) { d[i] = masked ? T(0) : dy[i]; });
  });
}

TT_REGISTER_KERNEL("masked_fill_forward", DeviceType::kCPU, masked_fill_forward);
TT_REGISTER_KERNEL("masked_fill_backward", DeviceType::kCPU, masked_fill_backward);

}  // namespace tt::cpu
