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
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

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

// ----- programmatic dependent launch ----------------------------------------------------------
//
// A decode step is a chain of short kernels (tens of microseconds in all per layer), so the gap
// between two of them (the launch, and the next kernel's first loads) is a visible share of the
// step. On Hopper a kernel launched with the programmatic-serialization attribute may start
// while the previous kernel on the stream is still running: it does what does not depend on that
// kernel (the GEMV requests its weights), then waits (griddepcontrol.wait) for the previous
// grid to finish and its writes to be visible. The previous kernel lets it start early with
// griddepcontrol.launch_dependents. The decode kernels of this file (RoPE + append, the cache's
// attention, the GEMV) all wait before they read or write anything another kernel touches.

// Programmatic dependent launch (sm_90): wait until the grids this one depends on have finished
// and their writes are visible; let the next grid launch early. No-ops below sm_90 (and for
// launches without the attribute, where the stream already ordered the grids).
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches of the decode kernels may overlap the previous kernel's end (programmatic
// dependent launch: compute capability 9.0 or later, and TT_DECODE_PDL not set to 0).
bool dependent_launch_on(int dev) {
  static const bool env_on = [] {
    const char* v = std::getenv("TT_DECODE_PDL");
    return v == nullptr || std::string(v) != "0";
  }();
  int major = 0;
  TT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  return env_on && major >= 9;
}

// Launches kernel<<<grid, block, smem>>>(args...) on device dev's stream with the launch
// attribute `attribute` where `with` (cudaLaunchKernelEx), else as a plain launch.
template <typename... KArgs, typename... Args>
void launch_with(int dev, cudaLaunchAttribute attribute, bool with, void (*kernel)(KArgs...),
                 dim3 grid, dim3 block, std::size_t smem, Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream(dev);
  config.attrs = &attribute;
  config.numAttrs = with ? 1 : 0;
  TT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<KArgs>(args)...));
}

// Launches kernel<<<grid, block, smem>>>(args...) on device dev's stream, as a programmatic
// dependent launch where dependent_launch_on(dev): the kernel may start before the previous
// kernel on the stream has finished and must call grid_dependency_wait() before it reads what
// that kernel wrote (the decode GEMV does: its weight loads go first). Elsewhere a plain launch.
template <typename... KArgs, typename... Args>
void launch_dependent(int dev, void (*kernel)(KArgs...), dim3 grid, dim3 block, std::size_t smem,
                      Args... args) {
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  launch_with(dev, attribute, dependent_launch_on(dev), kernel, grid, block, smem, args...);
}

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

// Rotate-half RoPE of one pair (x1 = x[i], x2 = x[i + hs/2]) by the angle of cosine c and sine
// s, stored as T: y1 = x1 c - x2 s, y2 = x2 c + x1 s.
template <typename T>
__device__ __forceinline__ void rotate_pair(T* y1, T* y2, acc_t<T> x1, acc_t<T> x2, acc_t<T> c,
                                            acc_t<T> s) {
  *y1 = narrow<T>(x1 * c - x2 * s);
  *y2 = narrow<T>(x2 * c + x1 * s);
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
    rotate_pair(yr + i, yr + i + half, x1, x2, c, s);
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
  grid_dependency_wait();  // a dependent launch: qkv comes from the previous kernel
  grid_dependents_launch();
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
    rotate_pair(y + i, y + i + half, x1, x2, c, s);
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
  grid_dependency_wait();  // a dependent launch: q and the caches come from the previous kernel
  grid_dependents_launch();
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
//
// A decode step reads every weight once for 2 FLOPs per weight (per row of the batch), so each
// projection is a stream of its weight bytes, and the kernel is fast when the GPU keeps enough
// loads in flight (Little's law: ~3 TB/s x ~1 us = ~3 MB, ~25 KB per SM) from its first
// microsecond to its last. The design follows from that:
//   * a persistent grid: kGemvBlocksPerSm blocks of kGemvWarps warps per SM, each warp walking
//     its rows (n = its index, + the number of warps, ...), a row in chunks of kGemvChunk 16-byte
//     loads per lane (4 KiB per warp), two chunks in flight: the next chunk (of the same row or
//     the next) is requested before the current one is used, across row boundaries;
//   * everything that can go early goes early: the first two chunks are requested before the
//     kernel waits for the previous one (programmatic dependent launch on Hopper, see
//     launch_dependent: the next projection's blocks start as soon as this one's leave room),
//     so the weights stream while the previous kernel drains;
//   * one prologue per block, one round trip to L2: the input rows (RMSNorm, SwiGLU, or as they
//     are; rounded to bfloat16 as the separate kernels would store them) are staged in shared
//     memory as float32, so the inner loop has no conversions of x. Every block computes the
//     whole prologue, so it must be cheap per element (32-bit vectorized passes, __expf).
// Measured on an H100 (bench_decode, TinyLlama-1.1B's projections in a CUDA graph): 4 blocks per
// SM beat 3 and 2 (1.84, 1.62, 1.49 TB/s on a step's projections; register-bound at 4), the
// dependent launch adds 7% at 4. What is left is a fixed cost of ~4-5 us per kernel (the
// prologue after the wait, the tail): the README's "Decoding is a bandwidth problem".
// Batch rows: each one multiplies every weight again out of shared memory, which is what bounds
// a GEMV at larger M (cuBLASLt's tensor-core GEMM is as fast at M = 8 as at 1); the model uses
// the GEMV for one row only (llama.cc).

constexpr int kGemvMaxRows = 4;  // rows of a (the batch of a decode step) the GEMV takes
// The input rows (and RMSNorm's weight) live in shared memory as float32: (M + 1) * K * 4 bytes,
// at most this many (above 48 KiB a kernel must opt in, see decode_gemv).
constexpr std::size_t kGemvMaxSmem = 96 * 1024;
constexpr int kGemvWarps = 4;                                   // warps per block
constexpr int kGemvBlocksPerSm = 4;                             // <= 128 registers a thread
constexpr int kGemvChunk = 8;                                   // 16-byte loads per lane in a chunk
constexpr int64_t kGemvChunkPacks = kGemvChunk * kWarpThreads;  // 8-element packs in a chunk

// The 8 bfloat16 of a 16-byte pack as floats (element 2i is the low half of word i).
__device__ __forceinline__ void widen8(const uint4& u, float f[8]) {
  const uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(words[i] << 16);
    f[2 * i + 1] = __uint_as_float(words[i] & 0xFFFF0000u);
  }
}

// v rounded to bfloat16 (nearest even) and widened back.
__device__ __forceinline__ float round_bf16(float v) {
  return widen(narrow<bfloat16>(v));
}

// A warp's walk over its work: chunk `base` (in packs) of row `row`; rows n, n + stride, ...
// (Within a row indices are 32-bit: K < 2^31 / 8 is checked on the host.)
struct GemvCursor {
  int64_t row;
  int base;
  __device__ __forceinline__ void advance(int packs, int64_t stride) {
    base += kGemvChunkPacks;
    if (base >= packs) {
      base = 0;
      row += stride;
    }
  }
};

// Requests the cursor's chunk of w [N, K] into buf (zeros past the row's end or the last row).
__device__ __forceinline__ void gemv_load(uint4 (&buf)[kGemvChunk], const bfloat16* w,
                                          const GemvCursor& c, int64_t N, int packs, int lane) {
  const uint4* row = reinterpret_cast<const uint4*>(w) + c.row * packs;
#pragma unroll
  for (int j = 0; j < kGemvChunk; ++j) {
    const int q = c.base + lane + j * kWarpThreads;
    buf[j] = c.row < N && q < packs ? __ldg(row + q) : make_uint4(0, 0, 0, 0);
  }
}

// acc[m] += the products of the chunk's weight packs with the same packs of the input rows xs
// [M, K] (float32, shared memory). Packs past the row's end were loaded as zeros and are skipped.
template <int Rows>
__device__ __forceinline__ void gemv_fma(float (&acc)[Rows], const uint4 (&buf)[kGemvChunk],
                                         const float* xs, int K, int M, int base, int packs,
                                         int lane) {
#pragma unroll
  for (int j = 0; j < kGemvChunk; ++j) {
    const int q = base + lane + j * kWarpThreads;
    if (q < packs) {
      float wf[8];
      widen8(buf[j], wf);
#pragma unroll
      for (int m = 0; m < Rows; ++m) {
        if (m < M) {
          const float4* x = reinterpret_cast<const float4*>(xs + m * K + q * 8);
          const float4 x0 = x[0], x1 = x[1];
          acc[m] += wf[0] * x0.x + wf[1] * x0.y + wf[2] * x0.z + wf[3] * x0.w + wf[4] * x1.x +
                    wf[5] * x1.y + wf[6] * x1.z + wf[7] * x1.w;
        }
      }
    }
  }
}

