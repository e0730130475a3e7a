// CUDA kernels of chapter 15 (given, not exercises): RMSNorm forward and backward (one block per
// row; the weight gradient as per-row products summed by chapter 06's deterministic
// column_sum), rotate-half RoPE, SwiGLU forward and backward, and the KV-cache append + attend
// step of decoding, and the GEMV of bfloat16 decoding ("llama_decode_gemv"). float32 and float64;
// the forward kernels (RMSNorm, RoPE, SwiGLU, KV cache) also
// bfloat16 for inference: each kernel is a template over the stored type T and computes in
// acc_t<T> (float for bfloat16: values widened exactly as read, rounded to nearest even once as
// written; RMSNorm's rstd and RoPE's tables float32).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "tt/cuda_block_reduce.h"
#include "tt/cuda_column_sum.h"
#include "tt/cuda_device.h"
#include "tt/dispatcher.h"
#include "tt/flash_attention.h"
#include "tt/llama.h"
#include "tt/llama_ops.h"

namespace tt::cuda {

using llama::GemvPrologue;

namespace {

constexpr int kRowThreads = 256;

std::string describe(const Tensor& t) {
  return t.defined() ? t.describe() : std::string("an undefined tensor");
}

// The computing type of a stored type: float for bfloat16, the type itself otherwise.
template <typename T>
struct Acc {
  using type = T;
};
template <>
struct Acc<bfloat16> {
  using type = float;
};
template <typename T>
using acc_t = typename Acc<T>::type;

__device__ __forceinline__ float widen(bfloat16 v) {
  return __uint_as_float(static_cast<uint32_t>(v.bits) << 16);  // exact
}
__device__ __forceinline__ float widen(float v) {
  return v;
}
__device__ __forceinline__ double widen(double v) {
  return v;
}
// v as a stored T (bfloat16: round to nearest even, cvt.rn.bf16.f32).
template <typename T>
__device__ __forceinline__ T narrow(acc_t<T> v) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    return bfloat16{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
  } else {
    return v;
  }
}

// dispatch_floating plus bfloat16, for the inference kernels and bf16 training's RoPE and SwiGLU.
template <typename F>
void dispatch_with_bf16(DType dtype, const char* op, F&& f) {
  if (dtype == DType::kBFloat16) {
    f.template operator()<bfloat16>();
  } else {
    dispatch_floating(dtype, op, f);
  }
}

void check_cuda(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor& first = **ts.begin();
  for (const Tensor* t : ts) {
    TT_CHECK(t->defined() && t->device().is_cuda() && t->device() == first.device() &&
                 t->dtype() == first.dtype() && t->is_contiguous(),
             "cuda::", op, ": expected contiguous CUDA tensors of one dtype and device, got ",
             describe(first), " and ", describe(*t));
  }
}

template <typename T>
__global__ void rms_norm_forward_kernel(T* out, acc_t<T>* rstd, const T* x, const T* w,
                                        int64_t rows, int64_t C, double eps) {
  using A = acc_t<T>;
  __shared__ double scratch[kRowThreads / kWarpThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * C;
    double ss = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double v = widen(xr[c]);
      ss += v * v;
    }
    ss = block_allreduce(ss, SumOp{}, scratch);
    const A r = static_cast<A>(1.0 / sqrt(ss / static_cast<double>(C) + eps));
    if (threadIdx.x == 0) rstd[row] = r;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      out[row * C + c] = narrow<T>(widen(xr[c]) * r * widen(w[c]));
    }
  }
}

// dx per row; dy * xhat per element into `prod` (summed over rows into dweight afterwards).
template <typename T>
__global__ void rms_norm_backward_kernel(T* dx, T* prod, const T* dy, const T* x, const T* w,
                                         const T* rstd, int64_t rows, int64_t C) {
  __shared__ double scratch[kRowThreads / kWarpThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T r = rstd[row];
    double dot = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      dot += static_cast<double>(dy[row * C + c]) * w[c] * x[row * C + c] * r;
    }
    dot = block_allreduce(dot, SumOp{}, scratch);
    const T m = static_cast<T>(dot / static_cast<double>(C));
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const int64_t i = row * C + c;
      const T xhat = x[i] * r;
      dx[i] = r * (dy[i] * w[c] - xhat * m);
      prod[i] = dy[i] * xhat;
    }
  }
}

template <typename T>
__global__ void rope_kernel(T* out, const T* x, const acc_t<T>* cos_t, const acc_t<T>* sin_t,
                            const int64_t* pos, int64_t B, int64_t H, int64_t T_, int64_t half,
                            int64_t sb, int64_t sh, int64_t st, acc_t<T> sign) {
  using A = acc_t<T>;
  const int64_t n = B * H * T_ * half;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % half;
    const int64_t row = e / half;  // (b * H + h) * T + t
    const int64_t t = row % T_, h = row / T_ % H, b = row / T_ / H;
    const int64_t p = pos[b * T_ + t];
    const T* xr = x + b * sb + h * sh + t * st;
    T* yr = out + row * 2 * half;
    const A c = cos_t[p * half + i], s = sign * sin_t[p * half + i];
    const A x1 = widen(xr[i]), x2 = widen(xr[i + half]);
    yr[i] = narrow<T>(x1 * c - x2 * s);
    yr[i + half] = narrow<T>(x2 * c + x1 * s);
  }
}

