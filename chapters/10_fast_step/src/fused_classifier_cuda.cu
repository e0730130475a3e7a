// The CUDA row kernel of the fused classifier (tt/fused_classifier.h): per row of logits, the
// loss and, in place, the gradient scale * (softmax - onehot). The GEMMs around it are chapter
// 07's "gemm" (cuBLAS).
//
// One block per row (grid-stride over rows). Pass 1 reads the row once: each thread keeps an
// online softmax state over its share (running max m and sum s of exp(z - m); a larger element
// rescales s by exp(m_old - m_new)), then the block combines the states in a fixed tree: first
// the maximum M, then the sum of s_t exp(m_t - M). Pass 2 reads the row again (mostly from L2)
// and overwrites it with the gradient. The order of every operation depends only on V and
// blockDim.x, so the results are bitwise reproducible; nothing is atomic.
//
// bfloat16 logits (chapter 11's mixed precision) are stored as bfloat16 and computed in float32:
// the row loss is float32, the gradient is rounded to nearest even when written back.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_device.h"
#include "tt/dispatcher.h"
#include "tt/fused_classifier.h"

namespace tt::cuda {

namespace {

// Storage S -> compute T: bfloat16 is the upper half of a float32 (exact); others as they are.
__device__ inline float widen(bfloat16 v) {
  return __uint_as_float(static_cast<uint32_t>(v.bits) << 16);
}
template <typename T>
__device__ inline T widen(T v) {
  return v;
}
// Compute T -> storage S: to nearest even for bfloat16 (the GPU's conversion).
__device__ inline void store(bfloat16* p, float v) {
  p->bits = __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
template <typename T>
__device__ inline void store(T* p, T v) {
  *p = v;
}

// Pass 1 over one row's V logits (the whole block): the row's maximum M and the sum of
// exp(z - M), combined in a fixed tree. Every thread returns the same {M, total}; M = -inf (and
// total = 0) for a row of no or only -inf logits.
template <typename S, typename T>
__device__ void row_max_sum(const S* z, int64_t V, T* scratch, T& M, T& total) {
  T m = -INFINITY, s = 0;
  for_each_in_row(z, V, [&](int64_t, S sv) {
    const T v = widen(sv);
    if (v > m) {  // a new maximum: rescale what was summed relative to the old one
      s = s * std::exp(m - v) + T(1);
      m = v;
    } else if (v != -INFINITY) {  // exp(-inf) = 0 adds nothing (and -inf - -inf is NaN)
      s += std::exp(v - m);       // a NaN logit makes s NaN, hence the row
    }
  });
  M = block_allreduce(m, MaxOp{}, scratch);
  total = block_allreduce(m == -INFINITY ? T(0) : s * std::exp(m - M), SumOp{}, scratch);
}

// Pass 2: overwrites the row with p_scale * exp(z - shift) - [i = t] * scale in [0, V) (t may lie
// outside: no one-hot then) and zeros in the padding [V, G).
template <typename S, typename T>
__device__ void write_row_grad(S* z, int64_t V, int64_t G, int64_t t, T shift, T p_scale, T scale) {
  for_each_in_row(static_cast<const S*>(z), V, [&](int64_t i, S sv) {
    store(z + i, std::exp(widen(sv) - shift) * p_scale - (i == t ? scale : T(0)));
  });
  for (int64_t i = V + threadIdx.x; i < G; i += blockDim.x) store(z + i, T(0));  // padding
}

template <typename S, typename T>
__global__ void classifier_xent_rows_kernel(S* logits, int64_t ld, T* row_loss,
                                            const int64_t* targets, int64_t R, int64_t V, int64_t G,
                                            T scale) {
  __shared__ T scratch[kWarpThreads];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    S* z = logits + r * ld;
    const int64_t t = targets[r];
    const bool valid = t >= 0 && t < V;
    // The target logit, read before anyone overwrites the row (the barrier below).
    const T zt = (threadIdx.x == 0 && valid) ? widen(z[t]) : T(NAN);
    T M, total;
    row_max_sum<S, T>(z, V, scratch, M, total);
    // loss = lse - z_t with lse = M + log S, kept as (M - z_t) + log S: z - M is exact for
    // nearby values, a rounded lse of |z| ~ 1e4 is not.
    if (threadIdx.x == 0)
      row_loss[r] = (M - zt) + std::log(total);  // NaN for a target out of range
    __syncthreads();  // z[t] has been read (even when one warp skips block_allreduce's barriers)
    write_row_grad<S, T>(z, V, G, t, M, scale / total, scale);
  }
}

// A split vocabulary's first half: stats[r] = log-sum-exp of the row, stats[R + r] = the target's
// logit where first <= t < first + V, else 0.
template <typename S, typename T>
__global__ void classifier_row_stats_kernel(const S* logits, int64_t ld, T* stats,
                                            const int64_t* targets, int64_t R, int64_t first,
                                            int64_t V) {
  __shared__ T scratch[kWarpThreads];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    const S* z = logits + r * ld;
    T M, total;
    row_max_sum<S, T>(z, V, scratch, M, total);
    if (threadIdx.x == 0) {
      const int64_t t = targets[r] - first;
      stats[r] = M == -INFINITY ? M : M + std::log(total);
      stats[R + r] = t >= 0 && t < V ? widen(z[t]) : T(0);
    }
  }
}

// The second half: the gradient from the whole vocabulary's log-sum-exp.
template <typename S, typename T>
__global__ void classifier_row_grad_kernel(S* logits, int64_t ld, const T* lse,
                                           const int64_t* targets, int64_t R, int64_t first,
                                           int64_t V, int64_t G, T scale) {
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    write_row_grad<S, T>(logits + r * ld, V, G, targets[r] - first, lse[r], scale, scale);
  }
}