// After the cursor's chunk: if it was its row's last, the warp's sums of the row go to out
// (lane m writes batch row m; + out's old value when accumulating) and acc restarts.
template <int Rows, typename Out>
__device__ __forceinline__ void gemv_finish(float (&acc)[Rows], const GemvCursor& c, Out* out,
                                            int M, int64_t N, int packs, bool accumulate,
                                            int lane) {
  if (c.base + kGemvChunkPacks < packs) return;
  float mine = 0;
#pragma unroll
  for (int m = 0; m < Rows; ++m) {
    if (m < M) {  // M is the same for the whole warp
      const float total = warp_allreduce(acc[m], SumOp{});
      if (m == lane) mine = total;
    }
    acc[m] = 0;
  }
  if (lane < M) {
    Out* o = out + lane * N + c.row;
    *o = narrow<Out>((accumulate ? widen(*o) : 0.0f) + mine);
  }
}

// silu(v) = v sigmoid(v) with the fast exponential and division (every block of the GEMV
// computes the whole prologue, so its cost counts once per block; the result is rounded to
// bfloat16, 8 bits, far above these intrinsics' few ulps of float32).
__device__ __forceinline__ float fast_silu(float v) {
  return v * __fdividef(1.0f, 1.0f + __expf(-v));
}

// A warp's stream of weight chunks: where its next load and its next use are, and the two
// chunks in flight.
struct GemvStream {
  GemvCursor load, use;
  uint4 buf0[kGemvChunk], buf1[kGemvChunk];
};

// Phase 1 of a GEMV: the weights do not depend on the previous kernel (or phase), so the warp's
// first two chunks of w [N, K] are requested at once (warp `first` of `stride` warps in all).
__device__ __forceinline__ void gemv_begin(GemvStream& s, const bfloat16* w, int64_t N, int K,
                                           int64_t first, int64_t stride, int lane) {
  const int packs = K / 8;
  s.load = {first, 0};
  s.use = {first, 0};
  gemv_load(s.buf0, w, s.load, N, packs, lane);
  s.load.advance(packs, stride);
  gemv_load(s.buf1, w, s.load, N, packs, lane);
  s.load.advance(packs, stride);
}

// Phase 2: from here on a (and out, when accumulating) are the previous kernel's (or phase's)
// outputs. The prologue of a [M, K] (M <= Rows) ([M, 2K] for SwiGLU), rounded to bfloat16 as the separate
// kernels would store it, into xs [M, K] in shared memory as float32: one pass over a (and the
// RMSNorm weight g into gs [K]); for RMSNorm then the sums of squares (per warp in sums, the
// block's Warps warps in order) and a pass over shared memory. Ends with the block in step.
template <GemvPrologue P, int Warps, int Rows>
__device__ __forceinline__ void gemv_stage(float* xs, float* gs, const bfloat16* a,
                                           const bfloat16* g, int M, int K, float eps) {
  __shared__ float sums[Warps][Rows];
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
  const int packs = K / 8, threads = static_cast<int>(blockDim.x);
  const int in_ld = P == GemvPrologue::kSwiglu ? 2 * K : K;
  float ss[Rows] = {};
  for (int q = threadIdx.x; q < packs; q += threads) {
    if constexpr (P == GemvPrologue::kRmsNorm) {
      float gw[8];
      widen8(reinterpret_cast<const uint4*>(g)[q], gw);
      reinterpret_cast<float4*>(gs + q * 8)[0] = make_float4(gw[0], gw[1], gw[2], gw[3]);
      reinterpret_cast<float4*>(gs + q * 8)[1] = make_float4(gw[4], gw[5], gw[6], gw[7]);
    }
#pragma unroll
    for (int m = 0; m < Rows; ++m) {
      if (m < M) {
        float v[8];
        widen8(reinterpret_cast<const uint4*>(a + m * in_ld)[q], v);
        if constexpr (P == GemvPrologue::kSwiglu) {
          float up[8];
          widen8(reinterpret_cast<const uint4*>(a + m * in_ld + K)[q], up);
#pragma unroll
          for (int i = 0; i < 8; ++i) v[i] = round_bf16(fast_silu(v[i]) * up[i]);
        } else if constexpr (P == GemvPrologue::kRmsNorm) {
#pragma unroll
          for (int i = 0; i < 8; ++i) ss[m] += v[i] * v[i];  // v stays raw until rstd is known
        }
        float4* x = reinterpret_cast<float4*>(xs + m * K + q * 8);
        x[0] = make_float4(v[0], v[1], v[2], v[3]);
        x[1] = make_float4(v[4], v[5], v[6], v[7]);
      }
    }
  }
  if constexpr (P == GemvPrologue::kRmsNorm) {
#pragma unroll
    for (int m = 0; m < Rows; ++m) {
      if (m < M) {
        const float s = warp_allreduce(ss[m], SumOp{});
        if (lane == 0) sums[warp][m] = s;
      }
    }
    __syncthreads();
#pragma unroll
    for (int m = 0; m < Rows; ++m) {
      if (m < M) {
        float total = 0;
#pragma unroll
        for (int wi = 0; wi < Warps; ++wi) total += sums[wi][m];
        const float rstd = rsqrtf(total / static_cast<float>(K) + eps);
        float4* x = reinterpret_cast<float4*>(xs + m * K);
        const float4* gv = reinterpret_cast<const float4*>(gs);
        for (int k = threadIdx.x; k < K / 4; k += threads) {
          float4 v = x[k];
          const float4 gk = gv[k];
          v.x = round_bf16(v.x * rstd * gk.x);
          v.y = round_bf16(v.y * rstd * gk.y);
          v.z = round_bf16(v.z * rstd * gk.z);
          v.w = round_bf16(v.w * rstd * gk.w);
          x[k] = v;
        }
      }
    }
  }
  __syncthreads();
}

// Phase 3 (M <= Rows): the warp's chunks in order, the one after next requested as each is used; each
// finished row's sums to out [M, N] (+ out's old values when accumulating).
template <int Rows, typename Out>
__device__ __forceinline__ void gemv_run(GemvStream& s, Out* out, const bfloat16* w,
                                         const float* xs, int M, int64_t N, int K, int64_t stride,
                                         bool accumulate, int lane) {
  const int packs = K / 8;
  float acc[Rows] = {};
  while (s.use.row < N) {
    gemv_fma(acc, s.buf0, xs, K, M, s.use.base, packs, lane);
    gemv_finish(acc, s.use, out, M, N, packs, accumulate, lane);
    s.use.advance(packs, stride);
    gemv_load(s.buf0, w, s.load, N, packs, lane);
    s.load.advance(packs, stride);
    if (s.use.row >= N) break;
    gemv_fma(acc, s.buf1, xs, K, M, s.use.base, packs, lane);
    gemv_finish(acc, s.use, out, M, N, packs, accumulate, lane);
    s.use.advance(packs, stride);
    gemv_load(s.buf1, w, s.load, N, packs, lane);
    s.load.advance(packs, stride);
  }
}

// out[m, n] (+)= sum_k x[m, k] w[n, k] for m < M <= kGemvMaxRows, where x = the prologue of a,
// rounded to bfloat16 (as the separate kernels would store it): a itself, its RMSNorm with
// weight g, or silu(a[m, k]) * a[m, K + k] for a [M, 2K]. K % 8 == 0; see the section comment.
// The three phases, with the dependent launch's wait between the first two.
template <GemvPrologue P, typename Out>
__global__ void __launch_bounds__(kGemvWarps* kWarpThreads, kGemvBlocksPerSm)
    decode_gemv_kernel(Out* out, const bfloat16* a, const bfloat16* w, const bfloat16* g, int M,
                       int64_t N, int K, float eps, bool accumulate) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* xs = reinterpret_cast<float*>(smem_raw);  // [M, K]
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
  const int64_t stride = int64_t{gridDim.x} * kGemvWarps;
  GemvStream s;
  gemv_begin(s, w, N, K, int64_t{blockIdx.x} * kGemvWarps + warp, stride, lane);
  grid_dependents_launch();
  grid_dependency_wait();
  gemv_stage<P, kGemvWarps, kGemvMaxRows>(xs, xs + M * K, a, g, M, K, eps);
  gemv_run<kGemvMaxRows>(s, out, w, xs, M, N, K, stride, accumulate, lane);
}

