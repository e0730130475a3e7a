// Chapter 06 exercise ch06.7: LayerNorm forward on the GPU, one block per row, registered under
// chapter 04's kernel name "layernorm_forward"; the backward kernel "layernorm_backward" is given.
//
// Backward has two kinds of sums: per row (for dx: the means of g = dy * w and of g * xhat) and
// per column over all rows (dweight, dbias). The column sums are deterministic without atomics:
// rows are cut into chunks of kLayerNormRowChunk, one thread sums one (chunk, column) pair in row
// order, and a second kernel adds each column's chunk sums in chunk order.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#include "tt/dispatcher.h"
#include "tt/ops_nn.h"
#include "tt/todo.h"

namespace tt::cuda {

namespace {

// Rows per chunk of the column sums of layernorm backward (fixed: the summation order, hence the
// bits of dweight and dbias, depend only on the shapes).
constexpr int64_t kLayerNormRowChunk = 256;

// One block per row of C elements (grid-stride over rows): mean, then the variance from a
// second sweep over x - mean (no cancellation, unlike E[x^2] - E[x]^2), rstd = 1/sqrt(var + eps),
// y = (x - mean) * rstd * w + b; mean and rstd are stored for backward.
template <typename T>
__global__ void layernorm_forward_kernel(T* out, T* mean, T* rstd, const T* x, const T* w,
                                         const T* b, int64_t rows, int64_t C, T eps) {
#if TT_SOLUTION
  __shared__ T scratch[kWarpThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * C;
    T* yr = out + r * C;
    T s = 0;
    for_each_in_row(xr, C, [&](int64_t, T v) { s += v; });
    const T mu = block_allreduce(s, SumOp{}, scratch) / static_cast<T>(C);
    T q = 0;
    for_each_in_row(xr, C, [&](int64_t, T v) { q += (v - mu) * (v - mu); });
    const T var = block_allreduce(q, SumOp{}, scratch) / static_cast<T>(C);
    const T rs = T(1) / std::sqrt(var + eps);
    for_each_in_row(xr, C, [&](int64_t i, T v) { yr[i] = (v - mu) * rs * w[i] + b[i]; });
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
#else
  __trap();  // unreachable: the host wrapper throws TODO ch06.7 before launching
#endif
}

// dx of one row per block: with xhat = (x - mean) * rstd and g = dy * w,
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
template <typename T>
__global__ void layernorm_backward_dx_kernel(T* dx, const T* dy, const T* x, const T* w,
                                             const T* mean, const T* rstd, int64_t rows,
                                             int64_t C) {
  __shared__ T scratch[kWarpThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * C;
    const T* dyr = dy + r * C;
    const T m = mean[r], rs = rstd[r];
    T sum_g = 0, sum_gx = 0;
    for_each_in_row(xr, C, [&](int64_t i, T v) {
      const T g = dyr[i] * w[i];
      sum_g += g;
      sum_gx += g * ((v - m) * rs);
    });
    const T mean_g = block_allreduce(sum_g, SumOp{}, scratch) / static_cast<T>(C);
    const T mean_gx = block_allreduce(sum_gx, SumOp{}, scratch) / static_cast<T>(C);
    T* dxr = dx + r * C;
    for_each_in_row(xr, C, [&](int64_t i, T v) {
      dxr[i] = rs * (dyr[i] * w[i] - mean_g - (v - m) * rs * mean_gx);
    });
  }
}

// Partial column sums: task t = (chunk t / C, column t % C) adds dy * xhat and dy over the rows
// of its chunk, in row order, into pw[t] and pb[t]. Neighbouring threads read neighbouring
// columns (coalesced).
template <typename T>
__global__ void layernorm_backward_columns_kernel(T* pw, T* pb, const T* dy, const T* x,
                                                  const T* mean, const T* rstd, int64_t rows,
                                                  int64_t C, int64_t chunk_rows) {
  const int64_t n_tasks = ((rows + chunk_rows - 1) / chunk_rows) * C;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < n_tasks; t += stride) {
    const int64_t chunk = t / C, c = t % C;
    const int64_t r1 = std::min(rows, (chunk + 1) * chunk_rows);
    T acc_w = 0, acc_b = 0;
    for (int64_t r = chunk * chunk_rows; r < r1; ++r) {
      const T g = dy[r * C + c];
      acc_w += g * ((x[r * C + c] - mean[r]) * rstd[r]);
      acc_b += g;
    }
    pw[t] = acc_w;
    pb[t] = acc_b;
  }
}

// dweight[c] and dbias[c]: the chunk sums of column c added in chunk order.
template <typename T>
__global__ void layernorm_backward_combine_kernel(T* dw, T* db, const T* pw, const T* pb,
                                                  int64_t n_chunks, int64_t C) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < C; c += stride) {
    T acc_w = 0, acc_b = 0;
    for (int64_t k = 0; k < n_chunks; ++k) {
      acc_w += pw[k * C + c];
      acc_b += pb[k * C + c];
    }
    dw[c] = acc_w;
    db[c] = acc_b;
  }
}

