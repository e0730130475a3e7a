// ============================================================================================
// YOUR EXERCISE FILE for chapter 06_cuda_basics. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch06
// Generated from solutions/06_cuda_basics/cuda_softmax.cu by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
// Chapter 06 exercise ch06.6: softmax and log-softmax on the GPU, one block per row, registered
// under chapter 04's kernel names ("softmax_forward", "log_softmax_forward" and their backward
// kernels, which are given).
//
// Rows along the last dim (inner == 1, attention's case) are contiguous: one block per row
// reduces them with block_allreduce (tt/cuda_block_reduce.h). Softmax over another dim has rows
// whose elements are `inner` apart: there one thread walks one row, and neighbouring threads
// take neighbouring rows, so every load of a warp is still one contiguous stretch.
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

// One block per contiguous row of n elements (grid-stride over rows). Three sweeps over the
// row: its max m, the sum s of exp(x - m) (the largest term is exp(0) = 1: no overflow), then
// the outputs exp(x - m) / s or, for log-softmax, x - (m + log s). The row is re-read from L1/L2.
template <typename T, bool kLog>
__global__ void softmax_rows_kernel(T* out, const T* x, int64_t rows, int64_t n) {
  __trap();  // unreachable: the host wrapper throws TODO ch06.6 before launching
}

// Rows whose elements are `inner` apart: row c = (o, k) starts at o * n * inner + k; one thread
// per row (grid-stride), sequential sweeps as on the CPU.
template <typename T, bool kLog>
__global__ void softmax_strided_rows_kernel(T* out, const T* x, int64_t outer, int64_t n,
                                            int64_t inner) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < outer * inner; c += stride) {
    const int64_t start = (c / inner) * n * inner + c % inner;
    const T* xr = x + start;
    T* yr = out + start;
    T m = MaxOp::identity<T>();
    for (int64_t i = 0; i < n; ++i) m = std::fmax(m, xr[i * inner]);
    T s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(xr[i * inner] - m);
    const T lse = m + std::log(s), inv = T(1) / s;
    for (int64_t i = 0; i < n; ++i) {
      yr[i * inner] = kLog ? xr[i * inner] - lse : std::exp(xr[i * inner] - m) * inv;
    }
  }
}

// Backward of a contiguous row, y the forward output: dot = sum(dy * y) (softmax) or sum(dy)
// (log-softmax), then dx = y (dy - dot) or dy - exp(y) dot.
template <typename T, bool kLog>
__global__ void softmax_backward_rows_kernel(T* dx, const T* dy, const T* y, int64_t rows,
                                             int64_t n) {
  __shared__ T scratch[kWarpThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * n;
    const T* dyr = dy + r * n;
    T* dxr = dx + r * n;
    T dot = 0;
    for_each_in_row(dyr, n, [&](int64_t i, T g) { dot += kLog ? g : g * yr[i]; });
    dot = block_allreduce(dot, SumOp{}, scratch);
    for_each_in_row(dyr, n, [&](int64_t i, T g) {
      dxr[i] = kLog ? g - std::exp(yr[i]) * dot : yr[i] * (g - dot);
    });
  }
}

// Backward over rows whose elements are `inner` apart (one thread per row).
template <typename T, bool kLog>
__global__ void softmax_backward_strided_rows_kernel(T* dx, const T* dy, const T* y, int64_t outer,
                                                     int64_t n, int64_t inner) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < outer * inner; c += stride) {
    const int64_t start = (c / inner) * n * inner + c % inner;
    T dot = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = start + i * inner;
      dot += kLog ? dy[j] : dy[j] * y[j];
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = start + i * inner;
      dx[j] = kLog ? dy[j] - std::exp(y[j]) * dot : y[j] * (dy[j] - dot);
    }
  }
}

// A contiguous tensor seen as [outer, n, inner] around `dim`.
struct RowLayout {
  int64_t outer = 1, n = 1, inner = 1;
};