template <typename T>
__device__ T sigmoid(T a) {
  return T(1) / (T(1) + exp(-a));
}

// out [rows, F] (contiguous) from gate and up rows of `ld` elements (F when contiguous; 2F for
// the two halves of one [rows, 2F] GEMM output).
template <typename T>
__global__ void swiglu_forward_kernel(T* out, const T* a, const T* b, int64_t n, int64_t F,
                                      int64_t ld) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i / F * ld + i % F;
    const acc_t<T> g = widen(a[j]);
    out[i] = narrow<T>(g * sigmoid(g) * widen(b[j]));
  }
}

template <typename T>
__global__ void swiglu_backward_kernel(T* da, T* db, const T* dy, const T* a, const T* b,
                                       int64_t n) {
  using A = acc_t<T>;  // bfloat16: widened, computed in float32, each result rounded once
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const A g = widen(a[i]), u = widen(b[i]), d = widen(dy[i]);
    const A s = sigmoid(g);
    da[i] = narrow<T>(d * u * s * (A(1) + g * (A(1) - s)));
    db[i] = narrow<T>(d * g * s);
  }
}

template <typename T>
__global__ void kv_append_kernel(T* kc, T* vc, const T* kn, const T* vn, const int64_t* start,
                                 int64_t B, int64_t NKV, int64_t Tq, int64_t Tmax, int64_t hs) {
  const int64_t n = B * NKV * Tq * hs;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = e % hs, t = e / hs % Tq, bj = e / hs / Tq, b = bj / NKV;
    const int64_t dst = (bj * Tmax + start[b] + t) * hs + c;
    kc[dst] = kn[e];  // the stored bits, any T
    vc[dst] = vn[e];
  }
}

// RoPE of the q and k heads of a packed projection qkv [B, T, (NH + 2 NKV) hs] (contiguous) and
// the cache append of k and v, in one pass: one thread per pair (i, i + hs/2) of a (b, t, head).
// q heads go to q [B, NH, T, hs] rotated, k heads rotated and v heads as they are to row
// start[b] + t of their head in the caches [B, NKV, Tmax, hs].
template <typename T>
__global__ void rope_append_kernel(T* q, T* kc, T* vc, const T* qkv, const acc_t<T>* cos_t,
                                   const acc_t<T>* sin_t, const int64_t* pos, const int64_t* start,
                                   int64_t B, int64_t T_, int64_t NH, int64_t NKV, int64_t half,
                                   int64_t Tmax) {
  using A = acc_t<T>;
  const int64_t H = NH + 2 * NKV, hs = 2 * half, n = B * T_ * H * half;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % half, h = e / half % H, bt = e / half / H, t = bt % T_, b = bt / T_;
    const T* x = qkv + (bt * H + h) * hs;
    if (h >= NH + NKV) {  // v: copied
      T* y = vc + ((b * NKV + h - NH - NKV) * Tmax + start[b] + t) * hs;
      y[i] = x[i];
      y[i + half] = x[i + half];
      continue;
    }
    const int64_t p = pos[bt];
    const A c = cos_t[p * half + i], s = sin_t[p * half + i];
    const A x1 = widen(x[i]), x2 = widen(x[i + half]);
    T* y = h < NH ? q + ((b * NH + h) * T_ + t) * hs
                  : kc + ((b * NKV + h - NH) * Tmax + start[b] + t) * hs;
    y[i] = narrow<T>(x1 * c - x2 * s);
    y[i + half] = narrow<T>(x2 * c + x1 * s);
  }
}

// W consecutive elements of type T, loaded as one access (16 bytes when W = 16 / sizeof(T)).
template <typename T, int W>
struct alignas(sizeof(T) * W) Chunk {
  T x[W];
};