// Checks that every tensor of `rows_like` has x's shape, every one of `vectors` has shape [C],
// every one of `stats` has x's shape without the last dim; all contiguous, x's dtype, x's CUDA
// device. Returns C.
int64_t check_layernorm(const char* op, const Tensor& x, std::initializer_list<const Tensor*> like,
                        std::initializer_list<const Tensor*> vectors,
                        std::initializer_list<const Tensor*> stats) {
  TT_CHECK(x.dim() >= 1 && x.size(-1) > 0 && x.device().is_cuda(), "cuda::", op,
           ": x must be a CUDA tensor with a non-empty last dim, got ", x.describe());
  const int64_t C = x.size(-1);
  const Shape stat_shape(x.shape().begin(), x.shape().end() - 1);
  const auto check = [&](std::initializer_list<const Tensor*> ts, const Shape& shape) {
    for (const Tensor* t : ts) {
      TT_CHECK(t->shape() == shape && t->dtype() == x.dtype() && t->device() == x.device() &&
                   t->is_contiguous(),
               "cuda::", op, ": expected a contiguous ", dtype_name(x.dtype()), " tensor of shape ",
               shape, " on ", x.device(), ", got ", t->describe(), " (x ", x.describe(), ")");
    }
  };
  check(like, x.shape());
  check(vectors, Shape{C});
  check(stats, stat_shape);
  return C;
}

}  // namespace

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                       const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t C =
      check_layernorm("layernorm_forward", x, {&x, &out}, {&weight, &bias}, {&mean, &rstd});
  const int64_t rows = x.numel() / C;
  if (rows == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "layernorm_forward", [&]<typename T>() {
#if TT_SOLUTION
    const int threads = row_block_threads(C, sizeof(T));
    layernorm_forward_kernel<<<grid_size(rows * threads, threads, dev), threads, 0, stream(dev)>>>(
        out.data<T>(), mean.data<T>(), rstd.data<T>(), x.data<T>(), weight.data<T>(),
        bias.data<T>(), rows, C, static_cast<T>(eps));
    TT_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
#else
    (void)eps;
    TT_TODO("ch06.7",
            "layernorm_forward_kernel: per row of C, out = (x - mean) * rstd * weight + bias "
            "with the biased variance and rstd = 1 / sqrt(var + eps), mean[r] and rstd[r] "
            "stored; float32 and float64, bitwise repeatable; launched on stream(dev) and "
            "checked");
#endif
  });
}

void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                        const Tensor& dout, const Tensor& x, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd) {
  const int64_t C = check_layernorm("layernorm_backward", x, {&x, &dx, &dout},
                                    {&weight, &dweight, &dbias}, {&mean, &rstd});
  const int64_t rows = x.numel() / C;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  if (rows == 0) {  // sums over no rows
    fill(dweight, 0.0);
    fill(dbias, 0.0);
    return;
  }
  dispatch_floating(x.dtype(), "layernorm_backward", [&]<typename T>() {
    const int threads = row_block_threads(C, sizeof(T));
    layernorm_backward_dx_kernel<<<grid_size(rows * threads, threads, dev), threads, 0,
                                   stream(dev)>>>(dx.data<T>(), dout.data<T>(), x.data<T>(),
                                                  weight.data<T>(), mean.data<T>(), rstd.data<T>(),
                                                  rows, C);
    TT_CUDA_CHECK_LAUNCH("layernorm_backward_dx_kernel");
    const int64_t n_chunks = (rows + kLayerNormRowChunk - 1) / kLayerNormRowChunk;
    // With one chunk the partial sums are the results.
    const Tensor pw = n_chunks == 1 ? dweight : empty({n_chunks, C}, {x.dtype(), x.device()});
    const Tensor pb = n_chunks == 1 ? dbias : empty({n_chunks, C}, {x.dtype(), x.device()});
    layernorm_backward_columns_kernel<<<grid_size(n_chunks * C, kBlockThreads, dev), kBlockThreads,
                                        0, stream(dev)>>>(
        pw.data<T>(), pb.data<T>(), dout.data<T>(), x.data<T>(), mean.data<T>(), rstd.data<T>(),
        rows, C, kLayerNormRowChunk);
    TT_CUDA_CHECK_LAUNCH("layernorm_backward_columns_kernel");
    if (n_chunks > 1) {
      layernorm_backward_combine_kernel<<<grid_size(C, kBlockThreads, dev), kBlockThreads, 0,
                                          stream(dev)>>>(dweight.data<T>(), dbias.data<T>(),
                                                         pw.data<T>(), pb.data<T>(), n_chunks, C);
      TT_CUDA_CHECK_LAUNCH("layernorm_backward_combine_kernel");
    }
  });
}

TT_REGISTER_KERNEL("layernorm_forward", DeviceType::kCUDA, cuda::layernorm_forward);
TT_REGISTER_KERNEL("layernorm_backward", DeviceType::kCUDA, cuda::layernorm_backward);

}  // namespace tt::cuda
