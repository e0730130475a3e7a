// The CUDA kernels of tt::residual_layernorm (tt/fused_ops.h).
//
// Float32 rows of 128 to 1,024 elements (a multiple of 128: GPT-2's 768) go to the register-row
// kernels below: a warp holds its row in registers, so each input is read once and each output
// written once, forward and backward. Other rows go to the general kernels:
// - forward: one warp per row; r = a + d is written and summed in the same sweep, the variance
//   comes from a second sweep over r (which the warp just wrote: an L1/L2 hit, not a DRAM read),
//   and a third writes y;
// - backward: chapter 06's LayerNorm backward kernel with the residual stream's own gradient
//   added in the same pass (cuda::layernorm_backward_add), around casts for bfloat16.
//
// Mixed precision (chapter 11): the kernels are templates over the types of d (D) and y (Y), and
// of dy (DY) and the delta's gradient, which are float32 or bfloat16 when the rest is float32:
// bfloat16 is widened as it is read and rounded to nearest even as it is written; every sum and
// the statistics stay in float32.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_column_sum.h"
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

// ----- backward: a row in registers -----------------------------------------------------------
// Chapter 06's LayerNorm backward reads each row twice (the sums, then dx) and adds every
// element's dy xhat and dy into shared-memory accumulators, and in bfloat16 a cast kernel widens
// dy before it and another rounds the delta's gradient after it. Profiled on a bf16 GPT-2 124M
// step (H200), that was 85 us per call at 35% of the memory roof, plus 2 x 20 us of casts, 24
// times a step. This kernel reads each input once and writes each output once:
//  - a warp owns a row; lane l holds the float4 packs l, l + 32, ... of x (= r) and dy in
//    registers (kPacks of them: C = 128 kPacks), so the second sweep (dx) reads nothing again;
//  - dy is read as stored (float32, or bfloat16 widened exactly), and dr is written in float32
//    and, when the delta is bfloat16, rounded to bfloat16 too (dd);
//  - a lane always owns the same columns, so its dy xhat and dy sums over the warp's rows stay in
//    its own slots of shared memory; at the end the block's warps are added in warp order into
//    one partial row, and column_sum adds the blocks' rows. Every order depends on the shapes only: deterministic.
constexpr int kLnBwdWarps = 4;        // warps per block
constexpr int kLnBwdRowsPerWarp = 4;  // rows per warp (interleaved: row k W + w of the block)
constexpr int kRowPackElems = 4 * kWarpThreads;  // a row of C holds C / 128 float4 packs a lane
constexpr int kMaxRowPacks = 8;                  // C <= 1,024: 4 x 8 values an array per lane

// The float4 packs a lane holds of a float32 row of C elements, when the register-row kernels
// take it: C a multiple of 128, at most 1,024, and every defined tensor aligned to 4 of its own
// elements (a lane loads 4 at once: 16 bytes of float32, 8 of bfloat16); 0 when they do not.
int row_packs(DType dtype, int64_t C, std::initializer_list<const Tensor*> tensors) {
  if (dtype != DType::kFloat32 || C % kRowPackElems != 0 || C / kRowPackElems > kMaxRowPacks) {
    return 0;
  }
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;  // dd when the delta needs no gradient of its own
    const auto bytes = static_cast<std::uintptr_t>(4 * dtype_size(t->dtype()));
    if (reinterpret_cast<std::uintptr_t>(t->data_ptr()) % bytes != 0) return 0;
  }
  return static_cast<int>(C / kRowPackElems);
}

// f.template operator()<K>() with K = packs (1..kMaxRowPacks) as a compile-time constant.
template <int K = 1, typename F>
void dispatch_packs(int packs, F&& f) {
  if constexpr (K < kMaxRowPacks) {
    if (packs != K) return dispatch_packs<K + 1>(packs, f);
  }
  f.template operator()<K>();
}

struct F4 {
  float v[4];
};