// ----- the decode step's attention in one launch (bfloat16, one query per row) ---------------
//
// RoPE + append then attend were two launches: the append grid, then one block per query head
// that reads every cached key and value of its group (GQA: the group's keys are read NH / NKV
// times) through a chain of dependent steps (scores, a block max, exp, a block sum, the weighted
// sum), its time growing with the cached length. Here one launch does both and splits the keys
// as FlashDecoding does: block (s, j, b) takes keys [s Kc, (s + 1) Kc) of key/value head j of row
// b for all G = NH / NKV query heads of the group at once (each key read from memory once, from
// shared memory G times), and writes the split's partial result: its max m, sum l and
// unnormalised output o (chapter 10's online softmax). The last split to finish (a counter per
// (b, j)) merges the splits' partials with the log-sum-exp rule, as chapter 16 merges ring
// steps. The block whose keys include the new position p rotates k and writes k and v to the
// caches and to its shared memory. Every block rotates the group's G query heads itself.
// Latency, not bandwidth, bounds it at a few hundred positions, so the loads of a split are all
// issued before any is used, and the merge reads every split in one pass.

constexpr int kAttnKeys = 32;      // Kc: keys of one split (a block)
constexpr int kAttnThreads = 256;  // threads of a block
constexpr int kAttnMaxHs = 128;    // head sizes it takes: multiples of 8 up to this
constexpr int kAttnMaxGroup = 16;  // query heads per key/value head it takes

// The cached keys and values of one split in registers: thread t holds 16-byte pack t + u
// Threads of the split's [Kc, hs] rows (kPer of them).
template <int Threads>
struct AttnRows {
  static constexpr int kPer = (kAttnKeys * (kAttnMaxHs / 8) + Threads - 1) / Threads;
  uint4 k[kPer], v[kPer];
};

// Step 1a of split `split` of key/value head j of row b: its cached keys and values, rows
// [first, min(first + Kc, p)) of the caches (p = start[b], the new position: no kernel of this
// step writes those rows, so the loads may go before the step's projection is done).
template <int Threads>
__device__ __forceinline__ void attention_load(AttnRows<Threads>& r, int split, int j, int64_t b,
                                               const bfloat16* kc, const bfloat16* vc,
                                               const int64_t* start, int NKV, int hs,
                                               int64_t Tmax) {
  const int64_t p = start[b], first = int64_t{split} * kAttnKeys;
  if (first >= p + 1) return;
  const int packs = hs / 8;
  const int cached = static_cast<int>(min(int64_t{kAttnKeys}, p - first)) * packs;
  const bfloat16* K = kc + (b * NKV + j) * Tmax * hs;
  const bfloat16* V = vc + (b * NKV + j) * Tmax * hs;
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int u = 0; u < AttnRows<Threads>::kPer; ++u) {
    const int e = tid + u * Threads;
    if (e < cached) {
      const int64_t at = (first + e / packs) * hs + e % packs * 8;
      r.k[u] = __ldg(reinterpret_cast<const uint4*>(K + at));
      r.v[u] = __ldg(reinterpret_cast<const uint4*>(V + at));
    }
  }
}

