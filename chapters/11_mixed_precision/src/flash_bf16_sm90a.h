// The Hopper kernels of chapter 11's bf16 FlashAttention (flash_attention_bf16_sm90a.cu), as
// flash_attention_bf16.cu launches them: internal to the chapter (given code).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "tt/flash_attention.h"

namespace tt::cuda {

/// One forward call: the pointers at the tensors' starts, n query rows and nk keys of each of
/// bh = B * NH heads (nh heads per batch row) of size hs, chapter 10's strided layouts, the
/// softmax scale in base 2, and the device and stream to launch on (checked by the caller).
struct FlashSm90aForward {
  const __nv_bfloat16* q = nullptr;
  const __nv_bfloat16* k = nullptr;
  const __nv_bfloat16* v = nullptr;
  __nv_bfloat16* o = nullptr;
  float* lse = nullptr;
  int n = 0, nk = 0, nh = 0, hs = 0;
  unsigned bh = 0;
  FlashLayout in, kv, out;
  float scale_log2 = 0.f;
  int device = 0;
  cudaStream_t stream = nullptr;
};

/// One backward call (the two kernels: dQ and D = rowsum(dO o O) into dsum, then dK, dV), as
/// FlashSm90aForward with dout, o, lse in and dq, dk, dv, dsum out; bkv = B * NKV key/value heads.
struct FlashSm90aBackward {
  const __nv_bfloat16* q = nullptr;
  const __nv_bfloat16* k = nullptr;
  const __nv_bfloat16* v = nullptr;
  const __nv_bfloat16* dout = nullptr;
  const __nv_bfloat16* o = nullptr;
  const float* lse = nullptr;
  float* dsum = nullptr;
  __nv_bfloat16* dq = nullptr;
  __nv_bfloat16* dk = nullptr;
  __nv_bfloat16* dv = nullptr;
  int n = 0, nk = 0, nh = 0, hs = 0;
  unsigned bh = 0, bkv = 0;
  FlashLayout in, kv, out;
  float scale_log2 = 0.f, scale = 0.f;
  int device = 0;
  cudaStream_t stream = nullptr;
};

/// Launches the wgmma backward (sm_90a; the caller checks compute capability 9.0), causal or the
/// full mode's. hs 32, 64 or 128 (else a tt::Error).
void flash_bf16_sm90a_backward(const FlashSm90aBackward& f, bool causal);

/// Launches the wgmma forward (sm_90a; the caller checks compute capability 9.0): the causal
/// kernel, or the full mode's when !causal. hs 32, 64 or 128 (else a tt::Error).
void flash_bf16_sm90a_forward(const FlashSm90aForward& f, bool causal);

}  // namespace tt::cuda
