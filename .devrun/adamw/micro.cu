// Session 17 (issue 23, goal 5): where chapter 07's multi-tensor AdamW loses against a copy of
// the same bytes. Standalone (nvcc -O3 -arch=sm_90 micro.cu): GPT-2 124M's 148 parameter tensors
// (p, g, m, v each), chapter 07's chunk table (65,536-element chunks), and variants of the
// kernel, each timed over 50 launches with CUDA events against cudaMemcpy moving 28 B/param.
//   v0  chapter 07's kernel: grid-stride over chunks, grid = min(chunks, SMs x 8), 1 float4/iter
//   v1  v0 with a balanced grid: every block gets the same number of chunks
//   v2  v0 with 2 float4 per thread per iteration (8 loads in flight before the math)
//   v3  v0 with streaming cache hints (__ldcs / __stcs: evict-first, no L2 reuse)
//   v4  v2 + v3 + balanced grid
//   v5  v2 + balanced grid
//   v6  v0 with the grid sized by the kernel's real occupancy (cudaOccupancy...), balanced
//   v7  v0 at full occupancy: __launch_bounds__(256, 8) (at most 32 registers)
//   v8  v7 with a balanced grid
//   v9  v1's memory traffic without AdamW's arithmetic (p, m, v += g): what the access pattern
//       itself (4 streams read, 3 written) reaches against the copy (1 read, 1 written)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::printf("CUDA %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

struct Coef {
  float decay, beta1, beta2, omb1, omb2, neg_step, bc2_sqrt, eps;
};
struct Entry {
  float* p;
  const float* g;
  float* m;
  float* v;
  long long numel;
};
struct Chunk {
  long long entry, begin;
};
constexpr long long kChunk = 65536;
constexpr int kThreads = 256;

__device__ __forceinline__ void upd(float& p, float g, float& m, float& v, const Coef& c) {
  p = p * c.decay;
  m = m * c.beta1 + c.omb1 * g;
  v = v * c.beta2 + c.omb2 * g * g;
  const float denom = sqrtf(v) / c.bc2_sqrt + c.eps;
  p = p + c.neg_step * m / denom;
}
__device__ __forceinline__ void upd4(float4& p, float4 g, float4& m, float4& v, const Coef& c) {
  upd(p.x, g.x, m.x, v.x, c);
  upd(p.y, g.y, m.y, v.y, c);
  upd(p.z, g.z, m.z, v.z, c);
  upd(p.w, g.w, m.w, v.w, c);
}

template <bool kStream>
__device__ __forceinline__ float4 ld(const float* a) {
  if constexpr (kStream) return __ldcs(reinterpret_cast<const float4*>(a));
  return *reinterpret_cast<const float4*>(a);
}
template <bool kStream>
__device__ __forceinline__ void st(float* a, float4 x) {
  if constexpr (kStream) {
    __stcs(reinterpret_cast<float4*>(a), x);
  } else {
    *reinterpret_cast<float4*>(a) = x;
  }
}

template <int kUnroll, bool kStream, int kMinBlocks = 1, bool kNoMath = false>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    adamw(const Entry* entries, const Chunk* chunks, long long n_chunks, Coef c) {
  for (long long ci = blockIdx.x; ci < n_chunks; ci += gridDim.x) {
    const Chunk ch = chunks[ci];
    const Entry e = entries[ch.entry];
    const long long end = ch.begin + kChunk < e.numel ? ch.begin + kChunk : e.numel;
    const long long vec_end = ch.begin + (end - ch.begin) / 4 * 4;
    long long i = ch.begin + 4 * threadIdx.x;
    constexpr long long kStep = 4LL * kThreads;
    for (; i + (kUnroll - 1) * kStep < vec_end; i += kUnroll * kStep) {
      float4 p[kUnroll], g[kUnroll], m[kUnroll], v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const long long j = i + u * kStep;
        p[u] = ld<kStream>(e.p + j);
        g[u] = ld<kStream>(e.g + j);
        m[u] = ld<kStream>(e.m + j);
        v[u] = ld<kStream>(e.v + j);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const long long j = i + u * kStep;
        if constexpr (kNoMath) {
          p[u].x += g[u].x, p[u].y += g[u].y, p[u].z += g[u].z, p[u].w += g[u].w;
          m[u].x += g[u].x, m[u].y += g[u].y, m[u].z += g[u].z, m[u].w += g[u].w;
          v[u].x += g[u].x, v[u].y += g[u].y, v[u].z += g[u].z, v[u].w += g[u].w;
        } else {
          upd4(p[u], g[u], m[u], v[u], c);
        }
        st<kStream>(e.p + j, p[u]);
        st<kStream>(e.m + j, m[u]);
        st<kStream>(e.v + j, v[u]);
      }
    }
    for (; i < vec_end; i += kStep) {
      float4 p = ld<kStream>(e.p + i), g = ld<kStream>(e.g + i), m = ld<kStream>(e.m + i),
             v = ld<kStream>(e.v + i);
      if constexpr (kNoMath) {
        p.x += g.x, p.y += g.y, p.z += g.z, p.w += g.w;
        m.x += g.x, m.y += g.y, m.z += g.z, m.w += g.w;
        v.x += g.x, v.y += g.y, v.z += g.z, v.w += g.w;
      } else {
        upd4(p, g, m, v, c);
      }
      st<kStream>(e.p + i, p);
      st<kStream>(e.m + i, m);
      st<kStream>(e.v + i, v);
    }
    for (long long k = vec_end + threadIdx.x; k < end; k += blockDim.x) {
      upd(e.p[k], e.g[k], e.m[k], e.v[k], c);
    }
  }
}

