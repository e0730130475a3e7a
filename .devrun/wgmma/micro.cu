// Which LBO/SBO convention does wgmma's no-swizzle descriptor use? S = Q K^T (A, B K-major in
// shared memory) and O = P V (A = P in registers, B = V MN-major), each with both conventions,
// against the CPU. Build: nvcc -arch=sm_90a -std=c++17 micro.cu -o micro
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdint>
#include <cmath>
#include <vector>
using bf16 = __nv_bfloat16;
__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
#include "wgmma_ops.inc"
__device__ uint64_t make_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  uint64_t d = (smem_address(p) & 0x3FFFF) >> 4;
  d |= uint64_t((lbo & 0x3FFFF) >> 4) << 16;
  d |= uint64_t((sbo & 0x3FFFF) >> 4) << 32;
  return d;
}
// core-matrix layout of a tile with C columns
__device__ int core_off(int r, int c, int C) { return ((r / 8) * (C / 8) + c / 8) * 64 + (r % 8) * 8 + (c % 8); }
__device__ void fence_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ uint32_t pack(float lo, float hi) { __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); return *reinterpret_cast<uint32_t*>(&v); }

// mode 0: S = A B^T, K-major both, (lbo, sbo) = conv ? (C*16, 128) : (128, C*16)
// mode 1: O = P V, P from registers (global fp32 P rounded), V MN-major, conv picks (lbo, sbo)
__global__ void k(const float* A, const float* B, float* out, int mode, int conv) {
  __shared__ __align__(128) bf16 sa[64 * 64], sb[64 * 64];
  const int tid = threadIdx.x;
  for (int i = tid; i < 64 * 64; i += 128) {
    int r = i / 64, c = i % 64;
    sa[core_off(r, c, 64)] = __float2bfloat16(A[i]);
    sb[core_off(r, c, 64)] = __float2bfloat16(B[i]);
  }
  fence_async();
  __syncthreads();
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  wg_fence();
  if (mode == 0) {
    uint32_t lbo = conv ? 64 * 16 : 128, sbo = conv ? 128 : 64 * 16;
    for (int ks = 0; ks < 4; ++ks) {
      // k-step: 16 columns = 2 core matrices along K
      uint64_t da = make_desc(sa + ks * 2 * 64 * (conv ? 8 : 1) * 0 + 0, lbo, sbo);
      // address of column 16*ks in core layout: core (0, 2ks) -> offset 2ks*64 elements
      da = make_desc(sa + 2 * ks * 64, lbo, sbo);
      uint64_t db = make_desc(sb + 2 * ks * 64, lbo, sbo);
      wgmma_ss<0>(d, da, db, 1);
    }
  } else {
    // B = V [64 keys][64 hs], K = keys. MN-major: conv 0 -> (lbo = C*16 (K groups), sbo = 128 (N groups)), conv 1 swapped
    uint32_t lbo = conv ? 128 : 64 * 16, sbo = conv ? 64 * 16 : 128;
    for (int ks = 0; ks < 4; ++ks) {
      // A fragment rows 16 warp + g (+8), cols 16 ks + 2t (+1), (+8)
      const float* a = A + (16 * warp) * 64 + 16 * ks;
      uint32_t af[4] = {pack(a[g * 64 + 2 * t], a[g * 64 + 2 * t + 1]),
                        pack(a[(g + 8) * 64 + 2 * t], a[(g + 8) * 64 + 2 * t + 1]),
                        pack(a[g * 64 + 2 * t + 8], a[g * 64 + 2 * t + 9]),
                        pack(a[(g + 8) * 64 + 2 * t + 8], a[(g + 8) * 64 + 2 * t + 9])};
      // rows 16 ks .. : row group 2 ks -> offset 2 ks * (C/8) * 64 elements
      uint64_t db = make_desc(sb + 2 * ks * 8 * 64, lbo, sbo);
      wgmma_rs<1>(d, af, db, 1);
    }
  }
  wg_commit();
  wg_wait0();
  for (int j = 0; j < 8; ++j)
    for (int e = 0; e < 4; ++e) {
      int row = 16 * warp + g + 8 * (e / 2), col = 8 * j + 2 * t + (e % 2);
      out[row * 64 + col] = d[4 * j + e];
    }
}

int main() {
  std::vector<float> A(4096), B(4096), ref(4096), got(4096);
  for (int i = 0; i < 4096; ++i) {
    A[i] = __bfloat162float(__float2bfloat16(std::sin(0.37f * i) ));
    B[i] = __bfloat162float(__float2bfloat16(std::cos(0.11f * i + 1.f)));
  }
  float *dA, *dB, *dO;
  cudaMalloc(&dA, 16384); cudaMalloc(&dB, 16384); cudaMalloc(&dO, 16384);
  cudaMemcpy(dA, A.data(), 16384, cudaMemcpyHostToDevice);
  cudaMemcpy(dB, B.data(), 16384, cudaMemcpyHostToDevice);
  for (int mode = 0; mode < 2; ++mode) {
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < 64; ++c) {
        double s = 0;
        for (int k = 0; k < 64; ++k) s += mode == 0 ? A[r * 64 + k] * B[c * 64 + k] : A[r * 64 + k] * B[k * 64 + c];
        ref[r * 64 + c] = s;
      }
    for (int conv = 0; conv < 2; ++conv) {
      cudaMemset(dO, 0, 16384);
      k<<<1, 128>>>(dA, dB, dO, mode, conv);
      cudaError_t e = cudaDeviceSynchronize();
      cudaMemcpy(got.data(), dO, 16384, cudaMemcpyDeviceToHost);
      double err = 0;
      for (int i = 0; i < 4096; ++i) err = std::fmax(err, std::fabs(got[i] - ref[i]));
      printf("mode %d (%s) conv %d: %s max err %.3g\n", mode, mode ? "P V, MN-major B" : "Q K^T, K-major", conv,
             cudaGetErrorString(e), err);
    }
  }
}
