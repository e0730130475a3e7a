// Chapter 06 exercise ch06.3: a deterministic CUDA sum — warp-shuffle and block reductions, and
// the chunked two-kernel "sum" registered under chapter 04's kernel name.
#include <algorithm>
#include <cstdint>

#include "tt/cuda_column_sum.h"
#include "tt/cuda_device.h"
#include "tt/cuda_ops.h"
#include "tt/dispatcher.h"
#include "tt/ops_reduce.h"
#include "tt/strided_indexer.h"
#include "tt/todo.h"

namespace tt::cuda {

namespace {

// [[maybe_unused]]: the starter uses them only in templates it never instantiates (nvcc #177).
[[maybe_unused]] constexpr int kWarpSize = 32;
[[maybe_unused]] constexpr unsigned kFullWarp = 0xffffffffu;

// The sum of `v` over the 32 lanes of the calling warp, valid in lane 0. Registers of other
// lanes are read with __shfl_down_sync: step k adds the value of lane (lane + 16/2^k), so
// after 5 steps lane 0 holds ((v0+v16)+(v8+v24))+... — always the same tree.
template <typename T>
__device__ T warp_reduce_sum(T v) {
#if TT_SOLUTION
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_down_sync(kFullWarp, v, offset);
  }
  return v;
#else
  __trap();  // unreachable: cuda::sum throws TODO ch06.3 before launching
#endif
}

// The sum of `v` over the block (blockDim.x a multiple of 32), valid in thread 0: each warp
// reduces with shuffles, lane 0 of each warp writes its sum to `scratch` (shared memory, 32
// entries), and warp 0 reduces those. Every thread of the block must call it.
template <typename T>
__device__ T block_reduce_sum(T v, T* scratch) {
#if TT_SOLUTION
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  v = warp_reduce_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();  // every warp's sum is in scratch
  if (warp == 0) {
    const int n_warps = static_cast<int>(blockDim.x) / kWarpSize;
    v = warp_reduce_sum(lane < n_warps ? scratch[lane] : T(0));
  }
  __syncthreads();  // scratch may be reused by the caller's next reduction
  return v;
#else
  __trap();  // unreachable: cuda::sum throws TODO ch06.3 before launching
#endif
}

// Where the elements of a sum live: output j (row-major over the kept dims) adds the elements
// at kept.offsets(j).a + reduced.offsets(r).a for r = 0 .. n_red-1.
struct ReduceGeometry {
  StridedIndexer kept;     // in's strides over the kept dims (operand a)
  StridedIndexer reduced;  // in's strides over the reduced dims (operand a)
  int64_t n_red = 1;       // elements per output
  int64_t n_chunks = 1;    // chunks of kReduceChunk elements per output
};

// Task t = (output j = t / n_chunks, chunk c = t % n_chunks): one block sums the chunk's
// elements into partial[t]. Blocks loop over tasks (grid-stride), so the grid size does not
// change which elements a task adds, nor in which order.
template <typename T>
__global__ void sum_chunks_kernel(T* partial, const T* in, int64_t n_tasks, ReduceGeometry g) {
#if TT_SOLUTION
  __shared__ T scratch[kWarpSize];
  const int64_t bd = blockDim.x;
  // A 0- or 1-d reduced indexer is a plain stride: no division per element.
  const bool simple = g.reduced.ndim <= 1;
  const int64_t step = g.reduced.ndim == 1 ? g.reduced.strides_a[0] : 0;
  for (int64_t t = blockIdx.x; t < n_tasks; t += gridDim.x) {
    const int64_t j = t / g.n_chunks, c = t - j * g.n_chunks;
    const T* x = in + g.kept.offsets(j).a;
    const int64_t begin = c * kReduceChunk, end = std::min(begin + kReduceChunk, g.n_red);
    int64_t r = begin + threadIdx.x;
    T acc = 0;
    if (simple) {
      // Four independent accumulators keep four loads in flight per thread.
      T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (; r + 3 * bd < end; r += 4 * bd) {
        a0 += x[r * step];
        a1 += x[(r + bd) * step];
        a2 += x[(r + 2 * bd) * step];
        a3 += x[(r + 3 * bd) * step];
      }
      for (; r < end; r += bd) a0 += x[r * step];
      acc = (a0 + a1) + (a2 + a3);
    } else {
      for (; r < end; r += bd) acc += x[g.reduced.offsets(r).a];
    }
    acc = block_reduce_sum(acc, scratch);
    if (threadIdx.x == 0) partial[t] = acc;
  }
#else
  __trap();  // unreachable: cuda::sum throws TODO ch06.3 before launching
#endif
}

// out[j] = sum of partial[j * n_chunks + 0 .. n_chunks-1], one block per output (grid-stride).
template <typename T>
__global__ void sum_partials_kernel(T* out, const T* partial, int64_t n_out, int64_t n_chunks) {
  __shared__ T scratch[kWarpSize];
  for (int64_t j = blockIdx.x; j < n_out; j += gridDim.x) {
    T acc = 0;
    for (int64_t i = threadIdx.x; i < n_chunks; i += blockDim.x) acc += partial[j * n_chunks + i];
    acc = block_reduce_sum(acc, scratch);
    if (threadIdx.x == 0) out[j] = acc;
  }
}

}  // namespace

