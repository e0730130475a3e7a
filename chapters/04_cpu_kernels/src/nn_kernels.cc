// ============================================================================================
// YOUR EXERCISE FILE for chapter 04_cpu_kernels. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch04
// Generated from solutions/04_cpu_kernels/nn_kernels.cc by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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


void softmax_forward(const Tensor& out, const Tensor& x, int64_t dim) {
  TT_TODO(
      "ch04.10",
      "cpu::softmax_forward: out = exp(x) / sum of exp(x) along dim (x and out contiguous, any shape and dim), finite for any finite x however large");
}

void log_softmax_forward(const Tensor& out, const Tensor& x, int64_t dim) {
  TT_TODO(
      "ch04.10",
      "cpu::log_softmax_forward: out = x - log(sum of exp(x)) along dim, finite where softmax underflows to 0");
}

void softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim) {
  TT_TODO(
      "ch04.11",
      "cpu::softmax_backward: dx = the vector-Jacobian product of softmax along dim with dout, from the forward output out alone");
}

void log_softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim) {
  TT_TODO(
      "ch04.11",
      "cpu::log_softmax_backward: dx = the vector-Jacobian product of log_softmax along dim with dout, from the forward output out alone");
}

TT_REGISTER_KERNEL("softmax_forward", DeviceType::kCPU, softmax_forward);
TT_REGISTER_KERNEL("softmax_backward", DeviceType::kCPU, softmax_backward);
TT_REGISTER_KERNEL("log_softmax_forward", DeviceType::kCPU, log_softmax_forward);
TT_REGISTER_KERNEL("log_softmax_backward", DeviceType::kCPU, log_softmax_backward);

// ----- layernorm ---------------------------------------------------------------------------------

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& weight, const Tensor& bias, double eps) {
  TT_TODO(
      "ch04.12",
      "cpu::layernorm_forward: per row of the last dim (size C): out = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(biased variance + eps), mean and rstd stored per row; accurate when |mean| >> std");
}

void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                        const Tensor& dout, const Tensor& x, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd) {
  TT_TODO(
      "ch04.13",
      "cpu::layernorm_backward: dx, dweight and dbias of layernorm for dout, from x, weight and the forward's mean and rstd; the same bits for any thread count");
}

TT_REGISTER_KERNEL("layernorm_forward", DeviceType::kCPU, layernorm_forward);
TT_REGISTER_KERNEL("layernorm_backward", DeviceType::kCPU, layernorm_backward);

// ----- gelu --------------------------------------------------------------------------------------


void gelu_forward(const Tensor& out, const Tensor& x) {
  TT_TODO(
      "ch04.14",
      "cpu::gelu_forward: out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) elementwise (GPT-2's tanh approximation)");
}

void gelu_backward(const Tensor& dx, const Tensor& dout, const Tensor& x) {
  TT_TODO(
      "ch04.14",
      "cpu::gelu_backward: dx = dout * gelu'(x) elementwise, gelu' the derivative of the tanh approximation");
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
  TT_TODO(
      "ch04.15",
      "cpu::embedding_backward: dweight[v, :] = the sum of dout[i, :] over every i with indices[i] == v (zeros for unused rows); throws naming an index out of [0, V); the same bits for any thread count");
}

TT_REGISTER_KERNEL("embedding_forward", DeviceType::kCPU, embedding_forward);
TT_REGISTER_KERNEL("embedding_backward", DeviceType::kCPU, embedding_backward);

// ----- cross-entropy -----------------------------------------------------------------------------


void cross_entropy_forward(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets, int64_t ignore_index) {
  TT_TODO(
      "ch04.16",
      "cpu::cross_entropy_forward: lse[n] = log sum exp(logits[n, :]); loss = mean over the rows whose target is not ignore_index of lse[n] - logits[n, target[n]] (NaN if none); logits [N, V]; throws naming a target out of [0, V)");
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits,
                            const Tensor& targets, const Tensor& lse, int64_t ignore_index) {
  TT_TODO(
      "ch04.16",
      "cpu::cross_entropy_backward: dlogits = dloss * d loss / d logits (zeros on ignored rows), from the forward's lse; throws naming a target out of [0, V)");
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
