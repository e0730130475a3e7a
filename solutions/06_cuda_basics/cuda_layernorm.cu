// Chapter 06 exercise ch06.7: LayerNorm forward on the GPU, one block per row, registered under
// chapter 04's kernel name "layernorm_forward"; the backward kernel "layernorm_backward" is given.
//
// Backward has two kinds of sums: per row (for dx: the means of g = dy * w and of g * xhat) and
// per column over all rows (dweight, dbias). One kernel reads x and dy once: a warp per row
// computes dx and adds the row into per-warp column accumulators; each block's accumulators are
// combined in warp order into one partial row, and column_sum (tt/cuda_column_sum.h) adds the
// partial rows. Every order depends only on the shapes: deterministic without atomics.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_column_sum.h"
#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#include "tt/dispatcher.h"
#include "tt/ops_nn.h"
#include "tt/todo.h"

namespace tt::cuda {

namespace {

// Rows of layernorm backward per warp (fixed: the summation order, hence the bits of dweight and
// dbias, depend only on the shapes).
constexpr int64_t kLayerNormRowsPerWarp = 2;

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

// Calls f(i, x[i], dy[i], w[i]) for the elements i of one row of n that lane `lane` of a warp
// owns: 16-byte packs of all three when they are aligned (pack q to lane q % 32), then the
// tail; one element at a time otherwise.
template <typename T, typename F>
__device__ void for_each_in_row_warp(const T* x, const T* dy, const T* w, int64_t n, int lane,
                                     F f) {
  constexpr int V = kPackSize<T>;
  int64_t tail = 0;
  if (aligned16(x) && aligned16(dy) && aligned16(w)) {
    const int64_t n_packs = n / V;
    for (int64_t q = lane; q < n_packs; q += kWarpThreads) {
      const Pack<T> px = reinterpret_cast<const Pack<T>*>(x)[q];
      const Pack<T> pd = reinterpret_cast<const Pack<T>*>(dy)[q];
      const Pack<T> pw = reinterpret_cast<const Pack<T>*>(w)[q];
#pragma unroll
      for (int k = 0; k < V; ++k) f(q * V + k, px.v[k], pd.v[k], pw.v[k]);
    }
    tail = n_packs * V;
  }
  for (int64_t i = tail + lane; i < n; i += kWarpThreads) f(i, x[i], dy[i], w[i]);
}

// One warp per row, kLayerNormRowsPerWarp rows per warp, W = blockDim.x / 32 warps per block:
// block b owns rows b * W * R + k * W + warp (k < R). Per row, with xhat = (x - mean) * rstd and
// g = dy * w: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) (+ dx_add when not null; two
// warp all-reductions, no block barrier), and the warp adds dy * xhat and dy into its own accumulators acc[0, c],
// acc[1, c] in row order. The accumulators are shared memory (W x [2, C], `smem_acc`), combined
// over the warps in warp order into partial[b] = [2, C]; or, when 2 * C values do not fit in
// shared memory (W == 1), partial[b] itself. The column sums of `partial` follow.
template <typename T>
__global__ void layernorm_backward_kernel(T* dx, T* partial, const T* dy, const T* x, const T* w,
                                          const T* mean, const T* rstd, const T* dx_add,
                                          int64_t rows, int64_t C, bool smem_acc) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
  const int64_t n_warps = blockDim.x / kWarpThreads;
  const int64_t rows_per_block = n_warps * kLayerNormRowsPerWarp;
  const int64_t n_blocks = (rows + rows_per_block - 1) / rows_per_block;
  for (int64_t b = blockIdx.x; b < n_blocks; b += gridDim.x) {
    T* acc = smem_acc ? smem + warp * 2 * C : partial + b * 2 * C;
    for (int64_t c = lane; c < 2 * C; c += kWarpThreads) acc[c] = 0;
    __syncwarp();
    for (int64_t k = 0; k < kLayerNormRowsPerWarp; ++k) {
      const int64_t r = b * rows_per_block + k * n_warps + warp;
      if (r >= rows) break;  // the same for the whole warp
      const T* xr = x + r * C;
      const T* dyr = dy + r * C;
      const T m = mean[r], rs = rstd[r];
      T sum_g = 0, sum_gx = 0;
      for_each_in_row_warp(xr, dyr, w, C, lane, [&](int64_t, T v, T d, T wi) {
        sum_g += d * wi;
        sum_gx += d * wi * ((v - m) * rs);
      });
      const T mean_g = warp_allreduce(sum_g, SumOp{}) / static_cast<T>(C);
      const T mean_gx = warp_allreduce(sum_gx, SumOp{}) / static_cast<T>(C);
      T* dxr = dx + r * C;
      const T* addr = dx_add != nullptr ? dx_add + r * C : nullptr;
      for_each_in_row_warp(xr, dyr, w, C, lane, [&](int64_t i, T v, T d, T wi) {
        const T xhat = (v - m) * rs;
        const T g = rs * (d * wi - mean_g - xhat * mean_gx);
        dxr[i] = addr != nullptr ? addr[i] + g : g;
        acc[i] += d * xhat;
        acc[C + i] += d;
      });
      __syncwarp();  // lane ownership of columns may change with the next row's alignment
    }
    if (smem_acc) {
      __syncthreads();  // every warp's accumulators are complete
      for (int64_t c = threadIdx.x; c < 2 * C; c += blockDim.x) {
        T s = 0;
        for (int64_t v = 0; v < n_warps; ++v) s += smem[v * 2 * C + c];
        partial[b * 2 * C + c] = s;
      }
      __syncthreads();  // smem is zeroed again for the next block
    }
  }
}

// Warps per block of layernorm_backward_kernel: the most (up to 8) whose [2, C] shared-memory
// accumulators fit in 48 KB; 0 when not even one does (the accumulators then live in `partial`).
// A function of C and the dtype only, so the summation order is the same on every GPU.
int layernorm_backward_warps(int64_t C, std::size_t elem_size) {
  for (int w = 8; w >= 1; w /= 2) {
    if (static_cast<int64_t>(w) * 2 * C * static_cast<int64_t>(elem_size) <= 48 * 1024) return w;
  }
  return 0;
}

// check_row_tensors (tt/ops_nn.h) with the op named "cuda::<op>", for x on a CUDA device
// (`like` starts with x). Returns C.
int64_t check_layernorm(const char* op, const Tensor& x, std::initializer_list<const Tensor*> like,
                        std::initializer_list<const Tensor*> vectors,
                        std::initializer_list<const Tensor*> stats) {
  TT_CHECK(x.device().is_cuda(), "cuda::", op, ": x must be a CUDA tensor, got ", x.describe());
  return check_row_tensors(std::string("cuda::") + op, like, vectors, stats);
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
  layernorm_backward_add(dx, dweight, dbias, dout, x, weight, mean, rstd, Tensor());
}

void layernorm_backward_add(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                            const Tensor& dout, const Tensor& x, const Tensor& weight,
                            const Tensor& mean, const Tensor& rstd, const Tensor& dx_add) {
  const int64_t C = check_layernorm("layernorm_backward", x, {&x, &dx, &dout},
                                    {&weight, &dweight, &dbias}, {&mean, &rstd});
  if (dx_add.defined()) check_layernorm("layernorm_backward", x, {&x, &dx_add}, {}, {});
  const int64_t rows = x.numel() / C;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  if (rows == 0) {  // sums over no rows
    fill(dweight, 0.0);
    fill(dbias, 0.0);
    return;
  }
  dispatch_floating(x.dtype(), "layernorm_backward", [&]<typename T>() {
    const int warps = layernorm_backward_warps(C, sizeof(T));
    const int threads = kWarpThreads * std::max(warps, 1);
    const int64_t n_blocks = (rows + threads / kWarpThreads * kLayerNormRowsPerWarp - 1) /
                             (threads / kWarpThreads * kLayerNormRowsPerWarp);
    const Tensor partial = empty({n_blocks, 2, C}, {x.dtype(), x.device()});
    const std::size_t smem = warps > 0 ? static_cast<std::size_t>(warps) * 2 * C * sizeof(T) : 0;
    layernorm_backward_kernel<<<grid_size(n_blocks * threads, threads, dev), threads, smem,
                                stream(dev)>>>(
        dx.data<T>(), partial.data<T>(), dout.data<T>(), x.data<T>(), weight.data<T>(),
        mean.data<T>(), rstd.data<T>(), dx_add.defined() ? dx_add.data<T>() : nullptr, rows, C,
        warps > 0);
    TT_CUDA_CHECK_LAUNCH("layernorm_backward_kernel");
    const T* p = partial.data<T>();
    column_sum(dweight.data<T>(), p, n_blocks, C, 2 * C, x.device());
    column_sum(dbias.data<T>(), p + C, n_blocks, C, 2 * C, x.device());
  });
}

TT_REGISTER_KERNEL("layernorm_forward", DeviceType::kCUDA, cuda::layernorm_forward);
TT_REGISTER_KERNEL("layernorm_backward", DeviceType::kCUDA, cuda::layernorm_backward);

}  // namespace tt::cuda
