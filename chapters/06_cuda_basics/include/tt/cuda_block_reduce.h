/// @file cuda_block_reduce.h
/// @brief Device building blocks of the row kernels (softmax, layernorm, cross-entropy): 16-byte
/// packs, warp and block all-reductions with a fixed order, and the launch shape of a
/// one-block-per-row kernel.
///
/// An *all*-reduction leaves the result in every thread, which is what a row kernel needs (every
/// thread then normalizes its share of the row). Inside a warp it is a butterfly: step k adds
/// the value of lane `lane ^ 2^k` (`__shfl_xor_sync`), so after 5 steps all 32 lanes hold the
/// same total, combined in the same tree. Across warps, lane 0 of each warp writes its total to
/// shared memory and every warp reduces those totals again with the butterfly. The order of
/// the operations depends only on blockDim.x, so results are bitwise reproducible.
///
/// Only for CUDA sources (nvcc): everything here is `__device__` code.
#pragma once

#if defined(__CUDACC__)

#include <cstdint>
#include <type_traits>

namespace tt::cuda {

/// Threads per warp.
inline constexpr int kWarpThreads = 32;

/// 16 bytes of T (4 floats, 2 doubles, 2 int64): the widest load one thread can issue. The
/// alignment makes the compiler emit one 128-bit load (LDG.E.128) instead of several scalar ones.
template <typename T>
struct alignas(16) Pack {
  T v[16 / sizeof(T)];  ///< the 16 / sizeof(T) elements
};

/// Elements of T in one Pack.
template <typename T>
inline constexpr int kPackSize = 16 / static_cast<int>(sizeof(T));

/// True when `p` is 16-byte aligned, i.e. may be read as Pack<T>.
__host__ __device__ inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

/// Addition, the combining operation of sums.
struct SumOp {
  /// Identity element.
  template <typename T>
  __device__ static T identity() {
    return T(0);
  }
  /// a + b.
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

/// Maximum ignoring NaN (fmax), the combining operation of row maxima. A NaN in a softmax row
/// still makes the row NaN through the sum of exponentials.
struct MaxOp {
  /// Identity element: -infinity.
  template <typename T>
  __device__ static T identity() {
    return -INFINITY;
  }
  /// fmax(a, b).
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return std::fmax(a, b);
  }
};

/// Combines `v` over the 32 lanes of the calling warp; every lane gets the result. All 32 lanes
/// must call it.
template <typename T, typename Op>
__device__ T warp_allreduce(T v, Op op) {
#pragma unroll
  for (int mask = kWarpThreads / 2; mask > 0; mask /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, mask));
  }
  return v;
}

/// Combines `v` over the block (blockDim.x a multiple of 32, at most 1024); every thread gets
/// the result. `scratch` is shared memory of kWarpThreads elements; every thread of the block
/// must call it, and it may be called again right away (it ends with a barrier).
template <typename T, typename Op>
__device__ T block_allreduce(T v, Op op, T* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
  const int n_warps = static_cast<int>(blockDim.x) / kWarpThreads;
  v = warp_allreduce(v, op);
  if (n_warps == 1) return v;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();  // every warp's total is in scratch
  v = warp_allreduce(lane < n_warps ? scratch[lane] : Op::template identity<T>(), op);
  __syncthreads();  // everyone has read scratch: the caller may reduce again
  return v;
}

/// Calls f(i, x[i]) for the elements i = threadIdx.x, + blockDim.x, ... of the contiguous row
/// `x` of `n` elements. When the row is 16-byte aligned it reads Pack<T> (element i of pack q is
/// i = q * kPackSize + k) and then the tail; otherwise one element at a time. Which thread
/// sees which element, and in which order, depends only on n, blockDim.x and the alignment.
template <typename T, typename F>
__device__ void for_each_in_row(const T* x, int64_t n, F f) {
  const int64_t tid = threadIdx.x, bd = blockDim.x;
  if (aligned16(x)) {
    constexpr int V = kPackSize<T>;
    const int64_t n_packs = n / V;
    const auto* px = reinterpret_cast<const Pack<T>*>(x);
    for (int64_t q = tid; q < n_packs; q += bd) {
      const Pack<T> p = px[q];
#pragma unroll
      for (int k = 0; k < V; ++k) f(q * V + k, p.v[k]);
    }
    for (int64_t i = n_packs * V + tid; i < n; i += bd) f(i, x[i]);
  } else {
    for (int64_t i = tid; i < n; i += bd) f(i, x[i]);
  }
}

/// Threads per block of a one-block-per-row kernel for rows of `n` elements: about one 16-byte
/// pack per thread, rounded up to a whole warp, between 32 and 1024.
inline int row_block_threads(int64_t n, int64_t elem_size) {
  const int64_t packs = (n * elem_size + 15) / 16;
  const int64_t warps = (packs + kWarpThreads - 1) / kWarpThreads;
  return static_cast<int>(kWarpThreads * (warps < 1 ? 1 : (warps > 32 ? 32 : warps)));
}

}  // namespace tt::cuda

#endif  // defined(__CUDACC__)