template <typename S>
__device__ __forceinline__ F4 load4(const S* p) {  // 4 consecutive elements, widened
  F4 f;
  if constexpr (std::is_same_v<S, bfloat16>) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);  // one 8-byte load
    const uint32_t half[4] = {u.x, u.x >> 16, u.y, u.y >> 16};
    for (int k = 0; k < 4; ++k) f.v[k] = load_as<float>(bfloat16{static_cast<uint16_t>(half[k])});
  } else {
    const float4 q = *reinterpret_cast<const float4*>(p);
    f = {{q.x, q.y, q.z, q.w}};
  }
  return f;
}

__device__ __forceinline__ void store4_bf16(bfloat16* p, const F4& f) {  // one 8-byte store
  const auto b = [](float v) { return static_cast<uint32_t>(store_as<bfloat16>(v).bits); };
  *reinterpret_cast<uint2*>(p) =
      make_uint2(b(f.v[0]) | (b(f.v[1]) << 16), b(f.v[2]) | (b(f.v[3]) << 16));
}

// partial[b] = [sum of dy xhat | sum of dy] over block b's rows, [2, C].
template <typename DY, bool kWithDd, int kPacks>
__global__ void __launch_bounds__(kLnBwdWarps* kWarpThreads)
    residual_layernorm_backward_kernel(float* dr, bfloat16* dd, float* partial, const float* dr_in,
                                       const DY* dy, const float* x, const float* w,
                                       const float* mean, const float* rstd, int64_t rows) {
  constexpr int C = kPacks * 4 * kWarpThreads;
  __shared__ __align__(16) float sums[kLnBwdWarps][2 * C];
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
  const int64_t b = blockIdx.x;
  // This warp's [dy xhat | dy] sums: lane-private float4 slots of shared memory (registers would
  // hold 8 more floats a pack, and the row's dr_in is worth more there).
  float* acc = sums[warp];
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int i = (j * kWarpThreads + lane) * 4;
    *reinterpret_cast<F4*>(&acc[i]) = *reinterpret_cast<F4*>(&acc[C + i]) = F4{{0, 0, 0, 0}};
  }
  for (int k = 0; k < kLnBwdRowsPerWarp; ++k) {
    const int64_t r = (b * kLnBwdRowsPerWarp + k) * kLnBwdWarps + warp;
    if (r >= rows) break;  // the same for the whole warp
    const int64_t row = r * C;
    F4 xv[kPacks], dv[kPacks], ov[kPacks];
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {  // every load of the row in flight at once
      const int i = (j * kWarpThreads + lane) * 4;
      xv[j] = load4(x + row + i);
      dv[j] = load4(dy + row + i);
      ov[j] = load4(dr_in + row + i);  // needed after the sums: loaded while they are taken
    }
    const float m = mean[r], rs = rstd[r];
    float sum_g = 0, sum_gx = 0;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const F4 wv = load4(w + (j * kWarpThreads + lane) * 4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float xhat = (xv[j].v[e] - m) * rs;
        xv[j].v[e] = xhat;  // x is not needed again
        sum_g += dv[j].v[e] * wv.v[e];
        sum_gx += dv[j].v[e] * wv.v[e] * xhat;
      }
    }
    const float mean_g = warp_allreduce(sum_g, SumOp{}) / static_cast<float>(C);
    const float mean_gx = warp_allreduce(sum_gx, SumOp{}) / static_cast<float>(C);
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int i = (j * kWarpThreads + lane) * 4;
      const F4 wv = load4(w + i);
      F4& out = ov[j];
      F4 aw = *reinterpret_cast<const F4*>(&acc[i]), ab = *reinterpret_cast<const F4*>(&acc[C + i]);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float d = dv[j].v[e], xhat = xv[j].v[e];
        out.v[e] += rs * (d * wv.v[e] - mean_g - xhat * mean_gx);
        aw.v[e] += d * xhat;
        ab.v[e] += d;
      }
      *reinterpret_cast<F4*>(&acc[i]) = aw;
      *reinterpret_cast<F4*>(&acc[C + i]) = ab;
      *reinterpret_cast<float4*>(dr + row + i) =
          make_float4(out.v[0], out.v[1], out.v[2], out.v[3]);
      if constexpr (kWithDd) store4_bf16(dd + row + i, out);
    }
  }
  __syncthreads();
  for (int c = static_cast<int>(threadIdx.x); c < 2 * C; c += kLnBwdWarps * kWarpThreads) {
    float s = 0;
#pragma unroll
    for (int v = 0; v < kLnBwdWarps; ++v) s += sums[v][c];
    partial[b * 2 * C + c] = s;
  }
}