// One block per (b, h, t) query row: scores of the visible keys in shared memory (Tmax values of
// acc_t<T>), a block softmax, then the weighted sum of values. Keys and values are read in
// chunks of W elements (16-byte loads when the rows allow it, W = 1 otherwise): a thread computes
// a key's score from its row's chunks; for the sum, hs / W threads cover a value row and the
// blockDim.x / (hs / W) groups of them take every G-th key, four loads in flight per thread (the
// loop is latency-bound: a decode step's block reads a few hundred rows), and the groups' partial
// sums are added in a fixed order (no atomics).
template <typename T, int W>
__global__ void kv_attend_kernel(T* out, const T* q, const T* kc, const T* vc, const int64_t* start,
                                 int64_t NH, int64_t NKV, int64_t Tq, int64_t Tmax, int64_t hs,
                                 acc_t<T> scale) {
  using A = acc_t<T>;
  using C = Chunk<T, W>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* p = reinterpret_cast<A*>(smem_raw);
  __shared__ A scratch[kRowThreads / kWarpThreads];
  __shared__ A part[kRowThreads * W];
  const int64_t row = blockIdx.x;  // (b * NH + h) * Tq + t
  const int64_t t = row % Tq, bh = row / Tq, b = bh / NH, h = bh % NH;
  const int64_t j = h / (NH / NKV);
  const T* qr = q + row * hs;
  const T* K = kc + (b * NKV + j) * Tmax * hs;
  const T* V = vc + (b * NKV + j) * Tmax * hs;
  const int64_t n = start[b] + t + 1, R = hs / W;
  A mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const C* kr = reinterpret_cast<const C*>(K + i * hs);
    A dot = 0;
    for (int64_t r = 0; r < R; ++r) {
      const C k = kr[r];
#pragma unroll
      for (int e = 0; e < W; ++e) dot += widen(qr[r * W + e]) * widen(k.x[e]);
    }
    p[i] = dot * scale;
    mx = fmax(mx, p[i]);
  }
  mx = block_allreduce(mx, MaxOp{}, scratch);
  A sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    p[i] = exp(p[i] - mx);
    sum += p[i];
  }
  sum = block_allreduce(sum, SumOp{}, scratch);  // also a barrier: p is complete
  if (R > blockDim.x) {  // a value row wider than the block (W = 1, hs > blockDim.x)
    for (int64_t c = threadIdx.x; c < hs; c += blockDim.x) {
      A acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += p[i] * widen(V[i * hs + c]);
      out[row * hs + c] = narrow<T>(acc / sum);
    }
    return;
  }
  const int64_t G = blockDim.x / R, g = threadIdx.x / R, r = threadIdx.x % R;
  if (g < G) {
    A acc[W] = {};
    const auto add = [&](const C& v, A pi) {
#pragma unroll
      for (int e = 0; e < W; ++e) acc[e] += pi * widen(v.x[e]);
    };
    int64_t i = g;
    for (; i + 3 * G < n; i += 4 * G) {
      C v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = reinterpret_cast<const C*>(V + (i + u * G) * hs)[r];
#pragma unroll
      for (int u = 0; u < 4; ++u) add(v[u], p[i + u * G]);
    }
    for (; i < n; i += G) add(reinterpret_cast<const C*>(V + i * hs)[r], p[i]);
#pragma unroll
    for (int e = 0; e < W; ++e) part[g * hs + r * W + e] = acc[e];
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < hs; c += blockDim.x) {
    A acc = 0;
    for (int64_t k = 0; k < G; ++k) acc += part[k * hs + c];
    out[row * hs + c] = narrow<T>(acc / sum);
  }
}

// ----- the decode GEMV (bfloat16) -----------------------------------------------------------

constexpr int kGemvMaxRows = 8;  // rows of a (the batch of a decode step)
// The input rows live in shared memory: M * K bfloat16, at most this many bytes (above 48 KiB a
// kernel must opt in, see decode_gemv).
constexpr std::size_t kGemvMaxSmem = 160 * 1024;
constexpr int kGemvPrefetch = 8;  // 16-byte packs per lane loaded before the prologue

// The 8 bfloat16 of a 16-byte pack as floats (element 2i is the low half of word i).
__device__ __forceinline__ void widen8(const uint4& u, float f[8]) {
  const uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(words[i] << 16);
    f[2 * i + 1] = __uint_as_float(words[i] & 0xFFFF0000u);
  }
}

// acc[m] += the products of weight pack q (8 values of a row of w) with pack q of row m of the
// input rows xs [M, K] in shared memory (an array reference, so that acc stays in registers).
__device__ __forceinline__ void gemv_pack(float (&acc)[kGemvMaxRows], const uint4& wq,
                                          const bfloat16* xs, int64_t K, int M, int64_t q) {
  float wf[8], xf[8];
  widen8(wq, wf);
#pragma unroll
  for (int m = 0; m < kGemvMaxRows; ++m) {
    if (m < M) {
      widen8(reinterpret_cast<const uint4*>(xs + m * K)[q], xf);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[m] += wf[i] * xf[i];
    }
  }
}

// out[m, n] (+)= sum_k x[m, k] w[n, k] for m < M <= kGemvMaxRows, where x = the prologue of a,
// rounded to bfloat16 in shared memory (as the separate kernels would store it): a itself, its
// RMSNorm with weight g (every block recomputes the M sums of squares: M * K reads from L2), or
// silu(a[m, k]) * a[m, K + k] for a [M, 2K]. Then one warp per output n at a time streams w's
// row in 16-byte loads (K % 8 == 0), products summed in float32 per lane, then across the warp.
template <GemvPrologue P, typename Out>
__global__ void __launch_bounds__(kRowThreads)
    decode_gemv_kernel(Out* out, const bfloat16* a, const bfloat16* w, const bfloat16* g, int M,
                       int64_t N, int64_t K, float eps, bool accumulate) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bfloat16* xs = reinterpret_cast<bfloat16*>(smem_raw);  // [M, K]
  __shared__ float sums[kRowThreads / kWarpThreads][kGemvMaxRows];
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int64_t warps = blockDim.x / kWarpThreads;
  const int64_t packs = K / 8;
  const int64_t first = blockIdx.x * warps + threadIdx.x / kWarpThreads;  // the warp's first n
  // The first kGemvPrefetch packs of the warp's first row are requested before the prologue,
  // so that their DRAM latency overlaps it.
  uint4 pre[kGemvPrefetch];