int main() {
  const long long C = 768, V = 50257, T = 1024, L = 12;
  std::vector<long long> numels = {V * C, T * C};
  for (int l = 0; l < L; ++l) {
    for (long long n : {C, C, C * 3 * C, 3 * C, C * C, C, C, C, C * 4 * C, 4 * C, 4 * C * C, C}) {
      numels.push_back(n);
    }
  }
  numels.push_back(C);
  numels.push_back(C);
  long long total = 0;
  for (long long n : numels) total += (n + 63) / 64 * 64;
  float* base = nullptr;
  CK(cudaMalloc(&base, 4 * sizeof(float) * total));
  CK(cudaMemset(base, 0, 4 * sizeof(float) * total));
  std::vector<Entry> entries;
  std::vector<Chunk> chunks;
  long long off = 0, params = 0;
  for (long long n : numels) {
    Entry e{base + off, base + total + off, base + 2 * total + off, base + 3 * total + off, n};
    for (long long b = 0; b < n; b += kChunk) chunks.push_back({(long long)entries.size(), b});
    entries.push_back(e);
    off += (n + 63) / 64 * 64;
    params += n;
  }
  Entry* d_entries;
  Chunk* d_chunks;
  CK(cudaMalloc(&d_entries, entries.size() * sizeof(Entry)));
  CK(cudaMalloc(&d_chunks, chunks.size() * sizeof(Chunk)));
  CK(cudaMemcpy(d_entries, entries.data(), entries.size() * sizeof(Entry),
                cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_chunks, chunks.data(), chunks.size() * sizeof(Chunk), cudaMemcpyHostToDevice));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const long long n_chunks = static_cast<long long>(chunks.size());
  const long long max_blocks = static_cast<long long>(sms) * (2048 / kThreads);
  const unsigned grid0 = static_cast<unsigned>(std::min(n_chunks, max_blocks));
  const long long per = (n_chunks + max_blocks - 1) / max_blocks;
  const unsigned grid_bal = static_cast<unsigned>((n_chunks + per - 1) / per);
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, adamw<1, false>, kThreads, 0));
  const long long occ_blocks = static_cast<long long>(sms) * occ;
  const long long per_occ = (n_chunks + occ_blocks - 1) / occ_blocks;
  const unsigned grid_occ = static_cast<unsigned>((n_chunks + per_occ - 1) / per_occ);
  std::printf("occupancy of v0: %d blocks of %d threads per SM; grid %u (%lld chunks each)\n", occ,
              kThreads, grid_occ, per_occ);
  const Coef c{0.9999f, 0.9f, 0.999f, 0.1f, 0.001f, -1e-3f, 0.03f, 1e-8f};
  const double bytes = 28.0 * static_cast<double>(params);
  std::printf("%lld params, %zu tensors, %lld chunks, %d SMs, grid %u (balanced %u, %lld each)\n",
              params, numels.size(), n_chunks, sms, grid0, grid_bal, per);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto time = [&](const char* name, auto&& launch) {
    for (int w = 0; w < 5; ++w) launch();
    CK(cudaDeviceSynchronize());
    const int reps = 50;
    CK(cudaEventRecord(a));
    for (int r = 0; r < reps; ++r) launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    ms /= reps;
    std::printf("%-44s %7.4f ms %7.1f GB/s\n", name, ms, bytes / (ms * 1e-3) / 1e9);
    return ms;
  };
  // The copy: 14 B/param read from one half of a buffer of its own, written to the other.
  const std::size_t copy_bytes = static_cast<std::size_t>(14.0 * static_cast<double>(params));
  char* src = nullptr;
  CK(cudaMalloc(&src, 2 * copy_bytes));
  CK(cudaMemset(src, 0, 2 * copy_bytes));
  char* dst = src + copy_bytes;
  for (int round = 0; round < 2; ++round) {
    const float copy = time("memcpy D2D, 28 B/param moved", [&] {
      CK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice));
    });
    auto rel = [&](float ms) { std::printf("%44s %6.1f%% of the copy\n", "", 100 * copy / ms); };
    rel(time("v0 chapter 07", [&] { adamw<1, false><<<grid0, kThreads>>>(d_entries, d_chunks, n_chunks, c); }));
    rel(time("v1 balanced grid", [&] { adamw<1, false><<<grid_bal, kThreads>>>(d_entries, d_chunks, n_chunks, c); }));
    rel(time("v2 2 float4 / iteration", [&] { adamw<2, false><<<grid0, kThreads>>>(d_entries, d_chunks, n_chunks, c); }));
    rel(time("v3 streaming hints", [&] { adamw<1, true><<<grid0, kThreads>>>(d_entries, d_chunks, n_chunks, c); }));
    rel(time("v4 v2 + v3 + balanced", [&] { adamw<2, true><<<grid_bal, kThreads>>>(d_entries, d_chunks, n_chunks, c); }));
    rel(time("v5 v2 + balanced", [&] { adamw<2, false><<<grid_bal, kThreads>>>(d_entries, d_chunks, n_chunks, c); }));
    rel(time("v6 occupancy-sized balanced grid", [&] { adamw<1, false><<<grid_occ, kThreads>>>(d_entries, d_chunks, n_chunks, c); }));
    rel(time("v7 launch_bounds(256, 8)", [&] { adamw<1, false, 8><<<grid0, kThreads>>>(d_entries, d_chunks, n_chunks, c); }));
    rel(time("v9 v1's traffic, no AdamW arithmetic", [&] { adamw<1, false, 1, true><<<grid_bal, kThreads>>>(d_entries, d_chunks, n_chunks, c); }));
    rel(time("v8 v7 + balanced", [&] { adamw<1, false, 8><<<grid_bal, kThreads>>>(d_entries, d_chunks, n_chunks, c); }));
  }
  return 0;
}