// Launches residual_layernorm_backward_kernel with `packs` (row_packs) a lane.
void residual_layernorm_backward_rows(const Tensor& dr, const Tensor& dd, const Tensor& dw,
                                      const Tensor& db, const Tensor& dr_in, const Tensor& dy,
                                      const Tensor& r, const Tensor& w, const Tensor& mean,
                                      const Tensor& rstd, int64_t C, int packs) {
  const int64_t rows = r.numel() / C;
  const int dev = r.device().index;
  const int64_t rows_per_block = int64_t{kLnBwdWarps} * kLnBwdRowsPerWarp;
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  const Tensor partial = empty({blocks, 2, C}, {DType::kFloat32, r.device()});
  dispatch_t_or_bf16<float>(dy.dtype(), [&]<typename DY>() {
    const auto launch = [&]<bool kWithDd>() {
      dispatch_packs(packs, [&]<int kPacks>() {
        residual_layernorm_backward_kernel<DY, kWithDd, kPacks>
            <<<static_cast<unsigned>(blocks), kLnBwdWarps * kWarpThreads, 0, stream(dev)>>>(
                dr.data<float>(), kWithDd ? dd.data<bfloat16>() : nullptr, partial.data<float>(),
                dr_in.data<float>(), dy.data<DY>(), r.data<float>(), w.data<float>(),
                mean.data<float>(), rstd.data<float>(), rows);
        TT_CUDA_CHECK_LAUNCH("residual_layernorm_backward_kernel");
      });
    };
    if (dd.defined()) {
      launch.template operator()<true>();
    } else {
      launch.template operator()<false>();
    }
  });
  const float* p = partial.data<float>();
  column_sum(dw.data<float>(), p, blocks, C, 2 * C, r.device());
  column_sum(db.data<float>(), p + C, blocks, C, 2 * C, r.device());
}

// ----- forward: a row in registers ------------------------------------------------------------
// The same layout for the forward: a warp per row, lane l holding the float4 packs l, l + 32, ...
// of r = a + d; r is written, the mean and the variance are taken from the registers, y written:
// a and d are read once, r and y written once (the kernel above re-reads r twice, from L1/L2).
template <typename D, typename Y, int kPacks>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpThreads)
    residual_layernorm_forward_rows_kernel(float* r, Y* y, float* mean, float* rstd, const float* a,
                                           const D* d, const float* w, const float* b, int64_t rows,
                                           float eps) {
  constexpr int C = kPacks * kRowPackElems;
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int64_t warp = threadIdx.x / kWarpThreads;
  const int64_t stride = int64_t{gridDim.x} * kWarpsPerBlock;
  for (int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + warp; row < rows; row += stride) {
    const int64_t base = row * C;
    F4 v[kPacks];
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int i = (j * kWarpThreads + lane) * 4;
      const F4 av = load4(a + base + i), dv = load4(d + base + i);
#pragma unroll
      for (int e = 0; e < 4; ++e) v[j].v[e] = av.v[e] + dv.v[e];
    }
    float s = 0;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int i = (j * kWarpThreads + lane) * 4;
      *reinterpret_cast<float4*>(r + base + i) =
          make_float4(v[j].v[0], v[j].v[1], v[j].v[2], v[j].v[3]);
#pragma unroll
      for (int e = 0; e < 4; ++e) s += v[j].v[e];
    }
    const float mu = warp_allreduce(s, SumOp{}) / static_cast<float>(C);
    float q = 0;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) q += (v[j].v[e] - mu) * (v[j].v[e] - mu);
    }
    const float rs = 1.0f / std::sqrt(warp_allreduce(q, SumOp{}) / static_cast<float>(C) + eps);
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int i = (j * kWarpThreads + lane) * 4;
      const F4 wv = load4(w + i), bv = load4(b + i);
      F4 out;
