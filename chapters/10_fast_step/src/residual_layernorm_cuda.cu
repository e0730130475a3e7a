// The CUDA kernels of tt::residual_layernorm (tt/fused_ops.h).
//
// Forward: one warp per row; r = a + d is written and summed in the same sweep (a and d are read
// once), the variance comes from a second sweep over r (which the warp just wrote: an L1/L2 hit,
// not a DRAM read), and a third writes y. Backward: chapter 06's LayerNorm backward kernel with
// the residual stream's own gradient added in the same pass (cuda::layernorm_backward_add).
//
// Mixed precision (chapter 11): the forward kernel is a template over the computing type T (that
// of a, r, w, b and the statistics) and the types of d (D) and y (Y), which are T or bfloat16
// when T is float: the bf16 delta is widened as it is read, y rounded to bf16 as it is written,
// every sum and the statistics stay in float32.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#include "tt/dispatcher.h"
#include "tt/fused_ops.h"
#include "tt/ops_nn.h"

namespace tt::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

// A value of the computing type T from a stored element (exact for bf16 -> float).
template <typename T, typename S>
__device__ __forceinline__ T load_as(S v) {
  if constexpr (std::is_same_v<S, bfloat16>) {
    return __uint_as_float(static_cast<uint32_t>(v.bits) << 16);
  } else {
    return static_cast<T>(v);
  }
}

// The stored element of type S nearest to v (bf16: round to nearest even, cvt.rn.bf16.f32).
template <typename S, typename T>
__device__ __forceinline__ S store_as(T v) {
  if constexpr (std::is_same_v<S, bfloat16>) {
    return bfloat16{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
  } else {
    return static_cast<S>(v);
  }
}

template <typename T, typename D, typename Y>
__global__ void residual_layernorm_forward_kernel(T* r, Y* y, T* mean, T* rstd, const T* a,
                                                  const D* d, const T* w, const T* b, int64_t rows,
                                                  int64_t C, T eps) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int64_t warp = threadIdx.x / kWarpThreads;
  const int64_t stride = int64_t{gridDim.x} * kWarpsPerBlock;
  for (int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + warp; row < rows; row += stride) {
    const T* ar = a + row * C;
    const D* dr = d + row * C;
    T* rr = r + row * C;
    T s = 0;
    for (int64_t i = lane; i < C; i += kWarpThreads) {
      const T v = ar[i] + load_as<T>(dr[i]);
      rr[i] = v;
      s += v;
    }
    const T mu = warp_allreduce(s, SumOp{}) / static_cast<T>(C);
    T q = 0;  // the lane re-reads only the elements it wrote
    for (int64_t i = lane; i < C; i += kWarpThreads) q += (rr[i] - mu) * (rr[i] - mu);
    const T rs = T(1) / std::sqrt(warp_allreduce(q, SumOp{}) / static_cast<T>(C) + eps);
    Y* yr = y + row * C;
    for (int64_t i = lane; i < C; i += kWarpThreads) {
      yr[i] = store_as<Y>((rr[i] - mu) * rs * w[i] + b[i]);
    }
    if (lane == 0) {
      mean[row] = mu;
      rstd[row] = rs;
    }
  }
}

// Calls f.template operator()<S>() with S = T when `dtype` is T's, S = bfloat16 when it is
// bfloat16 and T is float (the mixed-precision combinations that are instantiated).
template <typename T, typename F>
void dispatch_t_or_bf16(DType dtype, F&& f) {
  if constexpr (std::is_same_v<T, float>) {
    if (dtype == DType::kBFloat16) return f.template operator()<bfloat16>();
  }
  f.template operator()<T>();
}

}  // namespace

void residual_layernorm_forward(const Tensor& r, const Tensor& y, const Tensor& mean,
                                const Tensor& rstd, const Tensor& a, const Tensor& d,
                                const Tensor& w, const Tensor& b, double eps) {
  TT_CHECK(r.device().is_cuda(), "cuda::residual_layernorm_forward: expected CUDA tensors, got ",
           r.describe());
  const int64_t C = check_residual_layernorm_forward("cuda::residual_layernorm_forward", r, y, mean,
                                                     rstd, a, d, w, b);
  const int64_t rows = r.numel() / C;
  if (rows == 0) return;
  const int dev = r.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(r.dtype(), "cuda::residual_layernorm_forward", [&]<typename T>() {
    dispatch_t_or_bf16<T>(d.dtype(), [&]<typename D>() {
      dispatch_t_or_bf16<T>(y.dtype(), [&]<typename Y>() {
        constexpr int threads = kWarpsPerBlock * kWarpThreads;
        residual_layernorm_forward_kernel<<<grid_size(rows * kWarpThreads, threads, dev), threads,
                                            0, stream(dev)>>>(
            r.data<T>(), y.data<Y>(), mean.data<T>(), rstd.data<T>(), a.data<T>(), d.data<D>(),
            w.data<T>(), b.data<T>(), rows, C, static_cast<T>(eps));
        TT_CUDA_CHECK_LAUNCH("residual_layernorm_forward_kernel");
      });
    });
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
