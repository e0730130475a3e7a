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
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_device.h"
#include "tt/dispatcher.h"
#include "tt/fused_classifier.h"

namespace tt::cuda {

namespace {

template <typename T>
__global__ void classifier_xent_rows_kernel(T* logits, int64_t ld, T* row_loss,
                                            const int64_t* targets, int64_t R, int64_t V, int64_t G,
                                            T scale) {
  __shared__ T scratch[kWarpThreads];
  for (int64_t r = blockIdx.x; r < R; r += gridDim.x) {
    T* z = logits + r * ld;
    const int64_t t = targets[r];
    const bool valid = t >= 0 && t < V;
    // The target logit, read before anyone overwrites the row (the barrier below).
    const T zt = (threadIdx.x == 0 && valid) ? z[t] : T(NAN);
    T m = -INFINITY, s = 0;
    for_each_in_row(static_cast<const T*>(z), V, [&](int64_t, T v) {
      if (v > m) {  // a new maximum: rescale what was summed relative to the old one
        s = s * std::exp(m - v) + T(1);
        m = v;
      } else if (v != -INFINITY) {  // exp(-inf) = 0 adds nothing (and -inf - -inf is NaN)
        s += std::exp(v - m);       // a NaN logit makes s NaN, hence the row
      }
    });
    const T M = block_allreduce(m, MaxOp{}, scratch);
    const T S = block_allreduce(m == -INFINITY ? T(0) : s * std::exp(m - M), SumOp{}, scratch);
    // loss = lse - z_t with lse = M + log S, kept as (M - z_t) + log S: z - M is exact for
    // nearby values, a rounded lse of |z| ~ 1e4 is not.
    if (threadIdx.x == 0) row_loss[r] = (M - zt) + std::log(S);  // NaN for a target out of range
    __syncthreads();  // z[t] has been read (even when one warp skips block_allreduce's barriers)
    const T p_scale = scale / S;
    for_each_in_row(static_cast<const T*>(z), V, [&](int64_t i, T v) {
      z[i] = std::exp(v - M) * p_scale - (i == t ? scale : T(0));
    });
    for (int64_t i = V + threadIdx.x; i < G; i += blockDim.x) z[i] = T(0);  // padding columns
  }
}

}  // namespace

void classifier_xent_rows(const Tensor& logits, const Tensor& row_loss, const Tensor& targets,
                          int64_t vocab_size, double scale) {
  check_classifier_xent_args("cuda::classifier_xent_rows", logits, row_loss, targets, vocab_size);
  TT_CHECK(logits.device().is_cuda(), "cuda::classifier_xent_rows: expected CUDA tensors, got ",
           logits.describe());
  const int64_t R = logits.size(0), V = vocab_size, G = logits.size(1);
  if (R == 0) return;
  const int dev = logits.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(logits.dtype(), "cuda::classifier_xent_rows", [&]<typename T>() {
    const int threads = row_block_threads(V, sizeof(T));
    classifier_xent_rows_kernel<<<grid_size(R * threads, threads, dev), threads, 0, stream(dev)>>>(
        logits.data<T>(), logits.stride(0), row_loss.data<T>(), targets.data<int64_t>(), R, V, G,
        static_cast<T>(scale));
    TT_CUDA_CHECK_LAUNCH("classifier_xent_rows_kernel");
  });
}

TT_REGISTER_KERNEL("classifier_xent_rows", DeviceType::kCUDA, cuda::classifier_xent_rows);

}  // namespace tt::cuda