#pragma unroll
  for (int j = 0; j < kGemvPrefetch; ++j) {
    const int64_t q = lane + j * kWarpThreads;
    if (first < N && q < packs) pre[j] = reinterpret_cast<const uint4*>(w + first * K)[q];
  }
  // RMSNorm: the M sums of squares in one pass and one barrier (per warp, then across warps).
  float rstd[kGemvMaxRows] = {};
  if constexpr (P == GemvPrologue::kRmsNorm) {
    float ss[kGemvMaxRows] = {};
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
#pragma unroll
      for (int m = 0; m < kGemvMaxRows; ++m) {
        if (m < M) {
          const float v = widen(a[m * K + k]);
          ss[m] += v * v;
        }
      }
    }
#pragma unroll
    for (int m = 0; m < kGemvMaxRows; ++m) {
      ss[m] = warp_allreduce(ss[m], SumOp{});
      if (lane == 0) sums[threadIdx.x / kWarpThreads][m] = ss[m];
    }
    __syncthreads();
#pragma unroll
    for (int m = 0; m < kGemvMaxRows; ++m) {
      float total = 0;
      for (int64_t wi = 0; wi < warps; ++wi) total += sums[wi][m];
      rstd[m] = rsqrtf(total / static_cast<float>(K) + eps);
    }
  }
  for (int m = 0; m < M; ++m) {
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
      float v;
      if constexpr (P == GemvPrologue::kSwiglu) {
        const float gate = widen(a[m * 2 * K + k]);
        v = gate * sigmoid(gate) * widen(a[m * 2 * K + K + k]);
      } else if constexpr (P == GemvPrologue::kRmsNorm) {
        v = widen(a[m * K + k]) * rstd[m] * widen(g[k]);
      } else {
        v = widen(a[m * K + k]);
      }
      xs[m * K + k] = narrow<bfloat16>(v);
    }
  }
  __syncthreads();
  for (int64_t n = first; n < N; n += gridDim.x * warps) {
    const uint4* wr = reinterpret_cast<const uint4*>(w + n * K);
    float acc[kGemvMaxRows] = {};
    int64_t q = lane;
    if (n == first) {
#pragma unroll
      for (int j = 0; j < kGemvPrefetch; ++j, q += kWarpThreads) {
        if (q < packs) gemv_pack(acc, pre[j], xs, K, M, q);
      }
    }
#pragma unroll 4
    for (; q < packs; q += kWarpThreads) gemv_pack(acc, wr[q], xs, K, M, q);
#pragma unroll
    for (int m = 0; m < kGemvMaxRows; ++m) {
      if (m < M) acc[m] = warp_allreduce(acc[m], SumOp{});  // M is the same for the whole warp
    }
    if (lane == 0) {
      for (int m = 0; m < M; ++m) {
        Out* o = out + m * N + n;
        *o = narrow<Out>((accumulate ? widen(*o) : 0.0f) + acc[m]);
      }
    }
  }
}

// ----- greedy decoding: the argmax of each row of logits -------------------------------------

// Whether (v, i) beats (b, bi) as the maximum: any value beats none (index -1), a NaN beats every
// number (the first NaN wins, as max_dim's), then the larger value, then the lower index.
__device__ __forceinline__ bool beats(float v, int64_t i, float b, int64_t bi) {
  if (i < 0) return false;
  if (bi < 0) return true;
  if (isnan(b)) return isnan(v) && i < bi;
  if (isnan(v) || v > b) return true;
  return v == b && i < bi;
}

// One block per row of x [R, V]: each thread scans its strided share, then a warp and a block
// tournament with beats().
__global__ void argmax_rows_kernel(int64_t* indices, float* values, const float* x, int64_t V) {
  __shared__ float best_v[kRowThreads / kWarpThreads];
  __shared__ int64_t best_i[kRowThreads / kWarpThreads];
  const float* xr = x + blockIdx.x * V;
  float b = 0;
  int64_t bi = -1;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    if (beats(xr[i], i, b, bi)) b = xr[i], bi = i;
  }
  for (int mask = kWarpThreads / 2; mask > 0; mask /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, b, mask);
    const int64_t i = __shfl_xor_sync(0xffffffffu, bi, mask);
    if (beats(v, i, b, bi)) b = v, bi = i;
  }
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
  if (lane == 0) best_v[warp] = b, best_i[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x) / kWarpThreads; ++w) {
      if (beats(best_v[w], best_i[w], b, bi)) b = best_v[w], bi = best_i[w];
    }
    indices[blockIdx.x] = bi;
    values[blockIdx.x] = b;
  }
}

}  // namespace