// One split's work, split `split` of key/value head j of row b, by a block of Threads threads:
// see the section comment. qkv [B, 1, (NH + 2 NKV) hs]; caches [B, NKV, Tmax, hs]; partial [B,
// NH, S, hs + 2] float32 (o, then m and l); counter int64 [B NKV], zero before the launch and
// zero again after it (the merging block resets its own); out [B, NH, 1, hs]. A block may call
// it for several splits in turn. `rows`: the split's cached rows, loaded here unless `loaded`
// (attention_load, called earlier by the same block for the same split); with next_split >= 0,
// `rows` receives split next_split of key/value head next_j as soon as this split's rows are in
// shared memory (the next call's, with `loaded`: its loads overlap this split's arithmetic).
template <int Threads>
__device__ __forceinline__ void decode_attention_split(
    int split, int j, int64_t b, bfloat16* out, float* partial, unsigned long long* counter,
    bfloat16* kc, bfloat16* vc, const bfloat16* qkv, const float* cos_t, const float* sin_t,
    const int64_t* pos, const int64_t* start, int NH, int NKV, int hs, int64_t Tmax, int S,
    float scale, AttnRows<Threads>& rows, bool loaded, int next_split = -1, int next_j = 0) {
  constexpr int kPad = 8;  // bfloat16 after each key row in shared memory: no bank conflicts
  __shared__ __align__(16) bfloat16 ks[kAttnKeys * (kAttnMaxHs + kPad)];
  __shared__ __align__(16) bfloat16 vs[kAttnKeys * (kAttnMaxHs + kPad)];
  __shared__ __align__(16) float qs[kAttnMaxGroup * kAttnMaxHs];
  __shared__ float ps[kAttnMaxGroup * kAttnKeys];
  __shared__ float ml[kAttnMaxGroup * 2];
  __shared__ bool last;
  const int G = NH / NKV, half = hs / 2, ld = hs + kPad, tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarpThreads, warp = tid / kWarpThreads;
  constexpr int kWarps = Threads / kWarpThreads;
  const int64_t p = start[b], n = p + 1, first = int64_t{split} * kAttnKeys;
  __syncthreads();   // the block's previous split is done with the shared arrays
  if (first >= n) {  // no keys here (the grid covers Tmax; a step attends n of them)
    if (next_split >= 0) {
      attention_load<Threads>(rows, next_split, next_j, b, kc, vc, start, NKV, hs, Tmax);
    }
    return;
  }
  const int cnt = static_cast<int>(min(int64_t{kAttnKeys}, n - first));
  const int64_t H = NH + 2 * NKV, ps_pos = pos[b];
  const bfloat16* row = qkv + b * H * hs;
  bfloat16* K = kc + (b * NKV + j) * Tmax * hs;
  bfloat16* V = vc + (b * NKV + j) * Tmax * hs;
  // 1. Every load of the split at once (one round trip to memory, not three): the cached keys
  //    and values into registers (1a, unless loaded before), then the group's queries rotated
  //    and rounded to bfloat16 (as llama_rope_append stores them) and, in the block that holds
  //    position p, the new key rotated and the new value, written to the caches and to shared
  //    memory; then the cached rows from the registers to shared memory.
  const int packs = hs / 8;
  const bool has_new = p < first + cnt;  // then p = first + cnt - 1, the split's last key
  const int cached = (has_new ? cnt - 1 : cnt) * packs;
  if (!loaded) attention_load<Threads>(rows, split, j, b, kc, vc, start, NKV, hs, Tmax);
  const float* cos_p = cos_t + ps_pos * half;
  const float* sin_p = sin_t + ps_pos * half;
  for (int e = tid; e < G * half; e += Threads) {
    const int h = e / half, i = e % half;
    const bfloat16* x = row + (int64_t{j} * G + h) * hs;
    bfloat16 q1, q2;
    rotate_pair(&q1, &q2, widen(x[i]), widen(x[i + half]), cos_p[i], sin_p[i]);
    qs[h * hs + i] = widen(q1);  // rounded to bfloat16 as llama_rope_append stores q
    qs[h * hs + i + half] = widen(q2);
  }
  if (has_new) {
    const int r = cnt - 1;
    for (int i = tid; i < half; i += Threads) {
      const bfloat16* x = row + (int64_t{NH} + j) * hs;
      const bfloat16* y = row + (int64_t{NH} + NKV + j) * hs;
      bfloat16 k1, k2;
      rotate_pair(&k1, &k2, widen(x[i]), widen(x[i + half]), cos_p[i], sin_p[i]);
      K[p * hs + i] = ks[r * ld + i] = k1;
      K[p * hs + i + half] = ks[r * ld + i + half] = k2;
      V[p * hs + i] = vs[r * ld + i] = y[i];
      V[p * hs + i + half] = vs[r * ld + i + half] = y[i + half];
    }
  }
#pragma unroll
  for (int u = 0; u < AttnRows<Threads>::kPer; ++u) {
    const int e = tid + u * Threads;
    if (e < cached) {
      *reinterpret_cast<uint4*>(ks + e / packs * ld + e % packs * 8) = rows.k[u];
      *reinterpret_cast<uint4*>(vs + e / packs * ld + e % packs * 8) = rows.v[u];
    }
  }
  if (next_split >= 0) {
    attention_load<Threads>(rows, next_split, next_j, b, kc, vc, start, NKV, hs, Tmax);
  }
  __syncthreads();
  // 2. Scores of every (query head, key) pair.
  for (int e = tid; e < G * cnt; e += Threads) {
    const int h = e / cnt, i = e % cnt;
    const float* q = qs + h * hs;
    float dot = 0;
    for (int c = 0; c < packs; ++c) {
      float kf[8];
      widen8(*reinterpret_cast<const uint4*>(ks + i * ld + c * 8), kf);
#pragma unroll
      for (int t = 0; t < 8; ++t) dot += q[c * 8 + t] * kf[t];
    }
    ps[h * kAttnKeys + i] = dot * scale;
  }
  __syncthreads();
  // 3. Per query head (a warp each): the split's max and the weights exp(s - m), their sum.
  for (int h = warp; h < G; h += kWarps) {
    const float v = lane < cnt ? ps[h * kAttnKeys + lane] : -INFINITY;
    const float m = warp_allreduce(v, MaxOp{});
    const float e = lane < cnt ? expf(v - m) : 0.0f;
    if (lane < cnt) ps[h * kAttnKeys + lane] = e;
    const float l = warp_allreduce(e, SumOp{});
    if (lane == 0) {
      ml[2 * h] = m;
      ml[2 * h + 1] = l;
    }
  }
  __syncthreads();
  // 4. The unnormalised outputs o = sum_i exp(s_i - m) v_i, two dimensions a thread, to partial.
  float* mine = partial + ((b * NH + int64_t{j} * G) * S + split) * (hs + 2);  // head j G
  const int64_t head_ld = int64_t{S} * (hs + 2);
  for (int e = tid; e < G * half; e += Threads) {
    const int h = e / half, d = 2 * (e % half);
    float o0 = 0, o1 = 0;
    for (int i = 0; i < cnt; ++i) {
      const float w = ps[h * kAttnKeys + i];
      o0 += w * widen(vs[i * ld + d]);
      o1 += w * widen(vs[i * ld + d + 1]);
    }
    mine[h * head_ld + d] = o0;
    mine[h * head_ld + d + 1] = o1;
  }
  for (int h = tid; h < G; h += Threads) {
    mine[h * head_ld + hs] = ml[2 * h];
    mine[h * head_ld + hs + 1] = ml[2 * h + 1];
  }
  // 5. The last of the row's splits to finish merges them (threadFenceReduction's pattern: the
  //    partials are visible device-wide before the count says so).
  __threadfence();
  __syncthreads();
  const int splits = static_cast<int>((n + kAttnKeys - 1) / kAttnKeys);
  if (tid == 0) {
    unsigned long long* ctr = counter + b * NKV + j;
    last = atomicAdd(ctr, 1ULL) == static_cast<unsigned long long>(splits - 1);
    if (last) *ctr = 0;  // ready for the next launch
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float* group = partial + (b * NH + int64_t{j} * G) * head_ld;
  // The largest of the splits' maxima per query head (a warp per head, the splits across its
  // lanes), then each output element sums the splits itself: o and l of split s weighted by
  // exp(m_s - M), the log-sum-exp rule (loads independent of each other: one pass).
  for (int h = warp; h < G; h += kWarps) {
    float m = -INFINITY;
    for (int s = lane; s < splits; s += kWarpThreads) {
      m = fmaxf(m, __ldcg(group + h * head_ld + int64_t{s} * (hs + 2) + hs));
    }
    m = warp_allreduce(m, MaxOp{});
    if (lane == 0) ml[2 * h] = m;
  }
  __syncthreads();
  for (int e = tid; e < G * hs; e += Threads) {
    const int h = e / hs, d = e % hs;
    const float m = ml[2 * h];
    float l = 0, o = 0;
    for (int s = 0; s < splits; ++s) {
      const float* at = group + h * head_ld + int64_t{s} * (hs + 2);
      const float w = expf(__ldcg(at + hs) - m);
      l += __ldcg(at + hs + 1) * w;
      o += __ldcg(at + d) * w;
    }
    out[((b * NH) + int64_t{j} * G + h) * hs + d] = narrow<bfloat16>(o / l);
  }
}

// One launch of the splits (see the section comment): block (s, j, b) takes split s of key/value
// head j of row b.
__global__ void __launch_bounds__(kAttnThreads)
    decode_attention_kernel(bfloat16* out, float* partial, unsigned long long* counter,
                            bfloat16* kc, bfloat16* vc, const bfloat16* qkv, const float* cos_t,
                            const float* sin_t, const int64_t* pos, const int64_t* start, int NH,
                            int NKV, int hs, int64_t Tmax, int S, float scale) {
  grid_dependency_wait();  // a dependent launch: qkv comes from the previous kernel
  grid_dependents_launch();
  AttnRows<kAttnThreads> rows;
  decode_attention_split<kAttnThreads>(static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                                       blockIdx.z, out, partial, counter, kc, vc, qkv, cos_t, sin_t,
                                       pos, start, NH, NKV, hs, Tmax, S, scale, rows, false);
}

// ----- the whole decode step in one launch (bfloat16, batch of one) -------------------------
//
// The kernels above still leave a fixed cost at every kernel boundary: the last warps' tail,
// the grid's completion, the next grid's first loads. A batch-1 step of TinyLlama-1.1B's shape
// has ~110 of them (five phases a layer). Here one persistent kernel runs the whole step, one
// block of kStepWarpsDefault warps per multiprocessor (a cooperative launch: all resident at
// once), phase after phase with a grid barrier between:
//   per layer   qkv = RMSNorm(x) Wqkv^T | RoPE + append + attention (the splits above) -> y |
//               x += y Wo^T | gu = RMSNorm(x) Wgu^T | x += SwiGLU(gu) Wdown^T
//   then        logits = RMSNorm(x) Whead^T
// The weights do not depend on the activations, so their loads never wait for a barrier: each
// warp streams its chunks of every GEMV of the step, in order, through a ring in shared memory
// (see StepStream), while the barriers, the prologues and the attention hold back only the
// arithmetic. Each row is summed by one warp in the same order as the separate GEMV's (the
// RMSNorm's sum of squares differs in order: 8-16 warps a block, not 4). Measured per phase
// with TT_DECODE_STEP_TRACE (README, "The whole step in one launch").

// Warps of the one block per multiprocessor and chunks in flight per warp: 8 x 5, 12 x 3 or
// 16 x 2 (160, 144 or 128 KiB of rings; kStepWarpsDefault warps, the environment's
// TT_DECODE_STEP_WARPS for measurements).
constexpr int kStepWarpsDefault = 12;
// Bytes of the warps' rings: Depth chunks of 4 KiB per warp (see StepStream).
template <int Warps, int Depth>
constexpr std::size_t kStepRingBytes = std::size_t{Warps} * Depth* kGemvChunk* kWarpThreads *
                                       sizeof(uint4);
constexpr int kStepMaxLayers = 48;  // layers the kernel's parameters have room for

// One layer's device pointers: the packed qkv rows, input norm, o, post-attention norm, packed
// gate/up rows, down, and the layer's caches.
struct StepLayer {
  const bfloat16 *qkv, *norm1, *o, *norm2, *gate_up, *down;
  bfloat16 *kc, *vc;
};

// The step's parameters, passed by value (3.2 KB of the 4 KB a kernel's parameters may take).
struct StepArgs {
  StepLayer layer[kStepMaxLayers];
  const bfloat16 *final_norm, *head;
  float* logits;                 // [1, V]
  bfloat16* x;                   // [1, C], the residual stream: read and written in place
  bfloat16* qkv;                 // [1, W] scratch
  bfloat16* y;                   // [1, NH hs] scratch: the attention's output
  bfloat16* gate_up;             // [1, 2F] scratch
  float* partial;                // [1, NH, S, hs + 2] the attention's splits
  unsigned long long* counters;  // [NKV] the attention's, then the barrier's count: zeros
  const float *cos, *sin;
  const int64_t *pos, *start;
  int layers, C, NH, NKV, hs, F, S;
  int64_t V, Tmax;
  float eps, scale;
  unsigned long long* trace;  // null, or the trace of TT_DECODE_STEP_TRACE
};

// The step's trace (TT_DECODE_STEP_TRACE, for measurements): per phase i, the first and the
// last block's arrival at its end and block 0's release from the barrier after it (globaltimer,
// ns) at trace[3 i + 0, 1, 2]; the launch's start (block 0) after the last phase's entries.
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void trace_arrival(unsigned long long* trace, int phase) {
  if (trace == nullptr || threadIdx.x != 0) return;
  const unsigned long long t = global_ns();
  atomicMin(trace + 3 * phase, t);
  atomicMax(trace + 3 * phase + 1, t);
}

// The grid barrier: every block arrives (one release add), then waits until all gridDim.x have
// arrived at this barrier (the count is never reset within a launch: barrier i waits for i
// gridDim.x arrivals, `target` counts them in every block). Writes before it are visible to
// every block after it (threadFenceReduction's fences around the count, as cooperative groups'
// grid.sync does).
__device__ __forceinline__ void grid_barrier(unsigned long long* count, unsigned long long& target,
                                             unsigned long long* trace) {
  __syncthreads();
  const int phase = static_cast<int>(target / gridDim.x);
  target += gridDim.x;
  trace_arrival(trace, phase);
  if (threadIdx.x == 0) {
    __threadfence();
    asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(count) : "memory");
    unsigned long long seen = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(count) : "memory");
    } while (seen < target);
    __threadfence();
    if (trace != nullptr && blockIdx.x == 0) trace[3 * phase + 2] = global_ns();
  }
  __syncthreads();
}

