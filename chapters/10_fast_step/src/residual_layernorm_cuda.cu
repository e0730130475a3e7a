// The CUDA kernels of tt::residual_layernorm (tt/fused_ops.h).
//
// Forward: one warp per row; r = a + d is written and summed in the same sweep (a and d are read
// once), the variance comes from a second sweep over r (which the warp just wrote: an L1/L2 hit,
// not a DRAM read), and a third writes y. Backward: chapter 06's LayerNorm backward kernel with
// the residual stream's own gradient added in the same pass (cuda::layernorm_backward_add).
#include <cmath>
#include <cstdint>
#include <string>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#include "tt/dispatcher.h"
#include "tt/fused_ops.h"
#include "tt/ops_nn.h"

namespace tt::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

template <typename T>
__global__ void residual_layernorm_forward_kernel(T* r, T* y, T* mean, T* rstd, const T* a,
                                                  const T* d, const T* w, const T* b, int64_t rows,
                                                  int64_t C, T eps) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int64_t warp = threadIdx.x / kWarpThreads;
  const int64_t stride = int64_t{gridDim.x} * kWarpsPerBlock;
  for (int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + warp; row < rows; row += stride) {
    const T* ar = a + row * C;
    const T* dr = d + row * C;
    T* rr = r + row * C;
    T s = 0;
    for (int64_t i = lane; i < C; i += kWarpThreads) {
      const T v = ar[i] + dr[i];
      rr[i] = v;
      s += v;
    }
    const T mu = warp_allreduce(s, SumOp{}) / static_cast<T>(C);
    T q = 0;  // the lane re-reads only the elements it wrote
    for (int64_t i = lane; i < C; i += kWarpThreads) q += (rr[i] - mu) * (rr[i] - mu);
    const T rs = T(1) / std::sqrt(warp_allreduce(q, SumOp{}) / static_cast<T>(C) + eps);
    T* yr = y + row * C;
    for (int64_t i = lane; i < C; i += kWarpThreads) yr[i] = (rr[i] - mu) * rs * w[i] + b[i];
    if (lane == 0) {
      mean[row] = mu;
      rstd[row] = rs;
    }
  }
}

// check_row_tensors (tt/ops_nn.h) for tensors on a CUDA device. Returns C.
int64_t check_shapes(const char* op, std::initializer_list<const Tensor*> rows_like,
                     std::initializer_list<const Tensor*> vectors,
                     std::initializer_list<const Tensor*> stats) {
  const Tensor& x = **rows_like.begin();
  TT_CHECK(x.device().is_cuda(), "cuda::", op, ": expected CUDA tensors, got ", x.describe());
  return check_row_tensors(std::string("cuda::") + op, rows_like, vectors, stats);
}

}  // namespace

void residual_layernorm_forward(const Tensor& r, const Tensor& y, const Tensor& mean,
                                const Tensor& rstd, const Tensor& a, const Tensor& d,
                                const Tensor& w, const Tensor& b, double eps) {
  const int64_t C =
      check_shapes("residual_layernorm_forward", {&r, &y, &a, &d}, {&w, &b}, {&mean, &rstd});
  const int64_t rows = r.numel() / C;
  if (rows == 0) return;
  const int dev = r.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(r.dtype(), "cuda::residual_layernorm_forward", [&]<typename T>() {
    constexpr int threads = kWarpsPerBlock * kWarpThreads;
    residual_layernorm_forward_kernel<<<grid_size(rows * kWarpThreads, threads, dev), threads, 0,
                                        stream(dev)>>>(
        r.data<T>(), y.data<T>(), mean.data<T>(), rstd.data<T>(), a.data<T>(), d.data<T>(),
        w.data<T>(), b.data<T>(), rows, C, static_cast<T>(eps));
    TT_CUDA_CHECK_LAUNCH("residual_layernorm_forward_kernel");
  });
}

void residual_layernorm_backward(const Tensor& dr, const Tensor& dw, const Tensor& db,
                                 const Tensor& dr_in, const Tensor& dy, const Tensor& r,
                                 const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  layernorm_backward_add(dr, dw, db, dy, r, w, mean, rstd, dr_in);
}

TT_REGISTER_KERNEL("residual_layernorm_forward", DeviceType::kCUDA, residual_layernorm_forward);
TT_REGISTER_KERNEL("residual_layernorm_backward", DeviceType::kCUDA, residual_layernorm_backward);

}  // namespace tt::cuda