// For the rows of `logits` (none: nothing), on its device: calls
// launch.template operator()<S, T>(blocks, threads, stream) with S the logits' storage and T
// the compute type (bfloat16 in float32), one block of row_block_threads(V) per row.
template <typename F>
void launch_row_kernel(const Tensor& logits, int64_t V, const char* op, F&& launch) {
  const int64_t R = logits.size(0);
  if (R == 0) return;
  const int dev = logits.device().index;
  DeviceGuard guard(dev);
  auto go = [&]<typename S, typename T>() {
    const int threads = row_block_threads(V, sizeof(S));
    launch.template operator()<S, T>(grid_size(R * threads, threads, dev), threads, stream(dev));
  };
  if (logits.dtype() == DType::kBFloat16) {
    go.template operator()<bfloat16, float>();
    return;
  }
  dispatch_floating(logits.dtype(), op, [&]<typename T>() { go.template operator()<T, T>(); });
}

}  // namespace

void classifier_xent_rows(const Tensor& logits, const Tensor& row_loss, const Tensor& targets,
                          int64_t vocab_size, double scale) {
  check_classifier_xent_args("cuda::classifier_xent_rows", logits, row_loss, targets, vocab_size);
  TT_CHECK(logits.device().is_cuda(), "cuda::classifier_xent_rows: expected CUDA tensors, got ",
           logits.describe());
  const int64_t R = logits.size(0), G = logits.size(1);
  launch_row_kernel(logits, vocab_size, "cuda::classifier_xent_rows",
                    [&]<typename S, typename T>(int blocks, int threads, cudaStream_t st) {
                      classifier_xent_rows_kernel<S, T><<<blocks, threads, 0, st>>>(
                          logits.data<S>(), logits.stride(0), row_loss.data<T>(),
                          targets.data<int64_t>(), R, vocab_size, G, static_cast<T>(scale));
                      TT_CUDA_CHECK_LAUNCH("classifier_xent_rows_kernel");
                    });
}

void classifier_row_stats(const Tensor& logits, const Tensor& stats, const Tensor& targets,
                          int64_t first, int64_t vocab_size) {
  const int64_t R = logits.size(0);
  check_classifier_part_args("cuda::classifier_row_stats", DeviceType::kCUDA, logits, stats,
                             Shape{2, R}, targets, vocab_size);
  launch_row_kernel(logits, vocab_size, "cuda::classifier_row_stats",
                    [&]<typename S, typename T>(int blocks, int threads, cudaStream_t st) {
                      classifier_row_stats_kernel<S, T><<<blocks, threads, 0, st>>>(
                          logits.data<S>(), logits.stride(0), stats.data<T>(),
                          targets.data<int64_t>(), R, first, vocab_size);
                      TT_CUDA_CHECK_LAUNCH("classifier_row_stats_kernel");
                    });
}

void classifier_row_grad(const Tensor& logits, const Tensor& lse, const Tensor& targets,
                         int64_t first, int64_t vocab_size, double scale) {
  const int64_t R = logits.size(0), G = logits.size(1);
  check_classifier_part_args("cuda::classifier_row_grad", DeviceType::kCUDA, logits, lse, Shape{R},
                             targets, vocab_size);
  launch_row_kernel(logits, vocab_size, "cuda::classifier_row_grad",
                    [&]<typename S, typename T>(int blocks, int threads, cudaStream_t st) {
                      classifier_row_grad_kernel<S, T><<<blocks, threads, 0, st>>>(
                          logits.data<S>(), logits.stride(0), lse.data<T>(),
                          targets.data<int64_t>(), R, first, vocab_size, G, static_cast<T>(scale));
                      TT_CUDA_CHECK_LAUNCH("classifier_row_grad_kernel");
                    });
}

TT_REGISTER_KERNEL("classifier_xent_rows", DeviceType::kCUDA, cuda::classifier_xent_rows);
TT_REGISTER_KERNEL("classifier_row_stats", DeviceType::kCUDA, cuda::classifier_row_stats);
TT_REGISTER_KERNEL("classifier_row_grad", DeviceType::kCUDA, cuda::classifier_row_grad);

}  // namespace tt::cuda