// The step kernel's GEMVs stream through shared memory instead of registers, and their loads
// never wait for a barrier: each warp keeps a ring of Depth chunks (4 KiB each) in flight with
// cp.async (16-byte copies that land in shared memory without passing through registers), and
// the ring's loads run ahead through the warp's chunks of every GEMV of the step in order (per
// layer qkv, o, gate/up, down, then the head: the "phases"). While a barrier, a prologue or the
// attention holds the warp's arithmetic back, its next phases' weights keep arriving. Slots are
// lane-private: lane l's load j of the chunk in slot d lives at ring[(d kGemvChunk + j) 32 + l],
// written by lane l's own cp.async and read back by lane l alone once its group has landed
// (cp.async.wait_group: no synchronisation between lanes). Each block takes an equal share of
// each GEMV's rows (rows [N b / G, N (b + 1) / G) of block b of G), its warps every Warps-th row
// of that range: every multiprocessor streams the same bytes.

// GEMV phase ph of the step: per layer l qkv (4 l), o, gate/up, down (4 l + 3), then the head
// (4 L): its weight [N, K].
struct StepPhase {
  const bfloat16* w;
  int64_t N;
  int K;
};

// A warp's place in its chunks of every phase: phase ph (4 L + 1 past the last), row `row` of
// the block's rows up to `end`, chunk `base` (in packs) of the row of `packs` packs of w.
struct StepCursor {
  int ph;
  int64_t row, end;
  int base, packs;
  const bfloat16* w;
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const auto dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gmem) : "memory");
}

