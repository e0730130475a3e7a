/// @file cuda_column_sum.h
/// @brief Deterministic column sums on the GPU: out[j] = sum over r of in[r * ld + j], the
/// reduction over the leading dim of a row-major [rows, cols] matrix (bias gradients, the
/// weight and bias gradients of LayerNorm).
///
/// Why a kernel of its own: summing a column with the row-reduction scheme of chapter 06's
/// `sum` (one block per output, its threads striding down the column) makes each thread of a
/// warp read a different row: 32 scattered 4-byte loads per warp instruction, one 32-byte
/// sector each, 8x the traffic. Here a warp reads 32 *neighbouring columns* of one row (one
/// 128-byte line), and the blockDim.y = 8 warps of a block read 8 different rows of the same 32
/// columns.
///
/// Order, fixed by the shapes alone (bitwise reproducible on any GPU, no atomics): the rows are
/// cut into chunks of kColumnSumChunk; within a chunk, thread (x, y) adds rows y, y + 8, ...
/// into four interleaved accumulators, the eight y-lanes are combined by a tree in shared
/// memory, and each chunk's sums go to a [n_chunks, cols] buffer, which is column-summed again
/// in the same way until one row is left. The summation depth per pass is about 13 additions
/// for a 2^8-fold reduction.
///
/// Only for CUDA sources (nvcc).
#pragma once

#if defined(__CUDACC__)

#include <algorithm>
#include <cstdint>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_device.h"
#include "tt/tensor.h"

namespace tt::cuda {

/// Rows summed by one block (per 32-column strip) before the chunk sums are combined.
inline constexpr int64_t kColumnSumChunk = 256;
/// blockDim.y of the column-sum kernel: rows read at once by one block.
inline constexpr int kColumnSumLanes = 8;

/// partial[c * cols + j] = sum of in[r * ld + j] over the rows r of chunk c, each value
/// converted to the accumulator type T first (e.g. bfloat16 in, float sums). Task t = (chunk
/// t / n_strips, 32-column strip t % n_strips), one block per task (grid-stride), blockDim
/// (32, kColumnSumLanes).
template <typename In, typename T = In>
__global__ void column_sum_kernel(T* partial, const In* in, int64_t rows, int64_t cols,
                                  int64_t ld) {
  __shared__ T part[kColumnSumLanes][kWarpThreads];
  const int64_t n_strips = (cols + kWarpThreads - 1) / kWarpThreads;
  const int64_t n_chunks = (rows + kColumnSumChunk - 1) / kColumnSumChunk;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  constexpr int64_t L = kColumnSumLanes;
  for (int64_t t = blockIdx.x; t < n_strips * n_chunks; t += gridDim.x) {
    const int64_t c = t / n_strips, j = (t - c * n_strips) * kWarpThreads + tx;
    const int64_t r1 = std::min(rows, (c + 1) * kColumnSumChunk);
    T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    if (j < cols) {
      const In* col = in + j;
      int64_t r = c * kColumnSumChunk + ty;
      for (; r + 3 * L < r1; r += 4 * L) {  // four loads in flight per thread
        a0 += static_cast<T>(col[r * ld]);
        a1 += static_cast<T>(col[(r + L) * ld]);
        a2 += static_cast<T>(col[(r + 2 * L) * ld]);
        a3 += static_cast<T>(col[(r + 3 * L) * ld]);
      }
      for (; r < r1; r += L) a0 += static_cast<T>(col[r * ld]);
    }
    part[ty][tx] = (a0 + a1) + (a2 + a3);
    __syncthreads();
#pragma unroll
    for (int h = kColumnSumLanes / 2; h > 0; h /= 2) {
      if (ty < h) part[ty][tx] += part[ty + h][tx];
      __syncthreads();
    }
    if (ty == 0 && j < cols) partial[c * cols + j] = part[0][tx];
    __syncthreads();  // part[0] is read before the next task overwrites it
  }
}

/// out[j] = sum over r < rows of in[r * ld + j] for j < cols (ld >= cols), on device `dev`'s
/// stream, accumulated in T (the type of out: float sums of bfloat16 `in`, for instance); `out`
/// holds cols elements. Launches one column_sum_kernel per 256-fold reduction, with
/// intermediate buffers of T from the caching allocator. rows >= 1, cols >= 1.
template <typename In, typename T = In>
void column_sum(T* out, const In* in, int64_t rows, int64_t cols, int64_t ld,
                const Device& device) {
  const int dev = device.index;
  const dim3 block(kWarpThreads, kColumnSumLanes);
  const int threads = kWarpThreads * kColumnSumLanes;
  const int64_t n_strips = (cols + kWarpThreads - 1) / kWarpThreads;
  const int64_t n_chunks = (rows + kColumnSumChunk - 1) / kColumnSumChunk;
  Tensor partial;  // the chunks' sums, alive until the next pass is queued
  T* dst = out;
  if (n_chunks > 1) {
    partial = empty({n_chunks, cols}, {dtype_of<T>, device});
    dst = partial.data<T>();
  }
  column_sum_kernel<In, T>
      <<<grid_size(n_chunks * n_strips * threads, threads, dev), block, 0, stream(dev)>>>(
          dst, in, rows, cols, ld);
  TT_CUDA_CHECK_LAUNCH("column_sum_kernel");
  if (n_chunks > 1) column_sum<T, T>(out, dst, n_chunks, cols, cols, device);  // the chunks' sums
}

}  // namespace tt::cuda

#endif  // defined(__CUDACC__)