void rms_norm_forward(const Tensor& out, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                      double eps) {
  check_cuda("rms_norm_forward", {&x, &out, &weight});
  const int64_t C = x.size(-1), rows = C == 0 ? 0 : x.numel() / C;
  TT_CHECK(weight.numel() == C && rstd.numel() == rows, "cuda::rms_norm_forward: weight ",
           weight.describe(), " and rstd ", rstd.describe(), " do not fit x ", x.describe());
  if (rows == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_with_bf16(x.dtype(), "rms_norm_forward", [&]<typename T>() {
    TT_CHECK(
        rstd.dtype() == dtype_of<acc_t<T>> && rstd.device() == x.device() && rstd.is_contiguous(),
        "cuda::rms_norm_forward: rstd must be contiguous ", dtype_name(dtype_of<acc_t<T>>), " on ",
        x.device().str(), " for x ", x.describe(), ", got ", rstd.describe());
    rms_norm_forward_kernel<T>
        <<<grid_size(rows * kRowThreads, kRowThreads, dev), kRowThreads, 0, stream(dev)>>>(
            out.data<T>(), rstd.data<acc_t<T>>(), x.data<T>(), weight.data<T>(), rows, C, eps);
    TT_CUDA_CHECK_LAUNCH("rms_norm_forward_kernel");
  });
}

void rms_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dout, const Tensor& x,
                       const Tensor& weight, const Tensor& rstd) {
  check_cuda("rms_norm_backward", {&x, &dx, &dout, &weight, &dweight, &rstd});
  const int64_t C = x.size(-1), rows = C == 0 ? 0 : x.numel() / C;
  TT_CHECK(weight.numel() == C && dweight.numel() == C && rstd.numel() == rows &&
               dx.shape() == x.shape() && dout.shape() == x.shape(),
           "cuda::rms_norm_backward: shapes do not fit x ", x.describe());
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  if (rows == 0) {
    dweight.fill_(0.0);
    return;
  }
  dispatch_floating(x.dtype(), "rms_norm_backward", [&]<typename T>() {
    const Tensor prod = empty(x.shape(), {x.dtype(), x.device()});
    rms_norm_backward_kernel<T>
        <<<grid_size(rows * kRowThreads, kRowThreads, dev), kRowThreads, 0, stream(dev)>>>(
            dx.data<T>(), prod.data<T>(), dout.data<T>(), x.data<T>(), weight.data<T>(),
            rstd.data<T>(), rows, C);
    TT_CUDA_CHECK_LAUNCH("rms_norm_backward_kernel");
    column_sum<T>(dweight.data<T>(), prod.data<T>(), rows, C, C, x.device());
  });
}

void rope(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin,
          const Tensor& positions, bool inverse) {
  TT_CHECK(x.defined() && x.dim() == 4 && x.stride(3) == 1 && x.device().is_cuda() &&
               out.defined() && out.shape() == x.shape() && out.is_contiguous(),
           "cuda::rope_forward: expected CUDA x [B, H, T, hs] with a unit stride along hs and a "
           "contiguous out, got x ",
           describe(x), " and out ", describe(out));
  check_cuda("rope_forward", {&cos, &sin});
  TT_CHECK(out.dtype() == x.dtype() && out.device() == x.device() && cos.device() == x.device() &&
               cos.dtype() == (x.dtype() == DType::kBFloat16 ? DType::kFloat32 : x.dtype()),
           "cuda::rope_forward: expected out of x's dtype and tables of x's dtype (float32 for "
           "bfloat16 x) on its device, got x ",
           x.describe(), ", out ", out.describe(), " and cos ", cos.describe());
  TT_CHECK(positions.device() == x.device() && positions.dtype() == DType::kInt64 &&
               positions.is_contiguous() && positions.numel() == x.size(0) * x.size(2),
           "cuda::rope_forward: expected int64 positions [B, T] on ", x.device().str(), ", got ",
           describe(positions));
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), half = x.size(3) / 2;
  const int64_t n = B * H * T * half;
  if (n == 0) return;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  dispatch_with_bf16(x.dtype(), "rope_forward", [&]<typename T_>() {
    using A = acc_t<T_>;
    rope_kernel<T_><<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
        out.data<T_>(), x.data<T_>(), cos.data<A>(), sin.data<A>(), positions.data<int64_t>(), B, H,
        T, half, x.stride(0), x.stride(1), x.stride(2), inverse ? A(-1) : A(1));
    TT_CUDA_CHECK_LAUNCH("rope_kernel");
  });
}