void sum(const Tensor& out, const Tensor& in) {
  TT_CHECK(in.device().is_cuda() && out.device() == in.device() && out.dtype() == in.dtype(),
           "cuda::sum: expected out and in on one CUDA device with one dtype, got out ",
           out.describe(), " and in ", in.describe());
  TT_CHECK(out.is_contiguous() && out.dim() == in.dim(),
           "cuda::sum: out must be contiguous with in's number of dims, got out ", out.describe(),
           " for in ", in.describe());
  ReduceGeometry g;
  Shape kept_shape, red_shape;
  Strides kept_strides, red_strides;
  for (int64_t d = 0; d < in.dim(); ++d) {
    TT_CHECK(out.size(d) == in.size(d) || out.size(d) == 1, "cuda::sum: out shape ", out.shape(),
             " does not match in shape ", in.shape(), " (size 1 on the reduced dims)");
    const bool reduced = out.size(d) != in.size(d);
    (reduced ? red_shape : kept_shape).push_back(in.size(d));
    (reduced ? red_strides : kept_strides).push_back(in.stride(d));
  }
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  if (in.numel() == 0) {  // sums of nothing
    fill(out, 0.0);
    return;
  }
  g.n_red = in.numel() / n_out;
  if (g.n_red == 1) {  // only size-1 dims "reduced": a copy, not one block per element
    copy(out, in);
    return;
  }
  g.n_chunks = (g.n_red + kReduceChunk - 1) / kReduceChunk;
  const int dev = in.device().index;
  DeviceGuard guard(dev);
  dispatch_dtype(in.dtype(), "cuda::sum", [&]<typename T>() {
#if TT_SOLUTION
    g.kept = make_strided_indexer(kept_shape, kept_strides, kept_strides);
    g.reduced = make_strided_indexer(red_shape, red_strides, red_strides);
    if (g.kept.ndim == 1 && g.kept.strides_a[0] == 1 && g.reduced.ndim == 1 &&
        g.reduced.strides_a[0] != 1) {
      // Outputs side by side in memory, each summing a strided column (a bias gradient: [B*T, N]
      // summed over the rows): neighbouring threads must read neighbouring outputs' elements.
      column_sum(out.data<T>(), in.data<T>(), g.n_red, n_out, g.reduced.strides_a[0], in.device());
      return;
    }
    const int64_t n_tasks = n_out * g.n_chunks;
    // With one chunk per output the first kernel writes the sums themselves.
    const Tensor partial = g.n_chunks == 1 ? out : empty({n_tasks}, {in.dtype(), in.device()});
    sum_chunks_kernel<<<grid_size(n_tasks * kBlockThreads, kBlockThreads, dev), kBlockThreads, 0,
                        stream(dev)>>>(partial.data<T>(), in.data<T>(), n_tasks, g);
    TT_CUDA_CHECK_LAUNCH("sum_chunks_kernel");
    if (g.n_chunks > 1) {
      sum_partials_kernel<<<grid_size(n_out * kBlockThreads, kBlockThreads, dev), kBlockThreads, 0,
                            stream(dev)>>>(out.data<T>(), partial.data<T>(), n_out, g.n_chunks);
      TT_CUDA_CHECK_LAUNCH("sum_partials_kernel");
    }
    // `partial` returns to the allocator now, while the kernels may still run: safe, because a
    // later user of the block is queued on the same stream (see tt/caching_allocator.h).
#else
    TT_TODO("ch06.3",
            "cuda::sum: out[j] = the sum of in over the reduced dims (out: in's rank, size 1 "
            "where reduced; in: any strides), accumulated in in's dtype, bitwise identical on "
            "every run and GPU (no atomics); kernels on stream(dev), every launch checked");
#endif
  });
}

TT_REGISTER_KERNEL("sum", DeviceType::kCUDA, cuda::sum);

}  // namespace tt::cuda