#pragma unroll
      for (int e = 0; e < 4; ++e) out.v[e] = (v[j].v[e] - mu) * rs * wv.v[e] + bv.v[e];
      if constexpr (std::is_same_v<Y, bfloat16>) {
        store4_bf16(y + base + i, out);
      } else {
        *reinterpret_cast<float4*>(y + base + i) =
            make_float4(out.v[0], out.v[1], out.v[2], out.v[3]);
      }
    }
    if (lane == 0) {
      mean[row] = mu;
      rstd[row] = rs;
    }
  }
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
  constexpr int threads = kWarpsPerBlock * kWarpThreads;
  if (const int packs = row_packs(r.dtype(), C, {&r, &a, &w, &b, &d, &y})) {
    dispatch_t_or_bf16<float>(d.dtype(), [&]<typename D>() {
      dispatch_t_or_bf16<float>(y.dtype(), [&]<typename Y>() {
        dispatch_packs(packs, [&]<int kPacks>() {
          residual_layernorm_forward_rows_kernel<D, Y, kPacks>
              <<<grid_size(rows * kWarpThreads, threads, dev), threads, 0, stream(dev)>>>(
                  r.data<float>(), y.data<Y>(), mean.data<float>(), rstd.data<float>(),
                  a.data<float>(), d.data<D>(), w.data<float>(), b.data<float>(), rows,
                  static_cast<float>(eps));
          TT_CUDA_CHECK_LAUNCH("residual_layernorm_forward_rows_kernel");
        });
      });
    });
    return;
  }
  dispatch_floating(r.dtype(), "cuda::residual_layernorm_forward", [&]<typename T>() {
    dispatch_t_or_bf16<T>(d.dtype(), [&]<typename D>() {
      dispatch_t_or_bf16<T>(y.dtype(), [&]<typename Y>() {
        residual_layernorm_forward_kernel<<<grid_size(rows * kWarpThreads, threads, dev), threads,
                                            0, stream(dev)>>>(
            r.data<T>(), y.data<Y>(), mean.data<T>(), rstd.data<T>(), a.data<T>(), d.data<D>(),
            w.data<T>(), b.data<T>(), rows, C, static_cast<T>(eps));
        TT_CUDA_CHECK_LAUNCH("residual_layernorm_forward_kernel");
      });
    });
  });
}

void residual_layernorm_backward(const Tensor& dr, const Tensor& dd, const Tensor& dw,
                                 const Tensor& db, const Tensor& dr_in, const Tensor& dy,
                                 const Tensor& r, const Tensor& w, const Tensor& mean,
                                 const Tensor& rstd) {
  TT_CHECK(r.device().is_cuda(), "cuda::residual_layernorm_backward: expected CUDA tensors, got ",
           r.describe());
  const int64_t C = check_residual_layernorm_backward("cuda::residual_layernorm_backward", dr, dd,
                                                      dw, db, dr_in, dy, r, w, mean, rstd);
  DeviceGuard guard(r.device().index);
  // No rows: the fallback's zero sums.
  if (const int packs = row_packs(r.dtype(), C, {&dr, &dd, &dr_in, &dy, &r, &w});
      packs && r.numel() > 0) {
    residual_layernorm_backward_rows(dr, dd, dw, db, dr_in, dy, r, w, mean, rstd, C, packs);
    return;
  }
  // Any other shape or dtype: chapter 06's kernel, around casts for bfloat16.
  layernorm_backward_add(dr, dw, db, dy.dtype() == r.dtype() ? dy : dy.to(r.dtype()), r, w, mean,
                         rstd, dr_in);
  if (dd.defined()) dd.copy_(dr);
}

TT_REGISTER_KERNEL("residual_layernorm_forward", DeviceType::kCUDA, residual_layernorm_forward);
TT_REGISTER_KERNEL("residual_layernorm_backward", DeviceType::kCUDA, residual_layernorm_backward);

}  // namespace tt::cuda