// Requests the cursor's chunk into `slot` of the warp's ring (nothing past a row's end or past
// the last phase) as one cp.async group (empty groups keep the count of groups uniform).
__device__ __forceinline__ void ring_load(uint4* ring, int slot, const StepCursor& c, int last,
                                          int lane) {
  if (c.ph <= last) {
    const uint4* row = reinterpret_cast<const uint4*>(c.w) + c.row * c.packs;
#pragma unroll
    for (int j = 0; j < kGemvChunk; ++j) {
      const int q = c.base + lane + j * kWarpThreads;
      if (q < c.packs) {
        cp_async16(ring + (slot * kGemvChunk + j) * kWarpThreads + lane, row + q);
      }
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// The step's phase ph (see StepPhase).
__device__ __forceinline__ StepPhase step_phase(const StepArgs& a, int ph) {
  if (ph >= 4 * a.layers) return {a.head, a.V, a.C};
  const StepLayer& L = a.layer[ph / 4];
  switch (ph % 4) {
    case 0:
      return {L.qkv, int64_t{a.NH + 2 * a.NKV} * a.hs, a.C};
    case 1:
      return {L.o, a.C, a.NH * a.hs};
    case 2:
      return {L.gate_up, 2 * int64_t{a.F}, a.C};
    default:
      return {L.down, a.C, a.F};
  }
}

// The cursor at warp `warp`'s first row of phase ph or, where it has none, of a later phase.
// Blocks [0, A), the attention's own where A > 0 (see decode_step_kernel), take no rows of the
// qkv and o projections: the other gridDim.x - A blocks share them.
template <int Warps>
__device__ __forceinline__ void cursor_enter(StepCursor& c, const StepArgs& a, int ph, int warp,
                                             int A) {
  const int last = 4 * a.layers;
  for (; ph <= last; ++ph) {
    const StepPhase p = step_phase(a, ph);
    const bool around_attention = ph < last && ph % 4 < 2;
    const int64_t blocks = around_attention ? gridDim.x - A : gridDim.x;
    const int64_t b = around_attention ? int64_t{blockIdx.x} - A : int64_t{blockIdx.x};
    if (b < 0) continue;
    const int64_t begin = p.N * b / blocks, end = p.N * (b + 1) / blocks;
    if (begin + warp < end) {
      c = {ph, begin + warp, end, 0, p.K / 8, p.w};
      return;
    }
  }
  c.ph = last + 1;
}

// The cursor one chunk on: the row's next chunk, the warp's next row, or the next phase.
template <int Warps>
__device__ __forceinline__ void cursor_advance(StepCursor& c, const StepArgs& a, int warp, int A) {
  c.base += kGemvChunkPacks;
  if (c.base < c.packs) return;
  c.base = 0;
  c.row += Warps;
  if (c.row < c.end) return;
  cursor_enter<Warps>(c, a, c.ph + 1, warp, A);
}

// A warp's streams: `use` (the next chunk to multiply) and `load` (Depth chunks ahead), and
// the ring slot holding use's chunk.
struct StepStream {
  StepCursor use, load;
  int slot;
  int A;  // the attention blocks (see cursor_enter)
};

// Phase ph's rows of the warp (one input row, xs staged): for each chunk, wait for the oldest
// group, take its chunk into registers, request the chunk Depth ahead into the freed slot (of
// this phase or a later one), multiply; each finished row to out (+ its old value).
template <int Warps, int Depth, typename Out>
__device__ __forceinline__ void step_gemv(StepStream& s, uint4* ring, const StepArgs& a, int ph,
                                          Out* out, const float* xs, bool accumulate, int warp,
                                          int lane) {
  const int last = 4 * a.layers;
  float acc[1] = {};
  while (s.use.ph == ph) {
    asm volatile("cp.async.wait_group %0;" ::"n"(Depth - 1) : "memory");
    uint4 buf[kGemvChunk];
#pragma unroll
    for (int j = 0; j < kGemvChunk; ++j) {
      buf[j] = ring[(s.slot * kGemvChunk + j) * kWarpThreads + lane];
    }
    ring_load(ring, s.slot, s.load, last, lane);
    cursor_advance<Warps>(s.load, a, warp, s.A);
    gemv_fma<1>(acc, buf, xs, s.use.packs * 8, 1, s.use.base, s.use.packs, lane);
    // One output row: gemv_finish writes out[row] from lane 0 (N, the row stride, unused).
    gemv_finish<1>(acc, GemvCursor{s.use.row, s.use.base}, out, 1, 0, s.use.packs, accumulate,
                   lane);
    cursor_advance<Warps>(s.use, a, warp, s.A);
    s.slot = s.slot + 1 == Depth ? 0 : s.slot + 1;
  }
}

template <int Warps, int Depth>
__global__ void __launch_bounds__(Warps* kWarpThreads, 1)
    decode_step_kernel(const __grid_constant__ StepArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
  // The warps' rings of Depth chunks, then the GEMV's input row (and RMSNorm weight).
  uint4* ring = reinterpret_cast<uint4*>(smem_raw) + warp * Depth * kGemvChunk * kWarpThreads;
  float* xs = reinterpret_cast<float*>(smem_raw + kStepRingBytes<Warps, Depth>);
  constexpr int M = 1;  // one row: the bandwidth-bound case
  const int C = a.C, NHhs = a.NH * a.hs, F = a.F, last = 4 * a.layers;
  unsigned long long* count = a.counters + a.NKV;
  unsigned long long target = 0;
  if (a.trace != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    a.trace[3 * (5 * a.layers + 1)] = global_ns();
  }
  // The attention's splits: ceil(n / Kc) per key/value head for the n cached positions. Up to a
  // quarter of the blocks' worth go to blocks of their own, A = one per split, which take no
  // rows of the qkv and o projections around the attention: their rings then hold gate/up
  // weights requested long before, and the attention's loads do not queue behind a ring's
  // (bench_decode, H200: the attention's phase 7 us a layer at 130 positions against 10.7 on
  // blocks that also stream). More splits go to every block (A = 0), one or two each: a quarter
  // of the blocks taking several splits in turn were slower (60 us a layer at 1,600 positions
  // against 17, every access of theirs waiting on a memory busy with the others' streams).
  const int live = static_cast<int>((a.start[0] + kAttnKeys) / kAttnKeys);  // splits per head
  const int items = live * a.NKV;
  const int A = items <= static_cast<int>(gridDim.x) / 4 ? items : 0;
  // The first Depth chunks of the warp's stream (x is ready: the embedding's).
  StepStream s;
  s.A = A;
  cursor_enter<Warps>(s.use, a, 0, warp, A);
  s.load = s.use;
  s.slot = 0;
  for (int d = 0; d < Depth; ++d) {
    ring_load(ring, d, s.load, last, lane);
    cursor_advance<Warps>(s.load, a, warp, A);
  }
  for (int l = 0; l < a.layers; ++l) {
    const StepLayer& L = a.layer[l];
    gemv_stage<GemvPrologue::kRmsNorm, Warps, 1>(xs, xs + M * C, a.x, L.norm1, M, C, a.eps);
    step_gemv<Warps, Depth>(s, ring, a, 4 * l, a.qkv, xs, false, warp, lane);
    // The attention's splits (most blocks have none): the first split's cached rows are
    // requested before the barrier (they do not depend on qkv).
    // Splits mine, mine + step, ...: on the blocks of their own (the first A: the live splits,
    // `live` a head), or on all (the last block taking the first split; the grid's S splits a
    // head, those past the cached length returning at once: this order measured faster at
    // 1,600 positions than the live splits alone, 17 against 25 us a layer).
    const int per_head = A > 0 ? live : a.S, all = per_head * a.NKV;
    const int mine =
        A > 0 ? static_cast<int>(blockIdx.x) : static_cast<int>(gridDim.x - 1 - blockIdx.x);
    const int step = A > 0 ? A : static_cast<int>(gridDim.x);
    const bool attends = mine < all && (A == 0 || mine < A);
    AttnRows<Warps * kWarpThreads> rows;
    if (attends) {
      attention_load<Warps * kWarpThreads>(rows, mine % per_head, mine / per_head, 0, L.kc, L.vc,
                                           a.start, a.NKV, a.hs, a.Tmax);
    }
    grid_barrier(count, target, a.trace);
    for (int it = mine; attends && it < all; it += step) {
      const int next = it + step < all ? it + step : -1;
      decode_attention_split<Warps * kWarpThreads>(
          it % per_head, it / per_head, 0, a.y, a.partial, a.counters, L.kc, L.vc, a.qkv, a.cos,
          a.sin, a.pos, a.start, a.NH, a.NKV, a.hs, a.Tmax, a.S, a.scale, rows, true,
          next < 0 ? -1 : next % per_head, next < 0 ? 0 : next / per_head);
    }
    grid_barrier(count, target, a.trace);
    gemv_stage<GemvPrologue::kNone, Warps, 1>(xs, nullptr, a.y, nullptr, M, NHhs, 0.0f);
    step_gemv<Warps, Depth>(s, ring, a, 4 * l + 1, a.x, xs, true, warp, lane);
    grid_barrier(count, target, a.trace);
    gemv_stage<GemvPrologue::kRmsNorm, Warps, 1>(xs, xs + M * C, a.x, L.norm2, M, C, a.eps);
    step_gemv<Warps, Depth>(s, ring, a, 4 * l + 2, a.gate_up, xs, false, warp, lane);
    grid_barrier(count, target, a.trace);
    gemv_stage<GemvPrologue::kSwiglu, Warps, 1>(xs, nullptr, a.gate_up, nullptr, M, F, 0.0f);
    step_gemv<Warps, Depth>(s, ring, a, 4 * l + 3, a.x, xs, true, warp, lane);
    grid_barrier(count, target, a.trace);
  }
  gemv_stage<GemvPrologue::kRmsNorm, Warps, 1>(xs, xs + M * C, a.x, a.final_norm, M, C, a.eps);
  step_gemv<Warps, Depth>(s, ring, a, last, a.logits, xs, false, warp, lane);
  __syncthreads();
  trace_arrival(a.trace, 5 * a.layers);
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
    const bool wide = (hs * sizeof(T)) % 16 == 0 && aligned16(k_cache.data_ptr()) &&
                      aligned16(v_cache.data_ptr());
    const std::size_t smem = static_cast<std::size_t>(Tmax) * sizeof(A);
    const std::size_t fixed =
        (kRowThreads * (wide ? kW : 1) + kRowThreads / kWarpThreads) * sizeof(A);
    TT_CHECK(smem + fixed <= 48 * 1024, "cuda::kv_cache_attend: max_len ", Tmax,
             " needs more than 48 KiB of shared memory for the scores of a row");
    const auto launch = [&]<int W>() {
      launch_dependent(dev, kv_attend_kernel<T, W>, dim3(static_cast<unsigned>(rows)),
                       dim3(kRowThreads), smem, out.data<T>(), q.data<T>(), k_cache.data<T>(),
                       v_cache.data<T>(), s.data<int64_t>(), NH, NKV, Tq, Tmax, hs,
                       static_cast<A>(1.0 / std::sqrt(static_cast<double>(hs))));
      TT_CUDA_CHECK_LAUNCH("kv_attend_kernel");
    };
    if (wide) {
      launch.template operator()<kW>();
    } else {
      launch.template operator()<1>();
    }
  });
}

namespace {

// The checks "llama_rope_append" and "llama_decode_attention" share, naming `op`: q (or the
// attention's out) [B, NH, T, hs] and qkv [B, T, (NH + 2 NKV) hs] of one dtype, caches [B, NKV,
// Tmax, hs], contiguous CUDA tensors on one device; tables cos, sin [P, hs/2] of the computing
// type (float32 for bfloat16); int64 positions [B, T] and start [B] on that device.
void check_rope_append(const char* op, const Tensor& q, const Tensor& qkv, const Tensor& cos,
                       const Tensor& sin, const Tensor& positions, const Tensor& start,
                       const Tensor& k_cache, const Tensor& v_cache) {
  check_cuda(op, {&qkv, &q, &k_cache, &v_cache});
  check_cuda(op, {&cos, &sin});
  const bool shapes = qkv.dim() == 3 && q.dim() == 4 && k_cache.dim() == 4 &&
                      v_cache.shape() == k_cache.shape() && q.size(0) == qkv.size(0) &&
                      q.size(2) == qkv.size(1) && k_cache.size(0) == q.size(0) &&
                      k_cache.size(3) == q.size(3) && q.size(3) % 2 == 0 &&
                      qkv.size(2) == (q.size(1) + 2 * k_cache.size(1)) * q.size(3) &&
                      cos.dim() == 2 && cos.size(1) == q.size(3) / 2;
  TT_CHECK(shapes && cos.device() == q.device() &&
               cos.dtype() == (q.dtype() == DType::kBFloat16 ? DType::kFloat32 : q.dtype()),
           "cuda::", op, ": expected qkv [B, T, (NH + 2 NKV) hs], q [B, NH, T, hs], caches [B, ",
           "NKV, Tmax, hs] and tables [P, hs/2] (float32 for bfloat16), got qkv ", describe(qkv),
           ", q ", describe(q), ", k_cache ", describe(k_cache), ", cos ", describe(cos));
  const int64_t B = q.size(0), T = q.size(2);
  TT_CHECK(positions.dtype() == DType::kInt64 && positions.numel() == B * T &&
               positions.is_contiguous() && positions.device() == q.device() &&
               start.dtype() == DType::kInt64 && start.numel() == B && start.is_contiguous() &&
               start.device() == q.device(),
           "cuda::", op, ": expected int64 positions [B, T] and start [B] on ", q.device().str(),
           ", got ", describe(positions), " and ", describe(start));
}

}  // namespace

void rope_append(const Tensor& q, const Tensor& qkv, const Tensor& cos, const Tensor& sin,
                 const Tensor& positions, const Tensor& start, const Tensor& k_cache,
                 const Tensor& v_cache) {
  check_rope_append("rope_append", q, qkv, cos, sin, positions, start, k_cache, v_cache);
  const int64_t B = q.size(0), T = q.size(2), NH = q.size(1), NKV = k_cache.size(1);
  const int64_t half = q.size(3) / 2, Tmax = k_cache.size(2);
  const int64_t n = B * T * (NH + 2 * NKV) * half;
  if (n == 0) return;
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  dispatch_with_bf16(q.dtype(), "rope_append", [&]<typename T_>() {
    using A = acc_t<T_>;
    launch_dependent(dev, rope_append_kernel<T_>, dim3(grid_size(n, kBlockThreads, dev)),
                     dim3(kBlockThreads), 0, q.data<T_>(), k_cache.data<T_>(), v_cache.data<T_>(),
                     qkv.data<T_>(), cos.data<A>(), sin.data<A>(), positions.data<int64_t>(),
                     start.data<int64_t>(), B, T, NH, NKV, half, Tmax);
    TT_CUDA_CHECK_LAUNCH("rope_append_kernel");
  });
}

bool decode_attention(const Tensor& out, const Tensor& qkv, const Tensor& cos, const Tensor& sin,
                      const Tensor& positions, const Tensor& start, const Tensor& k_cache,
                      const Tensor& v_cache, const Tensor& counters) {
  check_rope_append("decode_attention", out, qkv, cos, sin, positions, start, k_cache, v_cache);
  const int64_t B = out.size(0), T = out.size(2), NH = out.size(1), NKV = k_cache.size(1);
  const int64_t hs = out.size(3), Tmax = k_cache.size(2);
  TT_CHECK(out.dtype() == DType::kBFloat16 && NKV > 0 && NH % NKV == 0,
           "cuda::decode_attention: expected bfloat16 tensors and NKV dividing NH, got out ",
           describe(out), " and k_cache ", describe(k_cache));
  TT_CHECK(counters.defined() && counters.dtype() == DType::kInt64 && counters.numel() >= B * NKV &&
               counters.is_contiguous() && counters.device() == out.device(),
           "cuda::decode_attention: expected int64 counters [B NKV] = [", B * NKV, "] (zeros) on ",
           out.device().str(), ", got ", describe(counters));
  if (T != 1 || hs % 8 != 0 || hs > kAttnMaxHs || NH / NKV > kAttnMaxGroup ||
      !aligned16(k_cache.data_ptr()) || !aligned16(v_cache.data_ptr())) {
    return false;  // the caller appends and attends with the general kernels
  }
  if (B == 0) return true;
  const int dev = out.device().index;
  DeviceGuard guard(dev);
  const int64_t S = (Tmax + kAttnKeys - 1) / kAttnKeys;
  const Tensor partial = empty({B, NH, S, hs + 2}, {DType::kFloat32, out.device()});
  launch_dependent(
      dev, decode_attention_kernel,
      dim3(static_cast<unsigned>(S), static_cast<unsigned>(NKV), static_cast<unsigned>(B)),
      dim3(kAttnThreads), 0, out.data<bfloat16>(), partial.data<float>(),
      reinterpret_cast<unsigned long long*>(counters.data<int64_t>()), k_cache.data<bfloat16>(),
      v_cache.data<bfloat16>(), qkv.data<bfloat16>(), cos.data<float>(), sin.data<float>(),
      positions.data<int64_t>(), start.data<int64_t>(), static_cast<int>(NH), static_cast<int>(NKV),
      static_cast<int>(hs), Tmax, static_cast<int>(S),
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))));
  TT_CUDA_CHECK_LAUNCH("decode_attention_kernel");
  return true;
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
  const std::size_t smem = static_cast<std::size_t>((M + (rms ? 1 : 0)) * K) * sizeof(float);
  if (M < 1 || M > kGemvMaxRows || K % 8 != 0 || K >= (int64_t{1} << 28) || N == 0 ||
      !aligned16(w.data_ptr()) || !aligned16(a.data_ptr()) ||
      (rms && !aligned16(norm_weight.data_ptr())) || smem > kGemvMaxSmem) {
    return false;
  }
  const int dev = w.device().index;
  DeviceGuard guard(dev);
  // A persistent grid (kGemvBlocksPerSm blocks per SM at most), sized so that the warps' row
  // counts differ by at most one: r = ceil(N / most warps) rows for the busiest warp, and
  // ceil(N / r) warps.
  // TT_DECODE_GEMV_BLOCKS (1-4) for measurements (bench_decode, .devrun/s10d.sh).
  static const int64_t blocks_per_sm = [] {
    const char* v = std::getenv("TT_DECODE_GEMV_BLOCKS");
    const int64_t n = v == nullptr ? 0 : std::atoll(v);
    return n >= 1 && n <= kGemvBlocksPerSm ? n : int64_t{kGemvBlocksPerSm};
  }();
  const int64_t most = int64_t{multiprocessor_count(dev)} * blocks_per_sm * kGemvWarps;
  const int64_t rows_per_warp = (N + most - 1) / most;
  const int64_t warps = (N + rows_per_warp - 1) / rows_per_warp;
  const auto grid = static_cast<unsigned>((warps + kGemvWarps - 1) / kGemvWarps);
  const auto* g = rms ? norm_weight.data<bfloat16>() : nullptr;
  const auto launch = [&]<GemvPrologue P, typename Out>() {
    // Above 48 KiB of dynamic shared memory a kernel must opt in (chapter 06).
    TT_CHECK(allow_dynamic_shared_memory(reinterpret_cast<const void*>(decode_gemv_kernel<P, Out>),
                                         kGemvMaxSmem, dev),
             "cuda::decode_gemv: ", kGemvMaxSmem, " bytes of shared memory per block, device ", dev,
             " allows ", max_shared_memory_optin(dev));
    launch_dependent(dev, decode_gemv_kernel<P, Out>, dim3(grid), dim3(kGemvWarps * kWarpThreads),
                     smem, out.data<Out>(), a.data<bfloat16>(), w.data<bfloat16>(), g,
                     static_cast<int>(M), N, static_cast<int>(K), static_cast<float>(eps),
                     accumulate);
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

namespace {

// Prints a decode step's trace (see trace_arrival) to stderr: per kind of phase, the mean over
// layers of its span (the previous release to its last arrival), the spread of the blocks'
// arrivals, and the barrier's latency (last arrival to block 0's release), in microseconds.
void print_step_trace(const Tensor& trace, int phases, int warps) {
  const std::vector<int64_t> t = trace.to_vector<int64_t>();
  const auto at = [&](int i, int k) {
    return static_cast<double>(t[static_cast<std::size_t>(3 * i + k)]);
  };
  const char* names[] = {"qkv", "attention", "o", "gate_up", "down"};
  double span[6] = {}, spread[6] = {}, barrier[6] = {};
  int count[6] = {};
  for (int i = 0; i < phases; ++i) {
    const int kind = i == phases - 1 ? 5 : i % 5;
    const double begin = i == 0 ? at(phases, 0) : at(i - 1, 2);
    span[kind] += (at(i, 1) - begin) / 1e3;
    spread[kind] += (at(i, 1) - at(i, 0)) / 1e3;
    if (i < phases - 1) barrier[kind] += (at(i, 2) - at(i, 1)) / 1e3;
    ++count[kind];
  }
  std::fprintf(stderr, "decode step trace (%d warps a block): %.1f us in all\n", warps,
               (at(phases - 1, 1) - at(phases, 0)) / 1e3);
  std::fprintf(stderr, "  %-10s %8s %8s %8s   (us, mean over layers)\n", "phase", "span", "spread",
               "barrier");
  for (int k = 0; k < 6; ++k) {
    std::fprintf(stderr, "  %-10s %8.2f %8.2f %8.2f\n", k == 5 ? "head" : names[k],
                 span[k] / count[k], spread[k] / count[k], barrier[k] / count[k]);
  }
}

}  // namespace

bool decode_step(const Tensor& logits, const Tensor& x, const std::vector<Tensor>& weights,
                 const Tensor& final_norm, const Tensor& head, double eps, const Tensor& cos,
                 const Tensor& sin, const Tensor& positions, const Tensor& start,
                 const std::vector<Tensor>& k_cache, const std::vector<Tensor>& v_cache) {
  constexpr std::size_t kPerLayer = llama::kDecodeStepLayerTensors;
  const std::size_t layers = k_cache.size();
  TT_CHECK(layers > 0 && v_cache.size() == layers && weights.size() == kPerLayer * layers,
           "cuda::decode_step: expected ", kPerLayer,
           " weights and one k and v cache per layer, "
           "got ",
           weights.size(), " weights, ", k_cache.size(), " k and ", v_cache.size(), " v caches");
  check_cuda("decode_step", {&x, &final_norm, &head});
  const int64_t M = x.dim() == 2 ? x.size(0) : -1, C = x.dim() == 2 ? x.size(1) : -1;
  const Tensor& kc0 = k_cache[0];
  const int64_t NKV = kc0.dim() == 4 ? kc0.size(1) : -1, Tmax = kc0.dim() == 4 ? kc0.size(2) : -1;
  const int64_t hs = kc0.dim() == 4 ? kc0.size(3) : -1;
  const Tensor& wqkv = weights[0];
  const int64_t W = wqkv.dim() == 2 ? wqkv.size(0) : -1;
  const int64_t NH = hs > 0 && W % hs == 0 ? W / hs - 2 * NKV : -1;
  const int64_t F = weights[4].dim() == 2 ? weights[4].size(0) / 2 : -1, V = head.size(0);
  const bool fits = x.dtype() == DType::kBFloat16 && M >= 1 && NKV >= 1 && hs >= 2 && hs % 2 == 0 &&
                    NH >= NKV && NH % NKV == 0 && F >= 1 && head.dim() == 2 && head.size(1) == C &&
                    final_norm.shape() == Shape{C} && kc0.shape() == Shape{M, NKV, Tmax, hs};
  TT_CHECK(fits,
           "cuda::decode_step: expected bfloat16 x [M, C], caches [M, NKV, Tmax, hs], qkv rows ",
           "[(NH + 2 NKV) hs, C] with NKV dividing NH, head [V, C] and final norm [C], got x ",
           describe(x), ", k_cache[0] ", describe(kc0), ", qkv ", describe(wqkv), ", head ",
           describe(head), ", final norm ", describe(final_norm));
  const Shape want[kPerLayer] = {{W, C}, {C}, {C, NH * hs}, {C}, {2 * F, C}, {C, F}};
  const char* names[kPerLayer] = {"qkv",     "input norm", "o", "post-attention norm",
                                  "gate/up", "down"};
  for (std::size_t l = 0; l < layers; ++l) {
    for (std::size_t i = 0; i < kPerLayer; ++i) {
      const Tensor& w = weights[l * kPerLayer + i];
      TT_CHECK(w.defined() && w.shape() == want[i], "cuda::decode_step: layer ", l, "'s ", names[i],
               " weight must be ", shape_str(want[i]), " (bfloat16 on ", x.device().str(),
               "), got ", describe(w));
      check_cuda("decode_step", {&x, &w});
    }
    TT_CHECK(k_cache[l].shape() == kc0.shape() && v_cache[l].shape() == kc0.shape(),
             "cuda::decode_step: layer ", l, "'s caches must be ", kc0.describe(), ", got ",
             describe(k_cache[l]), " and ", describe(v_cache[l]));
    check_cuda("decode_step", {&x, &k_cache[l], &v_cache[l]});
  }
  const bool logits_fit = logits.defined() && logits.dtype() == DType::kFloat32 &&
                          logits.shape() == Shape{M, V} && logits.is_contiguous() &&
                          logits.device() == x.device();
  TT_CHECK(logits_fit, "cuda::decode_step: expected float32 logits [", M, ", ", V, "] on ",
           x.device().str(), ", got ", describe(logits));
  // Scratch: the packed projection and the attention's output (the checks' q).
  const Tensor qkv = empty({M, 1, W}, {DType::kBFloat16, x.device()});
  const Tensor y = empty({M, NH, 1, hs}, {DType::kBFloat16, x.device()});
  check_rope_append("decode_step", y, qkv, cos, sin, positions, start, kc0, v_cache[0]);
  // What it declines (the caller runs the step kernel by kernel): more than one row, more layers than it
  // has room for, sizes the GEMV or the attention does not take, unaligned tensors, shared
  // memory over the GEMV's, a device without cooperative launches.
  const auto is_aligned = [](const Tensor& t) { return aligned16(t.data_ptr()); };
  bool ok = M == 1 && layers <= static_cast<std::size_t>(kStepMaxLayers) && C % 8 == 0 &&
            F % 8 == 0 && (NH * hs) % 8 == 0 && hs % 8 == 0 && hs <= kAttnMaxHs &&
            NH / NKV <= kAttnMaxGroup && is_aligned(x) && is_aligned(final_norm) &&
            is_aligned(head);
  for (const Tensor& t : weights) ok = ok && is_aligned(t);
  for (std::size_t l = 0; l < layers; ++l) {
    ok = ok && is_aligned(k_cache[l]) && is_aligned(v_cache[l]);
  }
  const std::size_t smem =
      static_cast<std::size_t>(std::max({(M + 1) * C, M * F, M * NH * hs})) * sizeof(float);
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  int can_cooperate = 0;
  TT_CUDA_CHECK(cudaDeviceGetAttribute(&can_cooperate, cudaDevAttrCooperativeLaunch, dev));
  if (!ok || smem > kGemvMaxSmem || can_cooperate == 0) return false;
  const int64_t S = (Tmax + kAttnKeys - 1) / kAttnKeys;
  const Tensor gate_up = empty({M, 2 * F}, {DType::kBFloat16, x.device()});
  const Tensor partial = empty({M, NH, S, hs + 2}, {DType::kFloat32, x.device()});
  const Tensor counters = zeros({M * NKV + 1}, {DType::kInt64, x.device()});
  StepArgs args = {};
  for (std::size_t l = 0; l < layers; ++l) {
    const auto w = [&](std::size_t i) { return weights[l * kPerLayer + i].data<bfloat16>(); };
    args.layer[l] = {w(0),
                     w(1),
                     w(2),
                     w(3),
                     w(4),
                     w(5),
                     k_cache[l].data<bfloat16>(),
                     v_cache[l].data<bfloat16>()};
  }
  args.final_norm = final_norm.data<bfloat16>();
  args.head = head.data<bfloat16>();
  args.logits = logits.data<float>();
  args.x = x.data<bfloat16>();
  args.qkv = qkv.data<bfloat16>();
  args.y = y.data<bfloat16>();
  args.gate_up = gate_up.data<bfloat16>();
  args.partial = partial.data<float>();
  args.counters = reinterpret_cast<unsigned long long*>(counters.data<int64_t>());
  args.cos = cos.data<float>();
  args.sin = sin.data<float>();
  args.pos = positions.data<int64_t>();
  args.start = start.data<int64_t>();
  args.layers = static_cast<int>(layers);
  args.C = static_cast<int>(C);
  args.NH = static_cast<int>(NH);
  args.NKV = static_cast<int>(NKV);
  args.hs = static_cast<int>(hs);
  args.F = static_cast<int>(F);
  args.S = static_cast<int>(S);
  args.V = V;
  args.Tmax = Tmax;
  args.eps = static_cast<float>(eps);
  args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  // TT_DECODE_STEP_TRACE=1 (measurements): an eager launch prints where its time goes.
  static const bool trace_on = std::getenv("TT_DECODE_STEP_TRACE") != nullptr;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  TT_CUDA_CHECK(cudaStreamIsCapturing(stream(dev), &capturing));
  const int phases = static_cast<int>(5 * layers + 1);
  Tensor trace;
  if (trace_on && capturing == cudaStreamCaptureStatusNone) {
    std::vector<int64_t> init(static_cast<std::size_t>(3 * (phases + 1)), 0);
    for (int i = 0; i < phases; ++i) init[static_cast<std::size_t>(3 * i)] = -1;  // max unsigned
    trace = from_vector(init, {3 * (phases + 1)}).to(x.device());
    args.trace = reinterpret_cast<unsigned long long*>(trace.data<int64_t>());
  }
  // One block per multiprocessor, all resident at once (the barrier needs them all): a
  // cooperative launch, which fails instead of deadlocking where they would not fit.
  static const int warps = [] {
    const char* v = std::getenv("TT_DECODE_STEP_WARPS");
    const int n = v == nullptr ? 0 : std::atoi(v);
    return n == 8 || n == 12 || n == 16 ? n : kStepWarpsDefault;
  }();
  const auto launch = [&]<int Warps, int Depth>() {
    const std::size_t bytes = kStepRingBytes<Warps, Depth> + smem;
    // Above 48 KiB of shared memory a kernel must opt in (chapter 06); more than the device
    // has: declined.
    if (!allow_dynamic_shared_memory(
            reinterpret_cast<const void*>(decode_step_kernel<Warps, Depth>), bytes, dev)) {
      return false;
    }
    int resident = 0;
    TT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &resident, decode_step_kernel<Warps, Depth>, Warps * kWarpThreads, bytes));
    if (resident < 1) return false;
    cudaLaunchAttribute cooperative = {};
    cooperative.id = cudaLaunchAttributeCooperative;
    cooperative.val.cooperative = 1;
    launch_with(dev, cooperative, true, decode_step_kernel<Warps, Depth>,
                dim3(static_cast<unsigned>(multiprocessor_count(dev))), dim3(Warps * kWarpThreads),
                bytes, args);
    TT_CUDA_CHECK_LAUNCH("decode_step_kernel");
    return true;
  };
  const bool launched = warps == 8    ? launch.template operator()<8, 5>()
                        : warps == 16 ? launch.template operator()<16, 2>()
                                      : launch.template operator()<12, 3>();
  if (launched && trace.defined()) print_step_trace(trace.to(Device::cpu()), phases, warps);
  return launched;
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
TT_REGISTER_KERNEL("llama_decode_attention", tt::DeviceType::kCUDA, tt::cuda::decode_attention);
TT_REGISTER_KERNEL("argmax_rows", tt::DeviceType::kCUDA, tt::cuda::argmax_rows);
TT_REGISTER_KERNEL("llama_decode_step", tt::DeviceType::kCUDA, tt::cuda::decode_step);