// Checks the tensors of a softmax kernel `op` (all contiguous, one dtype, one CUDA device, one
// shape) and returns the layout around `dim`.
RowLayout softmax_layout(const char* op, std::initializer_list<const Tensor*> ts, int64_t dim) {
  const Tensor& first = **ts.begin();
  for (const Tensor* t : ts) {
    TT_CHECK(t->device().is_cuda() && t->device() == first.device() &&
                 t->dtype() == first.dtype() && t->shape() == first.shape() && t->is_contiguous(),
             "cuda::", op,
             ": expected contiguous tensors of one shape and dtype on one CUDA device, "
             "got ",
             first.describe(), " and ", t->describe());
  }
  RowLayout l;
  if (first.dim() == 0) return l;
  const int64_t d = wrap_dim(dim, first.dim(), op);
  for (int64_t i = 0; i < first.dim(); ++i) {
    if (i < d) l.outer *= first.size(i);
    if (i > d) l.inner *= first.size(i);
  }
  l.n = first.size(d);
  return l;
}

template <bool kLog>
void launch_softmax_forward(const char* op, const Tensor& out, const Tensor& x, int64_t dim) {
  const RowLayout l = softmax_layout(op, {&out, &x}, dim);
  if (x.numel() == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), op, [&]<typename T>() {
    if (l.inner == 1) {
      TT_TODO("ch06.6",
              "softmax_rows_kernel: out = softmax (log-softmax when kLog) of each contiguous row "
              "of n elements, float32 and float64, finite for large |x| and with -inf entries, "
              "bitwise repeatable; launched on stream(dev) and checked");
      return;
    }
    softmax_strided_rows_kernel<T, kLog>
        <<<grid_size(l.outer * l.inner, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
            out.data<T>(), x.data<T>(), l.outer, l.n, l.inner);
    TT_CUDA_CHECK_LAUNCH("softmax_strided_rows_kernel");
  });
}

template <bool kLog>
void launch_softmax_backward(const char* op, const Tensor& dx, const Tensor& dout, const Tensor& y,
                             int64_t dim) {
  const RowLayout l = softmax_layout(op, {&dx, &dout, &y}, dim);
  if (y.numel() == 0) return;
  const int dev = y.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(y.dtype(), op, [&]<typename T>() {
    if (l.inner == 1) {
      const int threads = row_block_threads(l.n, sizeof(T));
      softmax_backward_rows_kernel<T, kLog>
          <<<grid_size(l.outer * threads, threads, dev), threads, 0, stream(dev)>>>(
              dx.data<T>(), dout.data<T>(), y.data<T>(), l.outer, l.n);
      TT_CUDA_CHECK_LAUNCH("softmax_backward_rows_kernel");
      return;
    }
    softmax_backward_strided_rows_kernel<T, kLog>
        <<<grid_size(l.outer * l.inner, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
            dx.data<T>(), dout.data<T>(), y.data<T>(), l.outer, l.n, l.inner);
    TT_CUDA_CHECK_LAUNCH("softmax_backward_strided_rows_kernel");
  });
}

}  // namespace

void softmax_forward(const Tensor& out, const Tensor& x, int64_t dim) {
  launch_softmax_forward<false>("softmax_forward", out, x, dim);
}

void log_softmax_forward(const Tensor& out, const Tensor& x, int64_t dim) {
  launch_softmax_forward<true>("log_softmax_forward", out, x, dim);
}

void softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim) {
  launch_softmax_backward<false>("softmax_backward", dx, dout, out, dim);
}

void log_softmax_backward(const Tensor& dx, const Tensor& dout, const Tensor& out, int64_t dim) {
  launch_softmax_backward<true>("log_softmax_backward", dx, dout, out, dim);
}

TT_REGISTER_KERNEL("softmax_forward", DeviceType::kCUDA, cuda::softmax_forward);
TT_REGISTER_KERNEL("log_softmax_forward", DeviceType::kCUDA, cuda::log_softmax_forward);
TT_REGISTER_KERNEL("softmax_backward", DeviceType::kCUDA, cuda::softmax_backward);
TT_REGISTER_KERNEL("log_softmax_backward", DeviceType::kCUDA, cuda::log_softmax_backward);

}  // namespace tt::cuda
