// The CUDA kernels of the ring's float32 sums (tt/ring_attention.h): "cp_merge_rows" merges a
// block's attention part into rows of the running result in one pass (merge_attention_rows),
// "cp_add_rows" adds a block's gradient (float32 or bfloat16) to rows of a float32 sum
// (add_rows). Composed from tensor operations, each was ~20 (merge) or 3 (widen, add, copy)
// passes over the rows, each a kernel launch.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tt/cuda_device.h"
#include "tt/dispatcher.h"
#include "tt/ring_attention.h"

namespace tt::cuda {

namespace {

__device__ __forceinline__ float load_float(const float* p) {
  return *p;
}
__device__ __forceinline__ float load_float(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}

/// One warp per row r of `rows` = B * NH * m: lane 0 reads the two log-sum-exps and computes
/// the merged one and the two weights, the warp re-weights the row's hs values, lane 0 writes
/// the merged log-sum-exp (after every lane has its weights: no other warp touches the row).
/// Row r is row begin + r % m of head r / m of the accumulator (Tl rows per head). (A warp per
/// 32 rows, each lane computing one row's weights, measured slower: 54 against 46 us for
/// 131,072 rows of 64 on an H200.)
template <typename Part>
__global__ void merge_rows_kernel(float* __restrict__ acc_out, float* __restrict__ acc_lse,
                                  const Part* __restrict__ part_out,
                                  const float* __restrict__ part_lse, int64_t rows, int64_t m,
                                  int64_t Tl, int64_t hs, int64_t begin) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < rows;
       r += warps) {
    const int64_t acc_row = r / m * Tl + begin + r % m;
    float wa = 0.0f, wb = 0.0f, lse = -INFINITY;
    if (lane == 0) {
      const float la = acc_lse[acc_row], lb = part_lse[r];
      const float hi = fmaxf(la, lb);
      if (hi != -INFINITY) {  // else neither part saw a key: the row stays empty
        // log(e^La + e^Lb) with the larger exponent taken out: both exponents are <= 0.
        const float ea = expf(la - hi), eb = expf(lb - hi), sum = ea + eb;
        lse = hi + logf(sum);
        wa = ea / sum;
        wb = eb / sum;
      }
    }
    wa = __shfl_sync(0xffffffffu, wa, 0);
    wb = __shfl_sync(0xffffffffu, wb, 0);
    float* out = acc_out + acc_row * hs;
    const Part* in = part_out + r * hs;
    for (int64_t c = lane; c < hs; c += 32) out[c] = wa * out[c] + wb * load_float(in + c);
    if (lane == 0) acc_lse[acc_row] = lse;
  }
}

/// acc rows [begin, begin + m) of every head += delta: blockIdx.y walks the heads (B * NH),
/// blockIdx.x the head's m * hs values, both grid-stride. A head's m rows are contiguous in
/// delta (heads delta_head_stride apart) and in acc (at `offset` = begin * hs in a head of
/// acc_head_elems = Tl * hs values).
template <typename Delta>
__global__ void add_rows_kernel(float* __restrict__ acc, const Delta* __restrict__ delta,
                                int64_t heads, int64_t head_elems, int64_t delta_head_stride,
                                int64_t acc_head_elems, int64_t offset) {
  for (int64_t h = blockIdx.y; h < heads; h += gridDim.y) {
    float* dst = acc + h * acc_head_elems + offset;
    const Delta* src = delta + h * delta_head_stride;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < head_elems;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      dst[i] += load_float(src + i);
    }
  }
}

void merge_rows(const Tensor& acc_out, const Tensor& acc_lse, int64_t begin, const Tensor& part_out,
                const Tensor& part_lse) {
  const int64_t m = part_out.size(2), hs = acc_out.size(3), Tl = acc_out.size(2);
  const int64_t rows = part_out.size(0) * part_out.size(1) * m;
  if (rows == 0) return;
  const int index = acc_out.device().index;
  DeviceGuard guard(index);
  const unsigned grid = grid_size(rows * 32, kBlockThreads, index);  // a warp per row
  if (part_out.dtype() == DType::kBFloat16) {
    merge_rows_kernel<<<grid, kBlockThreads, 0, stream(index)>>>(
        acc_out.data<float>(), acc_lse.data<float>(),
        static_cast<const __nv_bfloat16*>(part_out.data_ptr()), part_lse.data<float>(), rows, m, Tl,
        hs, begin);
  } else {
    merge_rows_kernel<<<grid, kBlockThreads, 0, stream(index)>>>(
        acc_out.data<float>(), acc_lse.data<float>(), part_out.data<float>(),
        part_lse.data<float>(), rows, m, Tl, hs, begin);
  }
  TT_CUDA_CHECK_LAUNCH("merge_rows_kernel");
}

void add_rows(const Tensor& acc, int64_t begin, const Tensor& delta) {
  if (delta.numel() == 0) return;
  const int64_t hs = acc.size(3), heads = delta.size(0) * delta.size(1);
  const int64_t head_elems = delta.size(2) * hs, acc_head_elems = acc.size(2) * hs;
  const int index = acc.device().index;
  DeviceGuard guard(index);
  // About one wave in all: each head gets its share of what fills the device once.
  const int64_t y = std::min<int64_t>(heads, 65535);
  const int64_t x = std::max<int64_t>(1, grid_size(delta.numel(), kBlockThreads, index) / y);
  const dim3 grid(
      static_cast<unsigned>(std::min<int64_t>(x, (head_elems + kBlockThreads - 1) / kBlockThreads)),
      static_cast<unsigned>(y));
  const int64_t stride = delta.stride(1);  // B * NH heads: stride(0) = NH * stride(1)
  if (delta.dtype() == DType::kBFloat16) {
    add_rows_kernel<<<grid, kBlockThreads, 0, stream(index)>>>(
        acc.data<float>(), static_cast<const __nv_bfloat16*>(delta.data_ptr()), heads, head_elems,
        stride, acc_head_elems, begin * hs);
  } else {
    add_rows_kernel<<<grid, kBlockThreads, 0, stream(index)>>>(
        acc.data<float>(), delta.data<float>(), heads, head_elems, stride, acc_head_elems,
        begin * hs);
  }
  TT_CUDA_CHECK_LAUNCH("add_rows_kernel");
}

}  // namespace

TT_REGISTER_KERNEL("cp_merge_rows", DeviceType::kCUDA, merge_rows);
TT_REGISTER_KERNEL("cp_add_rows", DeviceType::kCUDA, add_rows);

}  // namespace tt::cuda
