// ============================================================================================
// YOUR EXERCISE FILE for chapter 06_cuda_basics. Implement every TT_TODO(...) below, then run
//   cmake --build --preset learner --target check-ch06
// Generated from solutions/06_cuda_basics/cuda_reduce.cu by tools/sync_starters (maintainers: edit that file instead).
// ============================================================================================
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
  __trap();  // unreachable: cuda::sum throws TODO ch06.3 before launching
}

// The sum of `v` over the block (blockDim.x a multiple of 32), valid in thread 0: each warp
// reduces with shuffles, lane 0 of each warp writes its sum to `scratch` (shared memory, 32
// entries), and warp 0 reduces those. Every thread of the block must call it.
template <typename T>
__device__ T block_reduce_sum(T v, T* scratch) {
  __trap();  // unreachable: cuda::sum throws TODO ch06.3 before launching
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
  __trap();  // unreachable: cuda::sum throws TODO ch06.3 before launching
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
    TT_TODO("ch06.3",
            "cuda::sum: out[j] = the sum of in over the reduced dims (out: in's rank, size 1 "
            "where reduced; in: any strides), accumulated in in's dtype, bitwise identical on "
            "every run and GPU (no atomics); kernels on stream(dev), every launch checked");
  });
}

TT_REGISTER_KERNEL("sum", DeviceType::kCUDA, cuda::sum);

}  // namespace tt::cuda