void swiglu_forward(const Tensor& out, const Tensor& gate, const Tensor& up) {
  // gate and up: contiguous, or 2-D [rows, F] views with unit column stride and one row stride
  // (the halves of a [rows, 2F] GEMM output).
  const bool rows_view = gate.defined() && up.defined() && gate.dim() == 2 &&
                         gate.shape() == up.shape() && gate.stride(1) == 1 && up.stride(1) == 1 &&
                         gate.stride(0) == up.stride(0) && gate.stride(0) >= gate.size(1);
  if (rows_view) {
    check_cuda("swiglu_forward", {&out});
    TT_CHECK(out.shape() == gate.shape() && gate.device() == out.device() &&
                 up.device() == out.device() && gate.dtype() == out.dtype() &&
                 up.dtype() == out.dtype(),
             "cuda::swiglu_forward: expected gate and up of out's shape, dtype and device, got "
             "out ",
             out.describe(), ", gate ", gate.describe(), ", up ", up.describe());
  } else {
    check_cuda("swiglu_forward", {&gate, &up, &out});
  }
  const int64_t n = gate.numel();
  if (n == 0) return;
  const int64_t F = gate.size(-1), ld = rows_view ? gate.stride(0) : F;
  const int dev = gate.device().index;
  DeviceGuard guard(dev);
  dispatch_with_bf16(gate.dtype(), "swiglu_forward", [&]<typename T>() {
    swiglu_forward_kernel<T><<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
        out.data<T>(), gate.data<T>(), up.data<T>(), n, F, ld);
    TT_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
  });
}

void swiglu_backward(const Tensor& dgate, const Tensor& dup, const Tensor& dout, const Tensor& gate,
                     const Tensor& up) {
  check_cuda("swiglu_backward", {&gate, &up, &dout, &dgate, &dup});
  const int64_t n = gate.numel();
  if (n == 0) return;
  const int dev = gate.device().index;
  DeviceGuard guard(dev);
  dispatch_with_bf16(gate.dtype(), "swiglu_backward", [&]<typename T>() {
    swiglu_backward_kernel<T><<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
        dgate.data<T>(), dup.data<T>(), dout.data<T>(), gate.data<T>(), up.data<T>(), n);
    TT_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
  });
}

void kv_cache_attend(const Tensor& out, const Tensor& q, const Tensor& k_new, const Tensor& v_new,
                     const Tensor& k_cache, const Tensor& v_cache, const Tensor& start) {
  // Undefined k_new and v_new: attend only (llama_rope_append has appended them).
  const bool append = k_new.defined() || v_new.defined();
  if (append) {
    check_cuda("kv_cache_attend", {&q, &out, &k_new, &v_new, &k_cache, &v_cache});
  } else {
    check_cuda("kv_cache_attend", {&q, &out, &k_cache, &v_cache});
  }
  const int64_t B = q.size(0), NH = q.size(1), Tq = q.size(2), hs = q.size(3);
  const int64_t NKV = k_cache.size(1), Tmax = k_cache.size(2);
  TT_CHECK(start.dtype() == DType::kInt64 && start.numel() == B,
           "cuda::kv_cache_attend: start must be int64 [", B, "], got ", describe(start));
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const Tensor s = start.to(q.device());
  dispatch_with_bf16(q.dtype(), "kv_cache_attend", [&]<typename T>() {
    using A = acc_t<T>;
    const int64_t n = B * NKV * Tq * hs;
    if (append && n > 0) {
      kv_append_kernel<T><<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
          k_cache.data<T>(), v_cache.data<T>(), k_new.data<T>(), v_new.data<T>(), s.data<int64_t>(),
          B, NKV, Tq, Tmax, hs);
      TT_CUDA_CHECK_LAUNCH("kv_append_kernel");
    }
    const int64_t rows = B * NH * Tq;
    if (rows == 0) return;
    // 16-byte chunks when every row of the caches starts 16-byte aligned.
    constexpr int kW = 16 / sizeof(T);
    const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
    const bool wide =
        (hs * sizeof(T)) % 16 == 0 && aligned(k_cache.data_ptr()) && aligned(v_cache.data_ptr());
    const std::size_t smem = static_cast<std::size_t>(Tmax) * sizeof(A);
    const std::size_t fixed =
        (kRowThreads * (wide ? kW : 1) + kRowThreads / kWarpThreads) * sizeof(A);
    TT_CHECK(smem + fixed <= 48 * 1024, "cuda::kv_cache_attend: max_len ", Tmax,
             " needs more than 48 KiB of shared memory for the scores of a row");
    const auto launch = [&]<int W>() {
      kv_attend_kernel<T, W><<<static_cast<unsigned>(rows), kRowThreads, smem, stream(dev)>>>(
          out.data<T>(), q.data<T>(), k_cache.data<T>(), v_cache.data<T>(), s.data<int64_t>(), NH,
          NKV, Tq, Tmax, hs, static_cast<A>(1.0 / std::sqrt(static_cast<double>(hs))));
      TT_CUDA_CHECK_LAUNCH("kv_attend_kernel");
    };
    if (wide) {
      launch.template operator()<kW>();
    } else {
      launch.template operator()<1>();
    }
  });
}

void rope_append(const Tensor& q, const Tensor& qkv, const Tensor& cos, const Tensor& sin,
                 const Tensor& positions, const Tensor& start, const Tensor& k_cache,
                 const Tensor& v_cache) {
  check_cuda("rope_append", {&qkv, &q, &k_cache, &v_cache});
  check_cuda("rope_append", {&cos, &sin});
  const bool shapes = qkv.dim() == 3 && q.dim() == 4 && k_cache.dim() == 4 &&
                      v_cache.shape() == k_cache.shape() && q.size(0) == qkv.size(0) &&
                      q.size(2) == qkv.size(1) && k_cache.size(0) == q.size(0) &&
                      k_cache.size(3) == q.size(3) && q.size(3) % 2 == 0 &&
                      qkv.size(2) == (q.size(1) + 2 * k_cache.size(1)) * q.size(3) &&
                      cos.dim() == 2 && cos.size(1) == q.size(3) / 2;
  TT_CHECK(shapes && cos.device() == q.device() &&
               cos.dtype() == (q.dtype() == DType::kBFloat16 ? DType::kFloat32 : q.dtype()),
           "cuda::rope_append: expected qkv [B, T, (NH + 2 NKV) hs], q [B, NH, T, hs], caches [B, "
           "NKV, Tmax, hs] and tables [P, hs/2] (float32 for bfloat16), got qkv ",
           describe(qkv), ", q ", describe(q), ", k_cache ", describe(k_cache), ", cos ",
           describe(cos));
  const int64_t B = q.size(0), T = q.size(2), NH = q.size(1), NKV = k_cache.size(1);
  const int64_t half = q.size(3) / 2, Tmax = k_cache.size(2);
  TT_CHECK(positions.dtype() == DType::kInt64 && positions.numel() == B * T &&
               positions.is_contiguous() && positions.device() == q.device() &&
               start.dtype() == DType::kInt64 && start.numel() == B && start.is_contiguous() &&
               start.device() == q.device(),
           "cuda::rope_append: expected int64 positions [B, T] and start [B] on ", q.device().str(),
           ", got ", describe(positions), " and ", describe(start));
  const int64_t n = B * T * (NH + 2 * NKV) * half;
  if (n == 0) return;
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  dispatch_with_bf16(q.dtype(), "rope_append", [&]<typename T_>() {
    using A = acc_t<T_>;
    rope_append_kernel<T_><<<grid_size(n, kBlockThreads, dev), kBlockThreads, 0, stream(dev)>>>(
        q.data<T_>(), k_cache.data<T_>(), v_cache.data<T_>(), qkv.data<T_>(), cos.data<A>(),
        sin.data<A>(), positions.data<int64_t>(), start.data<int64_t>(), B, T, NH, NKV, half, Tmax);
    TT_CUDA_CHECK_LAUNCH("rope_append_kernel");
  });
}

bool decode_gemv(const Tensor& out, const Tensor& a, const Tensor& w, const Tensor& norm_weight,
                 double eps, GemvPrologue prologue, bool accumulate) {
  const bool swiglu = prologue == GemvPrologue::kSwiglu, rms = prologue == GemvPrologue::kRmsNorm;
  const int64_t M = a.defined() && a.dim() == 2 ? a.size(0) : -1;
  const int64_t N = w.defined() && w.dim() == 2 ? w.size(0) : -1;
  const int64_t K = w.defined() && w.dim() == 2 ? w.size(1) : -1;
  bool ok = M >= 0 && N >= 0 && a.size(1) == (swiglu ? 2 * K : K) && out.defined() &&
            out.shape() == Shape{M, N} && a.dtype() == DType::kBFloat16 &&
            w.dtype() == DType::kBFloat16 &&
            (out.dtype() == DType::kBFloat16 || out.dtype() == DType::kFloat32) &&
            (!rms || (norm_weight.defined() && norm_weight.shape() == Shape{K} &&
                      norm_weight.dtype() == DType::kBFloat16 && norm_weight.is_contiguous() &&
                      norm_weight.device() == w.device()));
  for (const Tensor* t : {&out, &a, &w}) {
    ok = ok && t->device().is_cuda() && t->device() == w.device() && t->is_contiguous();
  }
  TT_CHECK(ok, "cuda::decode_gemv: expected contiguous CUDA out [M, N] (bfloat16 or float32), ",
           "bfloat16 a [M, K] ([M, 2K] for SwiGLU), w [N, K] and, for RMSNorm, its weight [K], ",
           "got out ", describe(out), ", a ", describe(a), ", w ", describe(w), ", norm weight ",
           describe(norm_weight));
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const std::size_t smem = static_cast<std::size_t>(M * K) * sizeof(bfloat16);
  if (M < 1 || M > kGemvMaxRows || K % 8 != 0 || N == 0 || !aligned(w.data_ptr()) ||
      smem > kGemvMaxSmem) {
    return false;
  }
  const int dev = w.device().index;
  DeviceGuard guard(dev);
  // One warp per output row, and no more blocks than are resident at once (one wave: each
  // block stages the M * K values of a in shared memory once, and its warps loop over rows).
  const int64_t wanted = (N + kRowThreads / kWarpThreads - 1) / (kRowThreads / kWarpThreads);
  const auto* g = rms ? norm_weight.data<bfloat16>() : nullptr;
  const auto launch = [&]<GemvPrologue P, typename Out>() {
    // Above 48 KiB of dynamic shared memory a kernel must opt in, once.
    static const bool opted_in = [] {
      TT_CUDA_CHECK(cudaFuncSetAttribute(decode_gemv_kernel<P, Out>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kGemvMaxSmem)));
      return true;
    }();
    (void)opted_in;
    int resident = 0;
    TT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &resident, decode_gemv_kernel<P, Out>, kRowThreads, smem));
    const auto grid = static_cast<unsigned>(
        std::min<int64_t>(wanted, int64_t{multiprocessor_count(dev)} * std::max(resident, 1)));
    decode_gemv_kernel<P, Out><<<grid, kRowThreads, smem, stream(dev)>>>(
        out.data<Out>(), a.data<bfloat16>(), w.data<bfloat16>(), g, static_cast<int>(M), N, K,
        static_cast<float>(eps), accumulate);
    TT_CUDA_CHECK_LAUNCH("decode_gemv_kernel");
  };
  if (out.dtype() == DType::kFloat32) {  // the logits
    TT_CHECK(rms && !accumulate, "cuda::decode_gemv: a float32 out is for the head (RMSNorm ",
             "prologue, no accumulation)");
    launch.template operator()<GemvPrologue::kRmsNorm, float>();
  } else if (rms) {
    launch.template operator()<GemvPrologue::kRmsNorm, bfloat16>();
  } else if (swiglu) {
    launch.template operator()<GemvPrologue::kSwiglu, bfloat16>();
  } else {
    launch.template operator()<GemvPrologue::kNone, bfloat16>();
  }
  return true;
}

void argmax_rows(const Tensor& indices, const Tensor& values, const Tensor& logits) {
  TT_CHECK(logits.defined() && logits.dim() == 2 && logits.dtype() == DType::kFloat32 &&
               logits.is_contiguous() && logits.device().is_cuda() && logits.size(1) > 0 &&
               indices.defined() && indices.dtype() == DType::kInt64 &&
               indices.shape() == Shape{logits.size(0)} && indices.is_contiguous() &&
               indices.device() == logits.device() && values.defined() &&
               values.dtype() == DType::kFloat32 && values.shape() == Shape{logits.size(0)} &&
               values.is_contiguous() && values.device() == logits.device(),
           "cuda::argmax_rows: expected contiguous CUDA float32 logits [R, V] (V > 0), int64 "
           "indices [R] and float32 values [R] on its device, got logits ",
           describe(logits), ", indices ", describe(indices), ", values ", describe(values));
  const int64_t R = logits.size(0);
  if (R == 0) return;
  const int dev = logits.device().index;
  DeviceGuard guard(dev);
  argmax_rows_kernel<<<static_cast<unsigned>(R), kRowThreads, 0, stream(dev)>>>(
      indices.data<int64_t>(), values.data<float>(), logits.data<float>(), logits.size(1));
  TT_CUDA_CHECK_LAUNCH("argmax_rows_kernel");
}

// Grouped-query attention: chapter 10's float32 and chapter 11's bfloat16 FlashAttention kernels
// (flash_kernels) take k, v with NKV heads dividing NH, read in place, and dk, dv summed over
// each group in a fixed order; their checks (check_flash_cuda_tensors) cover the GQA shapes.

void gqa_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                           const Tensor& v) {
  TT_CHECK(q.defined(), "cuda::gqa_attention_forward: q is an undefined tensor");
  call_kernel<FlashAttentionForwardKernel>(flash_kernels(q.dtype()).forward, q.device(), out, lse,
                                           q, k, v);
}

void gqa_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                            const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& out, const Tensor& lse) {
  TT_CHECK(q.defined(), "cuda::gqa_attention_backward: q is an undefined tensor");
  call_kernel<FlashAttentionBackwardKernel>(flash_kernels(q.dtype()).backward, q.device(), dq, dk,
                                            dv, dout, q, k, v, out, lse);
}

}  // namespace tt::cuda

TT_REGISTER_KERNEL("gqa_attention_forward", tt::DeviceType::kCUDA, tt::cuda::gqa_attention_forward);
TT_REGISTER_KERNEL("gqa_attention_backward", tt::DeviceType::kCUDA,
                   tt::cuda::gqa_attention_backward);
TT_REGISTER_KERNEL("rms_norm_forward", tt::DeviceType::kCUDA, tt::cuda::rms_norm_forward);
TT_REGISTER_KERNEL("rms_norm_backward", tt::DeviceType::kCUDA, tt::cuda::rms_norm_backward);
TT_REGISTER_KERNEL("rope_forward", tt::DeviceType::kCUDA, tt::cuda::rope);
TT_REGISTER_KERNEL("swiglu_forward", tt::DeviceType::kCUDA, tt::cuda::swiglu_forward);
TT_REGISTER_KERNEL("swiglu_backward", tt::DeviceType::kCUDA, tt::cuda::swiglu_backward);
TT_REGISTER_KERNEL("kv_cache_attend", tt::DeviceType::kCUDA, tt::cuda::kv_cache_attend);
TT_REGISTER_KERNEL("llama_decode_gemv", tt::DeviceType::kCUDA, tt::cuda::decode_gemv);
TT_REGISTER_KERNEL("llama_rope_append", tt::DeviceType::kCUDA, tt::cuda::rope_append);
TT_REGISTER_KERNEL("argmax_rows", tt::DeviceType::kCUDA, tt::cuda::argmax_rows);
